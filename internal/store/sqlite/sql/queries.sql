-- name: InsertAgent :exec
-- The presence and liveness columns of a new agent take their defaults: no
-- shift, no override, seen "in", state "unknown".
INSERT INTO agents (id, handle, owner_id, name, active, revoked_at, queues, verbs,
    billing_mode, billing_modes, tool_class, created_at, updated_at, handoff)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: InsertCredential :exec
INSERT INTO credentials (id, agent_id, hash, created_at) VALUES (?, ?, ?, ?);

-- name: GetAgent :one
-- By id or by handle: the caller passes one and leaves the other empty (no
-- agent has an empty id or handle). Each term is a unique index lookup.
SELECT * FROM agents WHERE id = sqlc.arg(id) OR handle = sqlc.arg(handle);

-- name: ListAgents :many
-- An empty owner lists every agent.
SELECT * FROM agents WHERE sqlc.arg(owner_id) = '' OR owner_id = sqlc.arg(owner_id) ORDER BY handle;

-- name: AgentRevokedAt :one
SELECT revoked_at FROM agents WHERE id = ?;

-- name: UpdateAgent :one
-- NULL arguments keep the column's value; revoking sets revoked_at and
-- active = false.
UPDATE agents SET
    name = coalesce(sqlc.narg(name), name),
    billing_mode = coalesce(sqlc.narg(billing_mode), billing_mode),
    billing_modes = coalesce(sqlc.narg(billing_modes), billing_modes),
    tool_class = coalesce(sqlc.narg(tool_class), tool_class),
    active = coalesce(sqlc.narg(active), active),
    owner_id = coalesce(sqlc.narg(owner_id), owner_id),
    revoked_at = coalesce(sqlc.narg(revoked_at), revoked_at),
    updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) RETURNING *;

-- name: MoveAgentHooks :exec
-- A hand-over moves the agent's hooks with it: a hook belongs to whoever
-- owns the agent it feeds.
UPDATE hooks SET owner_id = sqlc.arg(owner_id), updated_at = sqlc.arg(now) WHERE agent_id = sqlc.arg(agent_id);

-- name: RevokeCredentials :many
-- Every live credential of the agent; the ids revoked.
UPDATE credentials SET revoked_at = sqlc.arg(now)
WHERE agent_id = sqlc.arg(agent_id) AND revoked_at IS NULL RETURNING id;

-- name: AgentByCredentialHash :one
SELECT sqlc.embed(a), c.id AS credential_id
FROM credentials c JOIN agents a ON a.id = c.agent_id
WHERE c.hash = ? AND c.revoked_at IS NULL;

-- name: ListLiveAgents :many
-- Online or degraded agents after after_id in id order; a negative limit
-- means none.
SELECT * FROM agents WHERE state IN ('online', 'degraded') AND id > sqlc.arg(after_id)
ORDER BY id LIMIT sqlc.arg(lim);

-- name: PersistHeartbeatReport :execrows
-- Monotone: an older heartbeat never overwrites a newer one.
UPDATE agents SET state = sqlc.arg(state), last_heartbeat_at = CAST(sqlc.arg(heartbeat_at) AS INTEGER),
    reported_runtime_version = sqlc.narg(runtime_version), reported_state = sqlc.narg(reported_state)
WHERE id = sqlc.arg(id) AND (last_heartbeat_at IS NULL OR last_heartbeat_at <= sqlc.arg(heartbeat_at));

-- name: PersistHeartbeatState :execrows
UPDATE agents SET state = sqlc.arg(state), last_heartbeat_at = CAST(sqlc.arg(heartbeat_at) AS INTEGER)
WHERE id = sqlc.arg(id) AND (last_heartbeat_at IS NULL OR last_heartbeat_at <= sqlc.arg(heartbeat_at));

-- name: ReportedPair :one
SELECT reported_billing_mode, reported_tool_class FROM agents WHERE id = ?;

-- name: ApplyReportedChange :exec
UPDATE agents SET reported_billing_mode = sqlc.narg(billing_mode), reported_tool_class = sqlc.narg(tool_class),
    reported_runtime_version = sqlc.narg(runtime_version), reported_state = sqlc.narg(reported_state),
    state = sqlc.arg(state),
    last_heartbeat_at = max(coalesce(last_heartbeat_at, CAST(sqlc.arg(heartbeat_at) AS INTEGER)), sqlc.arg(heartbeat_at))
