-- Intake and handoff (design: Handoff), PostgreSQL dialect: handoff grants in
-- the agent's scope (JSON text: an array of {agent_id, handle, queue}),
-- hooks, and the deliveries each hook received. A verified delivery's key
-- (X-GitHub-Delivery or webhook-id) is unique per hook, so a redelivery
-- creates nothing; a refused delivery has key ''. Deleting a hook deletes
-- its deliveries.

-- +goose Up
ALTER TABLE agents ADD COLUMN handoff text NOT NULL DEFAULT '[]';

CREATE TABLE hooks (
    id             text        PRIMARY KEY,
    owner_id       text        NOT NULL,
    agent_id       text        NOT NULL REFERENCES agents (id),
    kind           text        NOT NULL CHECK (kind IN ('github', 'standard')),
    queue          text        NOT NULL,
    filter         text        NOT NULL DEFAULT '{}',
    title_template text        NOT NULL DEFAULT '',
    kind_label     text        NOT NULL DEFAULT '',
    secret         text        NOT NULL,
    created_at     timestamptz NOT NULL,
    updated_at     timestamptz NOT NULL
);
CREATE INDEX hooks_owner ON hooks (owner_id, created_at);
CREATE INDEX hooks_agent ON hooks (agent_id, created_at);

CREATE TABLE hook_deliveries (
    id          text        PRIMARY KEY,
    hook_id     text        NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
    key         text        NOT NULL DEFAULT '',
    event       text        NOT NULL DEFAULT '',
    action      text        NOT NULL DEFAULT '',
    outcome     text        NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    todo_id     text        NOT NULL DEFAULT '',
    received_at timestamptz NOT NULL
);
CREATE UNIQUE INDEX hook_deliveries_key ON hook_deliveries (hook_id, key) WHERE key <> '';
CREATE INDEX hook_deliveries_recent ON hook_deliveries (hook_id, received_at);

-- +goose Down
DROP TABLE hook_deliveries;
DROP TABLE hooks;
ALTER TABLE agents DROP COLUMN handoff;
