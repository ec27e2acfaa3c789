-- name: ClaimTransition :execrows
-- The conditional update of presence_seen: of racing claims (on any
-- instance) one changes the row. updated_at is left alone.
UPDATE agents SET presence_seen = sqlc.arg(seen), presence_changed_at = sqlc.arg(at)::timestamptz,
    presence_changed_by = sqlc.narg(by)
WHERE id = sqlc.arg(id) AND presence_seen <> sqlc.arg(seen);

-- name: PendingDoorbellTodos :many
-- The agent's pending, push-eligible todos outside exclude_queues, oldest
-- first; a NULL limit means none.
SELECT id, queue, created_at FROM todos
WHERE agent_id = sqlc.arg(agent_id) AND state = 'pending' AND push_eligible
  AND queue <> ALL (sqlc.arg(exclude_queues)::text[])
ORDER BY created_at, id LIMIT sqlc.narg(lim)::bigint;