WHERE id = sqlc.arg(id);

-- name: ApplyProjectReadiness :execrows
UPDATE agents SET project_readiness = sqlc.narg(readiness), updated_at = sqlc.arg(now) WHERE id = sqlc.arg(id);

-- name: MarkFirstStream :execrows
-- One conditional UPDATE: of racing callers exactly one changes the row.
UPDATE agents SET first_stream_at = CAST(sqlc.arg(now) AS INTEGER) WHERE id = sqlc.arg(id) AND first_stream_at IS NULL;

-- name: ClaimTransition :execrows
-- The conditional update of presence_seen: of racing claims one changes
-- the row. updated_at is left alone (not a configuration change).
-- A claim evaluated at an instant before the last claimed transition's is
-- refused: a clock a little behind another instance's cannot undo the
-- transition that instance claimed (design: Transition claim).
UPDATE agents SET presence_seen = sqlc.arg(seen), presence_changed_at = CAST(sqlc.arg(at) AS INTEGER),
    presence_changed_by = sqlc.narg(by)
WHERE id = sqlc.arg(id) AND presence_seen <> sqlc.arg(seen)
    AND (presence_changed_at IS NULL OR presence_changed_at <= CAST(sqlc.arg(at) AS INTEGER));

-- name: PendingDoorbellTodos :many
-- The agent's pending, push-eligible todos outside the JSON array
-- exclude_queues, and the pooled ones rung at it (design: Pool routing),
-- oldest first; a negative limit means none.
SELECT id, queue, created_at FROM todos
WHERE (agent_id = CAST(sqlc.arg(agent_id) AS TEXT) OR (agent_id IS NULL AND ring_agent_id = CAST(sqlc.arg(agent_id) AS TEXT)))
  AND state = 'pending' AND push_eligible
  AND queue NOT IN (SELECT value FROM json_each(CAST(sqlc.arg(exclude_queues) AS TEXT)))
ORDER BY created_at, id LIMIT sqlc.arg(lim);

-- name: LiveTodoByKey :one
-- The live todo (pending, claimed, or failed with a retry) pushed to the
-- agent holding the key.
SELECT * FROM todos
WHERE agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND idempotency_key = sqlc.arg(idempotency_key) AND pool_id IS NULL
  AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));

-- name: LivePoolTodoByKey :one
-- The live todo pushed to the pool holding the key (design: Pools).
SELECT * FROM todos
WHERE pool_id = CAST(sqlc.arg(pool_id) AS TEXT) AND idempotency_key = sqlc.arg(idempotency_key)
  AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));

-- name: InsertTodo :one
INSERT INTO todos (id, agent_id, queue, title, payload, kind, source, idempotency_key,
    push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
    ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
    finished_at, next_ring_at, pool_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING *;

-- name: GetTodo :one
SELECT * FROM todos WHERE id = ?;

-- name: ListTodos :many
-- Empty filters match everything; queues is a JSON array; a negative
-- limit means none. Oldest first, after the todo after_id. with_pools
-- adds the unclaimed todos of the agent's pools; pool_id lists a pool's
-- todos (design: Pools); live keeps the live ones (pending, claimed, or
-- failed with a retry scheduled: domain.Todo.Live).
SELECT * FROM todos
WHERE ((CAST(sqlc.arg(agent_id) AS TEXT) = '' AND CAST(sqlc.arg(pool_id) AS TEXT) = '')
       OR agent_id = CAST(sqlc.arg(agent_id) AS TEXT) OR pool_id = CAST(sqlc.arg(pool_id) AS TEXT)
       OR (CAST(sqlc.arg(with_pools) AS INTEGER) AND agent_id IS NULL
           AND pool_id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = CAST(sqlc.arg(agent_id) AS TEXT))))
  AND (json_array_length(CAST(sqlc.arg(queues) AS TEXT)) = 0 OR queue IN (SELECT value FROM json_each(sqlc.arg(queues))))
  AND (CAST(sqlc.arg(state) AS TEXT) = '' OR state = sqlc.arg(state))
  AND (NOT CAST(sqlc.arg(live) AS INTEGER) OR state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL))
  AND (CAST(sqlc.arg(after_id) AS TEXT) = '' OR created_at > (SELECT t.created_at FROM todos t WHERE t.id = sqlc.arg(after_id))
       OR (created_at = (SELECT t.created_at FROM todos t WHERE t.id = sqlc.arg(after_id)) AND id > sqlc.arg(after_id)))
