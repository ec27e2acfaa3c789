-- name: InsertHook :exec
INSERT INTO hooks (id, owner_id, agent_id, kind, queue, filter, title_template, kind_label, secret, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: GetHook :one
SELECT * FROM hooks WHERE id = $1;

-- name: ListHooks :many
-- Empty filters match everything; oldest first.
SELECT * FROM hooks
WHERE (sqlc.arg(owner_id)::text = '' OR owner_id = sqlc.arg(owner_id))
  AND (sqlc.arg(agent_id)::text = '' OR agent_id = sqlc.arg(agent_id))
ORDER BY created_at, id;

-- name: RotateHookSecret :one
UPDATE hooks SET secret = sqlc.arg(secret), updated_at = sqlc.arg(now) WHERE id = sqlc.arg(id) RETURNING *;

-- name: DeleteHook :execrows
DELETE FROM hooks WHERE id = $1;

-- name: InsertDelivery :one
-- A keyed delivery inserts once: ON CONFLICT makes a racing redelivery
-- wait for the first one and then insert nothing (no row returned).
INSERT INTO hook_deliveries (id, hook_id, key, event, action, outcome, reason, todo_id, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, '', $8)
ON CONFLICT (hook_id, key) WHERE key <> '' DO NOTHING
RETURNING id;

-- name: DeliveryByKey :one
SELECT * FROM hook_deliveries WHERE hook_id = $1 AND key = $2;

-- name: SetDeliveryTodo :exec
UPDATE hook_deliveries SET todo_id = $2 WHERE id = $1;

-- name: ListDeliveries :many
-- Newest first.
SELECT * FROM hook_deliveries WHERE hook_id = $1 ORDER BY received_at DESC, id DESC LIMIT $2;
