-- Pools (design: Pools), SQLite dialect: a person's named set of member
-- agents sharing queues. A pooled todo has pool_id set and agent_id NULL
-- until a member claims it; ring_agent_id is the one member its doorbell
-- rings now (design: Pool routing). SQLite cannot drop NOT NULL from
-- todos.agent_id in place, so todos is rebuilt: every row and column kept,
-- every index recreated (the two idempotency indexes now split by pool).

-- +goose Up
CREATE TABLE pools (
    id         TEXT    PRIMARY KEY,
    owner_id   TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (owner_id, name)
) STRICT;

CREATE TABLE pool_queues (
    pool_id TEXT NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    queue   TEXT NOT NULL,
    PRIMARY KEY (pool_id, queue)
) STRICT;

CREATE TABLE pool_members (
    pool_id      TEXT    NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    agent_id     TEXT    NOT NULL REFERENCES agents (id),
    last_rung_at INTEGER,
    PRIMARY KEY (pool_id, agent_id)
) STRICT;
CREATE INDEX pool_members_agent ON pool_members (agent_id);

CREATE TABLE todos_new (
    id               TEXT    PRIMARY KEY,
    agent_id         TEXT    REFERENCES agents (id),
    queue            TEXT    NOT NULL,
    title            TEXT    NOT NULL,
    payload          TEXT,
    kind             TEXT    NOT NULL DEFAULT '',
    source           TEXT    NOT NULL DEFAULT '',
    idempotency_key  TEXT    NOT NULL DEFAULT '',
    push_eligible    INTEGER NOT NULL DEFAULT 0,
    created_by       TEXT    NOT NULL DEFAULT '',
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    lease_expires_at INTEGER,
    retry_at         INTEGER,
    ring_attempts    INTEGER NOT NULL DEFAULT 0,
    last_ringed_at   INTEGER,
    result           TEXT,
    last_error       TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    claimed_at       INTEGER,
    finished_at      INTEGER,
    next_ring_at     INTEGER,
    pool_id          TEXT    REFERENCES pools (id) ON DELETE SET NULL,
    ring_agent_id    TEXT,
    CHECK (agent_id IS NOT NULL OR pool_id IS NOT NULL)
) STRICT;
INSERT INTO todos_new (id, agent_id, queue, title, payload, kind, source, idempotency_key,
    push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
    ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
    finished_at, next_ring_at)
SELECT id, agent_id, queue, title, payload, kind, source, idempotency_key,
    push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
    ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
    finished_at, next_ring_at FROM todos;
DROP TABLE todos;
ALTER TABLE todos_new RENAME TO todos;

-- Idempotency keys are unique per agent among live todos pushed to that
-- agent, and per pool among live todos pushed to that pool (design:
-- Idempotency keys, Pools).
CREATE UNIQUE INDEX todos_live_key ON todos (agent_id, idempotency_key)
    WHERE pool_id IS NULL AND idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));
CREATE UNIQUE INDEX todos_pool_key ON todos (pool_id, idempotency_key)
    WHERE pool_id IS NOT NULL AND idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));
CREATE INDEX todos_claim ON todos (agent_id, queue, state, created_at);
CREATE INDEX todos_ready ON todos (agent_id, queue, created_at)
    WHERE state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL);
CREATE INDEX todos_lease ON todos (lease_expires_at) WHERE state = 'claimed';
CREATE INDEX todos_sweep ON todos (agent_id, next_ring_at)
    WHERE state = 'pending' AND push_eligible AND ring_attempts < 5;
-- A pool's backlog: its unclaimed todos that can become claimable.
CREATE INDEX todos_pool_ready ON todos (pool_id, queue, created_at)
    WHERE agent_id IS NULL AND (state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL));

-- The pooled todos rung at a member: what its digest counts (design: Pool routing).
CREATE INDEX todos_ring_agent ON todos (ring_agent_id, created_at)
    WHERE agent_id IS NULL AND ring_agent_id IS NOT NULL;
-- +goose Down
-- Pooled todos no member claimed have no agent and cannot be kept.
DELETE FROM todos WHERE agent_id IS NULL;
CREATE TABLE todos_old (
    id               TEXT    PRIMARY KEY,
    agent_id         TEXT    NOT NULL REFERENCES agents (id),
    queue            TEXT    NOT NULL,
    title            TEXT    NOT NULL,
    payload          TEXT,
    kind             TEXT    NOT NULL DEFAULT '',
    source           TEXT    NOT NULL DEFAULT '',
    idempotency_key  TEXT    NOT NULL DEFAULT '',
    push_eligible    INTEGER NOT NULL DEFAULT 0,
    created_by       TEXT    NOT NULL DEFAULT '',
    state            TEXT    NOT NULL CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    lease_expires_at INTEGER,
    retry_at         INTEGER,
    ring_attempts    INTEGER NOT NULL DEFAULT 0,
    last_ringed_at   INTEGER,
    result           TEXT,
    last_error       TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    claimed_at       INTEGER,
    finished_at      INTEGER,
    next_ring_at     INTEGER
) STRICT;
-- A claimed pooled todo and a todo pushed to its holder may share a key:
-- the one pushed to the agent keeps it.
UPDATE todos SET idempotency_key = '' WHERE pool_id IS NOT NULL AND idempotency_key <> '' AND EXISTS (
    SELECT 1 FROM todos o WHERE o.agent_id = todos.agent_id AND o.idempotency_key = todos.idempotency_key
      AND o.id <> todos.id AND o.pool_id IS NULL);
INSERT INTO todos_old SELECT id, agent_id, queue, title, payload, kind, source, idempotency_key,
    push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
    ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
    finished_at, next_ring_at FROM todos;
DROP TABLE todos;
ALTER TABLE todos_old RENAME TO todos;
CREATE UNIQUE INDEX todos_live_key ON todos (agent_id, idempotency_key)
    WHERE idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));
CREATE INDEX todos_claim ON todos (agent_id, queue, state, created_at);
CREATE INDEX todos_ready ON todos (agent_id, queue, created_at)
    WHERE state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL);
CREATE INDEX todos_lease ON todos (lease_expires_at) WHERE state = 'claimed';
CREATE INDEX todos_sweep ON todos (agent_id, next_ring_at)
    WHERE state = 'pending' AND push_eligible AND ring_attempts < 5;
DROP TABLE pool_members;
DROP TABLE pool_queues;
DROP TABLE pools;