ORDER BY created_at, id LIMIT sqlc.arg(lim);

-- name: ClaimTodo :one
-- Claimable at now: pending, or failed with a retry due. The first term
-- is the todos_ready index predicate, verbatim, so the planner uses it.
-- The agent's own todo, or an unclaimed todo of one of its pools (design:
-- Pools); the claim takes the todo out of its pool and ends its ring.
UPDATE todos SET state = 'claimed', attempt = attempt + 1, lease_expires_at = CAST(sqlc.arg(lease_until) AS INTEGER),
    retry_at = NULL, claimed_at = CAST(sqlc.arg(now) AS INTEGER), updated_at = sqlc.arg(now),
    agent_id = CAST(sqlc.arg(agent_id) AS TEXT), ring_agent_id = NULL
WHERE id = sqlc.arg(id)
  AND (agent_id = CAST(sqlc.arg(agent_id) AS TEXT)
       OR (agent_id IS NULL AND pool_id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = CAST(sqlc.arg(agent_id) AS TEXT))))
  AND queue IN (SELECT value FROM json_each(CAST(sqlc.arg(queues) AS TEXT)))
  AND ((state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL))
       AND (state = 'pending' OR retry_at <= sqlc.arg(now)))
RETURNING *;

-- name: ClaimNext :many
-- ClaimTodo of the lim oldest claimable todos of the agent or of its pools
-- in queues: the oldest lim of the first lim of each index walk, one walk
-- per queue of the agent and per queue of each of its pools. A walk is a
-- correlated subquery that reads its index in order and stops after lim
-- rows, so a claim costs the same however many todos wait (one walk over
-- every queue at once would read and sort all of them). The rows come
-- back in no particular order.
UPDATE todos SET state = 'claimed', attempt = attempt + 1, lease_expires_at = CAST(sqlc.arg(lease_until) AS INTEGER),
    retry_at = NULL, claimed_at = CAST(sqlc.arg(now) AS INTEGER), updated_at = sqlc.arg(now),
    agent_id = CAST(sqlc.arg(agent_id) AS TEXT), ring_agent_id = NULL
WHERE id IN (SELECT pick.id FROM (
    SELECT t.id, t.created_at FROM json_each(CAST(sqlc.arg(queues) AS TEXT)) AS q, todos t
    WHERE t.id IN (SELECT o.id FROM todos o
        WHERE o.agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND o.queue = q.value
          AND ((o.state = 'pending' OR (o.state = 'failed' AND o.retry_at IS NOT NULL))
               AND (o.state = 'pending' OR o.retry_at <= sqlc.arg(now)))
        ORDER BY o.created_at, o.id LIMIT CAST(sqlc.arg(lim) AS INTEGER))
    UNION ALL
    SELECT t.id, t.created_at FROM pool_members m, json_each(CAST(sqlc.arg(queues) AS TEXT)) AS q, todos t
    WHERE m.agent_id = CAST(sqlc.arg(agent_id) AS TEXT)
      AND t.id IN (SELECT p.id FROM todos p
        WHERE p.pool_id = m.pool_id AND p.queue = q.value
          AND p.agent_id IS NULL AND (p.state = 'pending' OR (p.state = 'failed' AND p.retry_at IS NOT NULL))
          AND (p.state = 'pending' OR p.retry_at <= sqlc.arg(now))
        ORDER BY p.created_at, p.id LIMIT CAST(sqlc.arg(lim) AS INTEGER))) AS pick
    ORDER BY pick.created_at, pick.id LIMIT CAST(sqlc.arg(lim) AS INTEGER))
RETURNING *;

-- name: TodoOfAgent :one
-- Whether the todo is the agent's or one of its pools' (and, unless
-- queues is empty, in one of the JSON array queues).
SELECT count(*) FROM todos
WHERE id = sqlc.arg(id)
  AND (agent_id = CAST(sqlc.arg(agent_id) AS TEXT)
       OR pool_id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = CAST(sqlc.arg(agent_id) AS TEXT)))
  AND (CAST(sqlc.arg(queues) AS TEXT) = '' OR queue IN (SELECT value FROM json_each(sqlc.arg(queues))));

