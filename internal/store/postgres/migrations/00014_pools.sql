-- Pools (design: Pools), PostgreSQL dialect: a person's named set of
-- member agents sharing queues. A pooled todo has pool_id set and agent_id
-- NULL until a member claims it; ring_agent_id is the one member its
-- doorbell rings now (design: Pool routing). The idempotency index of
-- agent pushes now covers only todos pushed to an agent; pooled todos have
-- their own, per pool.

-- +goose Up
CREATE TABLE pools (
    id         text        PRIMARY KEY,
    owner_id   text        NOT NULL,
    name       text        NOT NULL,
    created_at timestamptz NOT NULL,
    UNIQUE (owner_id, name)
);

CREATE TABLE pool_queues (
    pool_id text NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    queue   text NOT NULL,
    PRIMARY KEY (pool_id, queue)
);

CREATE TABLE pool_members (
    pool_id      text        NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    agent_id     text        NOT NULL REFERENCES agents (id),
    last_rung_at timestamptz,
    PRIMARY KEY (pool_id, agent_id)
);
CREATE INDEX pool_members_agent ON pool_members (agent_id);

ALTER TABLE todos ADD COLUMN pool_id text REFERENCES pools (id) ON DELETE SET NULL;
ALTER TABLE todos ADD COLUMN ring_agent_id text;
ALTER TABLE todos ALTER COLUMN agent_id DROP NOT NULL;
ALTER TABLE todos ADD CONSTRAINT todos_agent_or_pool CHECK (agent_id IS NOT NULL OR pool_id IS NOT NULL);

-- CreateTodo's ON CONFLICT clauses repeat these predicates verbatim.
DROP INDEX todos_live_key;
CREATE UNIQUE INDEX todos_live_key ON todos (agent_id, idempotency_key)
    WHERE pool_id IS NULL AND idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));
CREATE UNIQUE INDEX todos_pool_key ON todos (pool_id, idempotency_key)
    WHERE pool_id IS NOT NULL AND idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));
-- A pool's backlog: its unclaimed todos that can become claimable.
CREATE INDEX todos_pool_ready ON todos (pool_id, queue, created_at)
    WHERE agent_id IS NULL AND (state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL));

-- The pooled todos rung at a member: what its digest counts (design: Pool routing).
CREATE INDEX todos_ring_agent ON todos (ring_agent_id, created_at)
    WHERE agent_id IS NULL AND ring_agent_id IS NOT NULL;
-- +goose Down
-- Pooled todos no member claimed have no agent and cannot be kept.
DELETE FROM todos WHERE agent_id IS NULL;
-- A claimed pooled todo and a todo pushed to its holder may share a key:
-- the one pushed to the agent keeps it.
UPDATE todos SET idempotency_key = '' WHERE pool_id IS NOT NULL AND idempotency_key <> '' AND EXISTS (
    SELECT 1 FROM todos o WHERE o.agent_id = todos.agent_id AND o.idempotency_key = todos.idempotency_key
      AND o.id <> todos.id AND o.pool_id IS NULL);
DROP INDEX todos_ring_agent;
DROP INDEX todos_pool_ready;
DROP INDEX todos_pool_key;
DROP INDEX todos_live_key;
CREATE UNIQUE INDEX todos_live_key ON todos (agent_id, idempotency_key)
    WHERE idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));
ALTER TABLE todos DROP CONSTRAINT todos_agent_or_pool;
ALTER TABLE todos ALTER COLUMN agent_id SET NOT NULL;
ALTER TABLE todos DROP COLUMN ring_agent_id;
ALTER TABLE todos DROP COLUMN pool_id;
DROP TABLE pool_members;
DROP TABLE pool_queues;
DROP TABLE pools;
