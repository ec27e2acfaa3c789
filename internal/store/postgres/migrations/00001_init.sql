-- Rollcall schema, PostgreSQL dialect (design: Todo lifecycle, Store contract). Times are
-- timestamptz (µs); lists are text[]; JSON documents are text stored byte
-- for byte (json/jsonb would not round-trip the exact bytes the audit hash
-- and the API echo).

-- +goose Up
CREATE TABLE persons (
    id         text        PRIMARY KEY,
    name       text        NOT NULL DEFAULT '',
    admin      boolean     NOT NULL DEFAULT false,
    token_hash text        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL
);

-- owner_id is not a foreign key: persons are managed outside the store port
-- for now and the use case sets the owner from the authenticated principal.
CREATE TABLE agents (
    id            text        PRIMARY KEY,
    handle        text        NOT NULL UNIQUE,
    owner_id      text        NOT NULL,
    name          text        NOT NULL DEFAULT '',
    active        boolean     NOT NULL DEFAULT true,
    revoked_at    timestamptz,
    queues        text[]      NOT NULL DEFAULT '{}',
    verbs         text[]      NOT NULL DEFAULT '{}',
    billing_mode  text        NOT NULL DEFAULT '',
    billing_modes text[]      NOT NULL DEFAULT '{}',
    tool_class    text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX agents_owner_handle ON agents (owner_id, handle);

CREATE TABLE credentials (
    id         text        PRIMARY KEY,
    agent_id   text        NOT NULL REFERENCES agents (id),
    hash       text        NOT NULL UNIQUE,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX credentials_agent ON credentials (agent_id);

CREATE TABLE todos (
    id               text        PRIMARY KEY,
    agent_id         text        NOT NULL REFERENCES agents (id),
    queue            text        NOT NULL,
    title            text        NOT NULL,
    payload          text,
    kind             text        NOT NULL DEFAULT '',
    source           text        NOT NULL DEFAULT '',
    idempotency_key  text        NOT NULL DEFAULT '',
    push_eligible    boolean     NOT NULL DEFAULT false,
    created_by       text        NOT NULL DEFAULT '',
    state            text        NOT NULL CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    attempt          integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    lease_expires_at timestamptz,
    retry_at         timestamptz,
    ring_attempts    integer     NOT NULL DEFAULT 0,
    last_ringed_at   timestamptz,
    result           text,
    last_error       text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    claimed_at       timestamptz,
    finished_at      timestamptz
);
-- Idempotency keys are unique per agent among live todos (design: Idempotency keys).
-- CreateTodo's ON CONFLICT repeats this predicate verbatim.
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
    seq       bigint      PRIMARY KEY,
    at        timestamptz NOT NULL,
    actor     text        NOT NULL,
    action    text        NOT NULL,
    agent_id  text        NOT NULL DEFAULT '',
    decision  text        NOT NULL,
    data      text,
    prev_hash text        NOT NULL,
    hash      text        NOT NULL
);
CREATE INDEX audit_agent ON audit (agent_id, seq);

-- +goose Down
DROP TABLE audit;
DROP TABLE todos;
DROP TABLE credentials;
DROP TABLE agents;
DROP TABLE persons;