-- name: RenewLease :one
-- Held: claimed by the agent, lease not expired at now.
UPDATE todos SET lease_expires_at = CAST(sqlc.arg(lease_until) AS INTEGER), updated_at = CAST(sqlc.arg(now) AS INTEGER)
WHERE id = sqlc.arg(id) AND agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND state = 'claimed' AND lease_expires_at > sqlc.arg(now)
RETURNING *;

-- name: CompleteTodo :one
UPDATE todos SET state = 'done', result = sqlc.arg(result), lease_expires_at = NULL,
    updated_at = sqlc.arg(now), finished_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND state = 'claimed' AND lease_expires_at > sqlc.arg(now)
RETURNING *;

-- name: HeldAttempts :one
SELECT attempt, max_attempts FROM todos
WHERE id = sqlc.arg(id) AND agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND state = 'claimed' AND lease_expires_at > CAST(sqlc.arg(now) AS INTEGER);

-- name: FailTodo :one
-- A pooled todo that will be retried goes back to its pool (design: Pools).
UPDATE todos SET state = 'failed', last_error = sqlc.arg(reason), retry_at = sqlc.arg(retry_at),
    lease_expires_at = NULL, updated_at = sqlc.arg(now), finished_at = sqlc.arg(finished_at),
    agent_id = CASE WHEN pool_id IS NOT NULL AND sqlc.arg(retry_at) IS NOT NULL THEN NULL ELSE agent_id END
WHERE id = sqlc.arg(id) RETURNING *;

-- name: ReapExpiredLeases :many
-- Expired claims go back to pending, or at max_attempts to dead letter;
-- the oldest leases first, at most lim (negative: all). A pooled todo
-- going back to pending goes back to its pool (design: Pools).
UPDATE todos SET
    state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END,
    finished_at = CASE WHEN attempt < max_attempts THEN NULL ELSE sqlc.arg(now) END,
    agent_id = CASE WHEN pool_id IS NOT NULL AND attempt < max_attempts THEN NULL ELSE agent_id END,
    lease_expires_at = NULL, retry_at = NULL, last_error = 'lease expired', ring_agent_id = NULL,
    updated_at = sqlc.arg(now)
WHERE id IN (SELECT t.id FROM todos t WHERE t.state = 'claimed' AND t.lease_expires_at <= sqlc.arg(now)
    ORDER BY t.lease_expires_at, t.id LIMIT sqlc.arg(lim))
RETURNING id, coalesce(agent_id, '') AS agent_id, coalesce(pool_id, '') AS pool_id;

-- name: AuditTail :one
SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1;

