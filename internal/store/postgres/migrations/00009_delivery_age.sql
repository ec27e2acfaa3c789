-- The delivery log's age index (design: Delivery log retention), PostgreSQL
-- dialect: the prune loop deletes deliveries received before a cutoff
-- across all hooks, which hook_deliveries_recent (hook_id first) cannot
-- serve.

-- +goose Up
CREATE INDEX hook_deliveries_age ON hook_deliveries (received_at);

-- +goose Down
DROP INDEX hook_deliveries_age;
