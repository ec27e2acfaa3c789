-- Rollcall schema, SQLite dialect (design: Todo lifecycle, Store contract). Times are INTEGER unix
-- microseconds (UTC); lists are JSON arrays in TEXT; JSON documents are TEXT
-- stored byte for byte.

-- +goose Up
CREATE TABLE persons (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL DEFAULT '',
    admin      INTEGER NOT NULL DEFAULT 0,
    token_hash TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
) STRICT;

-- owner_id is not a foreign key: persons are managed outside the store port
-- for now and the use case sets the owner from the authenticated principal.
CREATE TABLE agents (
    id            TEXT    PRIMARY KEY,
    handle        TEXT    NOT NULL UNIQUE,
    owner_id      TEXT    NOT NULL,
    name          TEXT    NOT NULL DEFAULT '',
    active        INTEGER NOT NULL DEFAULT 1,
    revoked_at    INTEGER,
    queues        TEXT    NOT NULL DEFAULT '[]',
    verbs         TEXT    NOT NULL DEFAULT '[]',
    billing_mode  TEXT    NOT NULL DEFAULT '',
    billing_modes TEXT    NOT NULL DEFAULT '[]',
    tool_class    TEXT    NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX agents_owner_handle ON agents (owner_id, handle);

CREATE TABLE credentials (
    id         TEXT    PRIMARY KEY,
    agent_id   TEXT    NOT NULL REFERENCES agents (id),
    hash       TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
) STRICT;
CREATE INDEX credentials_agent ON credentials (agent_id);

CREATE TABLE todos (
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
    finished_at      INTEGER
) STRICT;
-- Idempotency keys are unique per agent among live todos (design: Idempotency keys).
CREATE UNIQUE INDEX todos_live_key ON todos (agent_id, idempotency_key)
    WHERE idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));
-- Listing an agent's todos by queue and state.
CREATE INDEX todos_claim ON todos (agent_id, queue, state, created_at);
-- claim and claim_next: only the rows that can become claimable (pending, or
-- waiting for a retry), so done and dead-lettered history costs nothing.
-- The claim queries repeat this predicate verbatim so the planner uses it.
CREATE INDEX todos_ready ON todos (agent_id, queue, created_at)
    WHERE state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL);
-- The reaper: claimed todos by lease expiry.
CREATE INDEX todos_lease ON todos (lease_expires_at) WHERE state = 'claimed';

CREATE TABLE audit (
    seq       INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    actor     TEXT    NOT NULL,
    action    TEXT    NOT NULL,
    agent_id  TEXT    NOT NULL DEFAULT '',
    decision  TEXT    NOT NULL,
    data      TEXT,
    prev_hash TEXT    NOT NULL,
    hash      TEXT    NOT NULL
) STRICT;
CREATE INDEX audit_agent ON audit (agent_id, seq);

-- +goose Down
DROP TABLE audit;
DROP TABLE todos;
DROP TABLE credentials;
DROP TABLE agents;
DROP TABLE persons;
