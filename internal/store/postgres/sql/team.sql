-- name: AdvisoryXactLock :exec
-- Holds the advisory lock key until the transaction ends.
SELECT pg_advisory_xact_lock($1);

-- name: AnyPerson :one
SELECT EXISTS (SELECT 1 FROM persons);

-- name: InsertPerson :exec
INSERT INTO persons (id, name, admin, created_at, updated_at) VALUES ($1, $2, $3, $4, $4);

-- name: InsertToken :exec
INSERT INTO person_tokens (id, person_id, name, hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6);

-- name: GetPerson :one
SELECT * FROM persons WHERE id = $1;

-- name: ListPersons :many
SELECT * FROM persons ORDER BY created_at, id;

-- name: CountOtherActiveAdmins :one
SELECT count(*) FROM persons WHERE admin AND deactivated_at IS NULL AND id <> $1;

-- name: UpdatePerson :one
-- A NULL name keeps the name.
UPDATE persons SET name = coalesce(sqlc.narg(name), name), admin = sqlc.arg(admin),
    deactivated_at = sqlc.narg(deactivated_at), updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) RETURNING *;

-- name: EndPersonSessions :exec
UPDATE console_sessions SET ended_at = sqlc.arg(now)::timestamptz WHERE person_id = sqlc.arg(person_id) AND ended_at IS NULL;

-- name: ListTokens :many
-- The live tokens of the person.
SELECT * FROM person_tokens WHERE person_id = $1 AND revoked_at IS NULL ORDER BY created_at, id;

-- name: RevokeToken :one
UPDATE person_tokens SET revoked_at = sqlc.arg(now)::timestamptz
WHERE id = sqlc.arg(id) AND person_id = sqlc.arg(person_id) AND revoked_at IS NULL RETURNING *;

-- name: EndTokenSessions :exec
UPDATE console_sessions SET ended_at = sqlc.arg(now)::timestamptz WHERE token_id = sqlc.arg(token_id) AND ended_at IS NULL;

-- name: TokenByHash :one
SELECT sqlc.embed(t), sqlc.embed(p) FROM person_tokens t JOIN persons p ON p.id = t.person_id WHERE t.hash = $1;

-- name: TokenByID :one
SELECT sqlc.embed(t), sqlc.embed(p) FROM person_tokens t JOIN persons p ON p.id = t.person_id WHERE t.id = $1;

-- name: TouchToken :exec
-- At most one write per token per interval: only when the last use is
-- older than not_after.
UPDATE person_tokens SET last_used_at = sqlc.arg(at)::timestamptz
WHERE id = sqlc.arg(id) AND (last_used_at IS NULL OR last_used_at <= sqlc.arg(not_after)::timestamptz);

-- name: InsertConsoleSession :exec
INSERT INTO console_sessions (id, person_id, token_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5);

-- name: ConsoleSessionByID :one
SELECT sqlc.embed(s), sqlc.embed(t), sqlc.embed(p)
FROM console_sessions s JOIN person_tokens t ON t.id = s.token_id JOIN persons p ON p.id = s.person_id
WHERE s.id = $1;

-- name: EndConsoleSession :exec
UPDATE console_sessions SET ended_at = sqlc.arg(at)::timestamptz WHERE id = sqlc.arg(id) AND ended_at IS NULL;

-- name: LiveCredentials :many
-- The ids among ids of live credentials of active, unrevoked agents.
SELECT c.id FROM credentials c JOIN agents a ON a.id = c.agent_id
WHERE c.id = ANY (sqlc.arg(ids)::text[]) AND c.revoked_at IS NULL AND a.revoked_at IS NULL AND a.active;
