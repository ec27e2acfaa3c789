-- Claims read a queue in index order (design: Claiming in batches),
-- PostgreSQL dialect: the claimable todos of an agent, and of a pool, are
-- indexed by (created_at, id) — the order claims take them in — so a claim
-- walks the index from its oldest entry and stops after n, however many
-- todos wait. The indexes replace todos_ready and todos_pool_ready, which
-- put the queue before created_at: a claim over queue = ANY(...) read and
-- sorted every waiting todo of the agent.

-- +goose Up
DROP INDEX todos_ready;
CREATE INDEX todos_ready ON todos (agent_id, created_at, id)
    WHERE state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL);
DROP INDEX todos_pool_ready;
CREATE INDEX todos_pool_ready ON todos (pool_id, created_at, id)
    WHERE agent_id IS NULL AND (state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL));

-- +goose Down
DROP INDEX todos_pool_ready;
CREATE INDEX todos_pool_ready ON todos (pool_id, queue, created_at)
    WHERE agent_id IS NULL AND (state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL));
DROP INDEX todos_ready;
CREATE INDEX todos_ready ON todos (agent_id, queue, created_at)
    WHERE state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL);
