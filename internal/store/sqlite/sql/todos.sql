-- name: LiveTodoByKey :one
-- The live todo (pending, claimed, or failed with a retry) holding the key.
SELECT * FROM todos
WHERE agent_id = ? AND idempotency_key = ?
  AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));

-- name: InsertTodo :one
INSERT INTO todos (id, agent_id, queue, title, payload, kind, source, idempotency_key,
    push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
    ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
    finished_at, next_ring_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
RETURNING *;

-- name: GetTodo :one
SELECT * FROM todos WHERE id = ?;

-- name: ListTodos :many
-- Empty filters match everything; queues is a JSON array; a negative
-- limit means none. Oldest first, after the todo after_id.
SELECT * FROM todos
WHERE (CAST(sqlc.arg(agent_id) AS TEXT) = '' OR agent_id = sqlc.arg(agent_id))
  AND (json_array_length(CAST(sqlc.arg(queues) AS TEXT)) = 0 OR queue IN (SELECT value FROM json_each(sqlc.arg(queues))))
  AND (CAST(sqlc.arg(state) AS TEXT) = '' OR state = sqlc.arg(state))
  AND (CAST(sqlc.arg(after_id) AS TEXT) = '' OR created_at > (SELECT t.created_at FROM todos t WHERE t.id = sqlc.arg(after_id))
       OR (created_at = (SELECT t.created_at FROM todos t WHERE t.id = sqlc.arg(after_id)) AND id > sqlc.arg(after_id)))
ORDER BY created_at, id LIMIT sqlc.arg(lim);

-- name: ClaimTodo :one
-- Claimable at now: pending, or failed with a retry due. The first term
-- is the todos_ready index predicate, verbatim, so the planner uses it.
UPDATE todos SET state = 'claimed', attempt = attempt + 1, lease_expires_at = CAST(sqlc.arg(lease_until) AS INTEGER),
    retry_at = NULL, claimed_at = CAST(sqlc.arg(now) AS INTEGER), updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id)
  AND queue IN (SELECT value FROM json_each(CAST(sqlc.arg(queues) AS TEXT)))
  AND ((state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL))
       AND (state = 'pending' OR retry_at <= sqlc.arg(now)))
RETURNING *;

-- name: ClaimNext :one
-- ClaimTodo of the oldest claimable todo of the agent in queues.
UPDATE todos SET state = 'claimed', attempt = attempt + 1, lease_expires_at = CAST(sqlc.arg(lease_until) AS INTEGER),
    retry_at = NULL, claimed_at = CAST(sqlc.arg(now) AS INTEGER), updated_at = sqlc.arg(now)
WHERE id = (SELECT t.id FROM todos t
    WHERE t.agent_id = sqlc.arg(agent_id) AND t.queue IN (SELECT value FROM json_each(CAST(sqlc.arg(queues) AS TEXT)))
      AND ((t.state = 'pending' OR (t.state = 'failed' AND t.retry_at IS NOT NULL))
           AND (t.state = 'pending' OR t.retry_at <= sqlc.arg(now)))
    ORDER BY t.created_at, t.id LIMIT 1)
RETURNING *;

-- name: TodoOfAgent :one
-- Whether the todo is the agent's (and, unless queues is empty, in one of
-- the JSON array queues).
SELECT count(*) FROM todos
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id)
  AND (CAST(sqlc.arg(queues) AS TEXT) = '' OR queue IN (SELECT value FROM json_each(sqlc.arg(queues))));

-- name: RenewLease :one
-- Held: claimed by the agent, lease not expired at now.
UPDATE todos SET lease_expires_at = CAST(sqlc.arg(lease_until) AS INTEGER), updated_at = CAST(sqlc.arg(now) AS INTEGER)
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id) AND state = 'claimed' AND lease_expires_at > sqlc.arg(now)
RETURNING *;

-- name: CompleteTodo :one
UPDATE todos SET state = 'done', result = sqlc.arg(result), lease_expires_at = NULL,
    updated_at = sqlc.arg(now), finished_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id) AND state = 'claimed' AND lease_expires_at > sqlc.arg(now)
RETURNING *;

-- name: HeldAttempts :one
SELECT attempt, max_attempts FROM todos
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id) AND state = 'claimed' AND lease_expires_at > CAST(sqlc.arg(now) AS INTEGER);

-- name: FailTodo :one
UPDATE todos SET state = 'failed', last_error = sqlc.arg(reason), retry_at = sqlc.arg(retry_at),
    lease_expires_at = NULL, updated_at = sqlc.arg(now), finished_at = sqlc.arg(finished_at)
WHERE id = sqlc.arg(id) RETURNING *;

-- name: ReapExpiredLeases :many
-- Expired claims go back to pending, or at max_attempts to dead letter;
-- the oldest leases first, at most lim (negative: all).
UPDATE todos SET
    state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END,
    finished_at = CASE WHEN attempt < max_attempts THEN NULL ELSE sqlc.arg(now) END,
    lease_expires_at = NULL, retry_at = NULL, last_error = 'lease expired',
    updated_at = sqlc.arg(now)
WHERE id IN (SELECT t.id FROM todos t WHERE t.state = 'claimed' AND t.lease_expires_at <= sqlc.arg(now)
    ORDER BY t.lease_expires_at, t.id LIMIT sqlc.arg(lim))
RETURNING id;
