-- name: InsertTodo :one
-- ON CONFLICT repeats the todos_live_key predicate verbatim so it infers
-- that index: a live todo holding the key makes it insert nothing.
INSERT INTO todos (id, agent_id, queue, title, payload, kind, source, idempotency_key,
    push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
    ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
    finished_at, next_ring_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
    $18, $19, $20, $21, $22, $23, $24)
ON CONFLICT (agent_id, idempotency_key)
    WHERE idempotency_key <> '' AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL))
    DO NOTHING
RETURNING *;

-- name: LiveTodoByKey :one
SELECT * FROM todos
WHERE agent_id = $1 AND idempotency_key = $2
  AND idempotency_key <> '' AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));

-- name: GetTodo :one
SELECT * FROM todos WHERE id = $1;

-- name: ListTodos :many
-- Empty filters match everything; a NULL limit means none. Oldest first,
-- after the todo after_id.
SELECT * FROM todos
WHERE (sqlc.arg(agent_id)::text = '' OR agent_id = sqlc.arg(agent_id))
  AND (cardinality(sqlc.arg(queues)::text[]) = 0 OR queue = ANY (sqlc.arg(queues)::text[]))
  AND (sqlc.arg(state)::text = '' OR state = sqlc.arg(state))
  AND (sqlc.arg(after_id)::text = '' OR created_at > (SELECT t.created_at FROM todos t WHERE t.id = sqlc.arg(after_id))
       OR (created_at = (SELECT t.created_at FROM todos t WHERE t.id = sqlc.arg(after_id)) AND id > sqlc.arg(after_id)))
ORDER BY created_at, id LIMIT sqlc.narg(lim)::bigint;

-- name: ClaimTodo :one
-- One conditional UPDATE, so of two racing claims the second re-checks the
-- row after the first commits and matches nothing. Claimable at now:
-- pending, or failed with a retry due; the first term is the todos_ready
-- index predicate, verbatim, so the planner uses that index.
UPDATE todos SET state = 'claimed', attempt = attempt + 1, lease_expires_at = sqlc.arg(lease_until)::timestamptz,
    retry_at = NULL, claimed_at = sqlc.arg(now)::timestamptz, updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id) AND queue = ANY (sqlc.arg(queues)::text[])
  AND ((state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL))
       AND (state = 'pending' OR retry_at <= sqlc.arg(now)))
RETURNING *;

-- name: ClaimNext :one
-- ClaimTodo of the oldest claimable todo of the agent in queues, picked
-- with FOR UPDATE SKIP LOCKED so concurrent claimers take different rows.
UPDATE todos SET state = 'claimed', attempt = attempt + 1, lease_expires_at = sqlc.arg(lease_until)::timestamptz,
    retry_at = NULL, claimed_at = sqlc.arg(now)::timestamptz, updated_at = sqlc.arg(now)
WHERE id = (SELECT t.id FROM todos t
    WHERE t.agent_id = sqlc.arg(agent_id) AND t.queue = ANY (sqlc.arg(queues)::text[])
      AND ((t.state = 'pending' OR (t.state = 'failed' AND t.retry_at IS NOT NULL))
           AND (t.state = 'pending' OR t.retry_at <= sqlc.arg(now)))
    ORDER BY t.created_at, t.id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING *;

-- name: TodoOfAgent :one
-- Whether the todo is the agent's (and, unless queues is NULL, in one of
-- queues).
SELECT EXISTS (SELECT 1 FROM todos
    WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id)
      AND (sqlc.narg(queues)::text[] IS NULL OR queue = ANY (sqlc.narg(queues)::text[])));

-- name: RenewLease :one
-- Held: claimed by the agent, lease not expired at now.
UPDATE todos SET lease_expires_at = sqlc.arg(lease_until)::timestamptz, updated_at = sqlc.arg(now)::timestamptz
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id) AND state = 'claimed' AND lease_expires_at > sqlc.arg(now)
RETURNING *;

-- name: CompleteTodo :one
UPDATE todos SET state = 'done', result = sqlc.narg(result), lease_expires_at = NULL,
    updated_at = sqlc.arg(now)::timestamptz, finished_at = sqlc.arg(now)::timestamptz
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id) AND state = 'claimed' AND lease_expires_at > sqlc.arg(now)::timestamptz
RETURNING *;

-- name: LockHeldAttempts :one
SELECT attempt, max_attempts FROM todos
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id) AND state = 'claimed'
  AND lease_expires_at > sqlc.arg(now)::timestamptz
FOR UPDATE;

-- name: FailTodo :one
UPDATE todos SET state = 'failed', last_error = sqlc.arg(reason), retry_at = sqlc.narg(retry_at),
    lease_expires_at = NULL, updated_at = sqlc.arg(now), finished_at = sqlc.narg(finished_at)
WHERE id = sqlc.arg(id) RETURNING *;
