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
