-- name: ClaimTransition :execrows
-- The conditional update of presence_seen: of racing claims one changes
-- the row. updated_at is left alone (not a configuration change).
UPDATE agents SET presence_seen = sqlc.arg(seen), presence_changed_at = CAST(sqlc.arg(at) AS INTEGER),
    presence_changed_by = sqlc.narg(by)
WHERE id = sqlc.arg(id) AND presence_seen <> sqlc.arg(seen);

-- name: PendingDoorbellTodos :many
-- The agent's pending, push-eligible todos outside the JSON array
-- exclude_queues, oldest first; a negative limit means none.
SELECT id, queue, created_at FROM todos
WHERE agent_id = sqlc.arg(agent_id) AND state = 'pending' AND push_eligible
  AND queue NOT IN (SELECT value FROM json_each(CAST(sqlc.arg(exclude_queues) AS TEXT)))
ORDER BY created_at, id LIMIT sqlc.arg(lim);