-- name: InsertAudit :exec
INSERT INTO audit (seq, at, actor, action, agent_id, decision, data, prev_hash, hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: ListAudit :many
-- An empty agent lists every entry; a negative limit means none.
SELECT * FROM audit
WHERE seq > sqlc.arg(after_seq) AND (sqlc.arg(agent_id) = '' OR agent_id = sqlc.arg(agent_id))
ORDER BY seq LIMIT sqlc.arg(lim);

-- name: InsertHook :exec
INSERT INTO hooks (id, owner_id, agent_id, kind, queue, filter, title_template, kind_label, secret, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: GetHook :one
SELECT * FROM hooks WHERE id = ?;

-- name: ListHooks :many
-- Empty filters match everything; oldest first.
SELECT * FROM hooks
WHERE (CAST(sqlc.arg(owner_id) AS TEXT) = '' OR owner_id = sqlc.arg(owner_id))
  AND (CAST(sqlc.arg(agent_id) AS TEXT) = '' OR agent_id = sqlc.arg(agent_id))
ORDER BY created_at, id;

-- name: RotateHookSecret :one
UPDATE hooks SET secret = sqlc.arg(secret), updated_at = sqlc.arg(now) WHERE id = sqlc.arg(id) RETURNING *;

-- name: DeleteHook :execrows
DELETE FROM hooks WHERE id = ?;

-- name: DeliveryByKey :one
SELECT * FROM hook_deliveries WHERE hook_id = ? AND key = ?;

-- name: InsertDelivery :exec
INSERT INTO hook_deliveries (id, hook_id, key, event, action, outcome, reason, todo_id, received_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: ListDeliveries :many
-- Newest first.
SELECT * FROM hook_deliveries WHERE hook_id = ? ORDER BY received_at DESC, id DESC LIMIT ?;

-- name: PruneDeliveries :execrows
-- One batch of the delivery log's pruning: at most lim deliveries received
-- before the cutoff, found through hook_deliveries_age.
DELETE FROM hook_deliveries WHERE id IN (
    SELECT old.id FROM hook_deliveries AS old WHERE old.received_at < sqlc.arg(before) LIMIT sqlc.arg(lim)
);

-- name: CountPersons :one
SELECT count(*) FROM persons;

-- name: InsertPerson :exec
INSERT INTO persons (id, name, admin, created_at, updated_at) VALUES (?, ?, ?, ?, ?);

-- name: InsertToken :exec
INSERT INTO person_tokens (id, person_id, name, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?);

-- name: GetPerson :one
SELECT * FROM persons WHERE id = ?;

-- name: ListPersons :many
SELECT * FROM persons ORDER BY created_at, id;

-- name: CountOtherActiveAdmins :one
SELECT count(*) FROM persons WHERE admin = 1 AND deactivated_at IS NULL AND id <> ?;

-- name: UpdatePerson :one
-- A NULL name keeps the name.
UPDATE persons SET name = coalesce(sqlc.narg(name), name), admin = sqlc.arg(admin),
    deactivated_at = sqlc.narg(deactivated_at), updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) RETURNING *;

-- name: EndPersonSessions :exec
UPDATE console_sessions SET ended_at = CAST(sqlc.arg(now) AS INTEGER) WHERE person_id = sqlc.arg(person_id) AND ended_at IS NULL;

-- name: ListTokens :many
-- The live tokens of the person.
SELECT * FROM person_tokens WHERE person_id = ? AND revoked_at IS NULL ORDER BY created_at, id;

-- name: RevokeToken :one
UPDATE person_tokens SET revoked_at = CAST(sqlc.arg(now) AS INTEGER)
WHERE id = sqlc.arg(id) AND person_id = sqlc.arg(person_id) AND revoked_at IS NULL RETURNING *;

-- name: EndTokenSessions :exec
UPDATE console_sessions SET ended_at = CAST(sqlc.arg(now) AS INTEGER) WHERE token_id = sqlc.arg(token_id) AND ended_at IS NULL;

-- name: TokenWithPerson :one
-- By hash or by id: the caller passes one and leaves the other empty. Each
-- term is a unique index lookup.
SELECT sqlc.embed(t), sqlc.embed(p) FROM person_tokens t JOIN persons p ON p.id = t.person_id
WHERE t.hash = sqlc.arg(hash) OR t.id = sqlc.arg(id);

-- name: TouchToken :exec
-- At most one write per token per interval: only when the last use is
-- older than not_after.
UPDATE person_tokens SET last_used_at = CAST(sqlc.arg(at) AS INTEGER)
WHERE id = sqlc.arg(id) AND (last_used_at IS NULL OR last_used_at <= CAST(sqlc.arg(not_after) AS INTEGER));

-- name: InsertConsoleSession :exec
INSERT INTO console_sessions (id, person_id, token_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?);

-- name: ConsoleSessionByID :one
SELECT sqlc.embed(s), sqlc.embed(t), sqlc.embed(p)
FROM console_sessions s JOIN person_tokens t ON t.id = s.token_id JOIN persons p ON p.id = s.person_id
WHERE s.id = ?;

-- name: EndConsoleSession :exec
UPDATE console_sessions SET ended_at = CAST(sqlc.arg(at) AS INTEGER) WHERE id = sqlc.arg(id) AND ended_at IS NULL;

-- name: LiveCredentials :many
-- The ids among the JSON array ids of live credentials of active, unrevoked
-- agents. One statement text for any number of ids, so it is prepared once.
SELECT c.id FROM credentials c JOIN agents a ON a.id = c.agent_id
WHERE c.id IN (SELECT value FROM json_each(CAST(sqlc.arg(ids) AS TEXT))) AND c.revoked_at IS NULL AND a.revoked_at IS NULL AND a.active = 1;

-- intake hardening: hook secrets sealed at rest (design: Hook secrets sealed at rest)

-- name: ResealHookSecret :execrows
-- Only while the secret is still the one read: a rotation or another
-- instance's reseal in between wins.
UPDATE hooks SET secret = sqlc.arg(secret) WHERE id = sqlc.arg(id) AND secret = sqlc.arg(old);

-- failed-auth limit: could this hash authenticate
-- name: CredentialMayAuthenticate :one
-- Whether an unrevoked credential has the hash and its agent is not revoked
-- (an inactive agent is the handler's to refuse). One probe of the unique
-- hash index; no row is returned.
SELECT EXISTS (SELECT 1 FROM credentials c JOIN agents a ON a.id = c.agent_id
WHERE c.hash = ? AND c.revoked_at IS NULL AND a.revoked_at IS NULL) AS ok;

-- name: TokenMayAuthenticate :one
-- Whether an unrevoked token unexpired at now has the hash and its person is
-- active. One probe of the unique hash index; no row is returned.
SELECT EXISTS (SELECT 1 FROM person_tokens t JOIN persons p ON p.id = t.person_id
WHERE t.hash = sqlc.arg(hash) AND t.revoked_at IS NULL
  AND (t.expires_at IS NULL OR t.expires_at > CAST(sqlc.arg(now) AS INTEGER))
  AND p.deactivated_at IS NULL) AS ok;

-- Pools (design: Pools).

-- name: InsertPool :exec
INSERT INTO pools (id, owner_id, name, created_at) VALUES (?, ?, ?, ?);

-- name: InsertPoolQueue :exec
INSERT INTO pool_queues (pool_id, queue) VALUES (?, ?);

-- name: InsertPoolMember :execrows
-- An agent of another person than the pool's owner joins through that
-- owner's grant (design: Pool grants): granted_to is the pool's owner, and
-- the foreign key to pool_grants refuses it without the grant. No row: the
-- agent or the pool is unknown.
INSERT INTO pool_members (pool_id, agent_id, granted_to)
SELECT p.id, a.id, CASE WHEN a.owner_id = p.owner_id THEN NULL ELSE p.owner_id END
FROM pools p JOIN agents a ON a.id = CAST(sqlc.arg(agent_id) AS TEXT)
WHERE p.id = CAST(sqlc.arg(pool_id) AS TEXT);

-- name: GetPool :one
-- By id, or (id empty) by owner and name.
SELECT * FROM pools
WHERE (CAST(sqlc.arg(id) AS TEXT) <> '' AND id = sqlc.arg(id))
   OR (CAST(sqlc.arg(id) AS TEXT) = '' AND owner_id = CAST(sqlc.arg(owner_id) AS TEXT) AND name = CAST(sqlc.arg(name) AS TEXT));

-- name: ListPools :many
-- Empty filters match everything; by owner, then name.
SELECT * FROM pools
WHERE (CAST(sqlc.arg(owner_id) AS TEXT) = '' OR owner_id = sqlc.arg(owner_id))
  AND (CAST(sqlc.arg(member_id) AS TEXT) = '' OR id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = sqlc.arg(member_id)))
ORDER BY owner_id, name, id;

-- name: ListPoolsOfMembers :many
-- The pools with a member among the JSON array member_ids, by owner, then
-- name: one read for all of a sweep's receivers (design: Pool routing).
SELECT * FROM pools
WHERE id IN (SELECT m.pool_id FROM pool_members m
             WHERE m.agent_id IN (SELECT value FROM json_each(CAST(sqlc.arg(member_ids) AS TEXT))))
ORDER BY owner_id, name, id;

-- name: PoolQueues :many
SELECT queue FROM pool_queues WHERE pool_id = ? ORDER BY queue;

-- name: PoolMembers :many
SELECT agent_id, last_rung_at FROM pool_members WHERE pool_id = ? ORDER BY agent_id;

-- name: PoolLiveTodos :one
-- How many todos of the pool are live (pending, claimed, or waiting for a retry).
SELECT count(*) FROM todos
WHERE pool_id = ? AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));

