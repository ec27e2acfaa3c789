-- name: InsertAgent :exec
-- The presence and liveness columns of a new agent take their defaults: no
-- shift, no override, seen "in", state "unknown".
INSERT INTO agents (id, handle, owner_id, name, active, revoked_at, queues, verbs,
    billing_mode, billing_modes, tool_class, created_at, updated_at, handoff)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14);

-- name: InsertCredential :exec
INSERT INTO credentials (id, agent_id, hash, created_at) VALUES ($1, $2, $3, $4);

-- name: GetAgentByID :one
SELECT * FROM agents WHERE id = $1;

-- name: GetAgentByHandle :one
SELECT * FROM agents WHERE handle = $1;

-- name: ListAgents :many
-- An empty owner lists every agent.
SELECT * FROM agents WHERE sqlc.arg(owner_id)::text = '' OR owner_id = sqlc.arg(owner_id) ORDER BY handle;

-- name: LockAgent :one
-- Locks the agent's row for the rest of the transaction.
SELECT revoked_at FROM agents WHERE id = $1 FOR UPDATE;

-- name: UpdateAgent :one
-- NULL arguments keep the column's value.
UPDATE agents SET
    name = coalesce(sqlc.narg(name), name),
    billing_mode = coalesce(sqlc.narg(billing_mode), billing_mode),
    billing_modes = coalesce(sqlc.narg(billing_modes), billing_modes),
    tool_class = coalesce(sqlc.narg(tool_class), tool_class),
    active = coalesce(sqlc.narg(active), active),
    owner_id = coalesce(sqlc.narg(owner_id), owner_id),
    updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) RETURNING *;

-- name: MoveAgentHooks :exec
-- A hand-over moves the agent's hooks with it: a hook belongs to whoever
-- owns the agent it feeds.
UPDATE hooks SET owner_id = sqlc.arg(owner_id), updated_at = sqlc.arg(now) WHERE agent_id = sqlc.arg(agent_id);

-- name: RevokeAgent :one
UPDATE agents SET revoked_at = sqlc.arg(now), active = false, updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) RETURNING *;

-- name: RevokeCredentials :many
-- Every live credential of the agent; the ids revoked.
UPDATE credentials SET revoked_at = sqlc.arg(now)
WHERE agent_id = sqlc.arg(agent_id) AND revoked_at IS NULL RETURNING id;

-- name: AgentByCredentialHash :one
SELECT sqlc.embed(a), c.id AS credential_id
FROM credentials c JOIN agents a ON a.id = c.agent_id
WHERE c.hash = $1 AND c.revoked_at IS NULL;