-- name: DeletePool :execrows
DELETE FROM pools WHERE id = ?;

-- name: ReleaseRing :execrows
-- Ends the ring of a pooled todo while it is still with the agent (design: Pool routing).
UPDATE todos SET ring_agent_id = NULL
WHERE id = sqlc.arg(id) AND ring_agent_id = CAST(sqlc.arg(agent_id) AS TEXT);

-- name: TouchPoolMember :exec
-- The member was rung for a todo of the pool at at (design: Pool routing; least recently rung first).
UPDATE pool_members SET last_rung_at = CAST(sqlc.arg(at) AS INTEGER)
WHERE agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND pool_id = (SELECT t.pool_id FROM todos t WHERE t.id = sqlc.arg(todo_id));

-- Pool grants (design: Pool grants).

-- name: InsertPoolGrant :execrows
-- No row: the agent has granted the person already.
INSERT INTO pool_grants (agent_id, person_id, granted_by, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (agent_id, person_id) DO NOTHING;

-- name: GetPoolGrant :one
SELECT * FROM pool_grants WHERE agent_id = ? AND person_id = ?;

-- name: ListPoolGrants :many
-- Empty filters match everything; by agent, then creation.
SELECT * FROM pool_grants
WHERE (CAST(sqlc.arg(agent_id) AS TEXT) = '' OR agent_id = sqlc.arg(agent_id))
  AND (CAST(sqlc.arg(person_id) AS TEXT) = '' OR person_id = sqlc.arg(person_id))
ORDER BY agent_id, created_at, person_id;

-- name: DeletePoolMember :execrows
DELETE FROM pool_members WHERE pool_id = CAST(sqlc.arg(pool_id) AS TEXT) AND agent_id = CAST(sqlc.arg(agent_id) AS TEXT);

-- name: UnringPoolMember :many
-- Ends the rings at the agent of the pool's todos (pending, unclaimed):
-- they are held.
UPDATE todos SET ring_agent_id = NULL
WHERE pool_id = CAST(sqlc.arg(pool_id) AS TEXT) AND ring_agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND agent_id IS NULL
RETURNING id;

-- name: GrantedPools :many
-- The pools the agent joined through its grant to the person.
SELECT pool_id FROM pool_members WHERE agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND granted_to = CAST(sqlc.arg(person_id) AS TEXT) ORDER BY pool_id;

-- name: UnringGranted :many
-- Ends the rings at the agent of the pooled todos of the pools it joined
-- through its grant to the person (the todos are held).
UPDATE todos SET ring_agent_id = NULL
WHERE ring_agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND agent_id IS NULL
  AND pool_id IN (SELECT m.pool_id FROM pool_members m
                  WHERE m.agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND m.granted_to = CAST(sqlc.arg(person_id) AS TEXT))
RETURNING id;

-- name: DeletePoolGrant :execrows
-- Deletes the agent's memberships through the grant with it (ON DELETE CASCADE).
DELETE FROM pool_grants WHERE agent_id = ? AND person_id = ?;

-- name: GrantPoolsOnHandOver :exec
-- A hand-over to owner_id (design: Pool grants): the agent stays in the
-- pools of other persons it was in as their own, through a grant to each
-- pool's owner made by the person handing it over.
INSERT INTO pool_grants (agent_id, person_id, granted_by, created_at)
SELECT DISTINCT m.agent_id, p.owner_id, CAST(sqlc.arg(granted_by) AS TEXT), CAST(sqlc.arg(at) AS INTEGER)
FROM pool_members m JOIN pools p ON p.id = m.pool_id
WHERE m.agent_id = CAST(sqlc.arg(agent_id) AS TEXT) AND m.granted_to IS NULL AND p.owner_id <> CAST(sqlc.arg(owner_id) AS TEXT)
ON CONFLICT (agent_id, person_id) DO NOTHING;

-- name: RegrantPoolMembers :exec
-- After a hand-over to owner_id: the agent's memberships in owner_id's
-- pools need no grant; in the others' they go through the grant to the
-- pool's owner.
UPDATE pool_members SET granted_to = NULLIF((SELECT p.owner_id FROM pools p WHERE p.id = pool_members.pool_id), CAST(sqlc.arg(owner_id) AS TEXT))
WHERE agent_id = CAST(sqlc.arg(agent_id) AS TEXT);
