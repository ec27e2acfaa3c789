-- Intake and handoff (design: Handoff), SQLite dialect: handoff grants in the
-- agent's scope (a JSON array of {agent_id, handle, queue}), hooks, and the
-- deliveries each hook received. A verified delivery's key (X-GitHub-Delivery
-- or webhook-id) is unique per hook, so a redelivery creates nothing; a
-- refused delivery has key ''. Deleting a hook deletes its deliveries.

-- +goose Up
ALTER TABLE agents ADD COLUMN handoff TEXT NOT NULL DEFAULT '[]';

CREATE TABLE hooks (
    id             TEXT    PRIMARY KEY,
    owner_id       TEXT    NOT NULL,
    agent_id       TEXT    NOT NULL REFERENCES agents (id),
    kind           TEXT    NOT NULL CHECK (kind IN ('github', 'standard')),
    queue          TEXT    NOT NULL,
    filter         TEXT    NOT NULL DEFAULT '{}',
    title_template TEXT    NOT NULL DEFAULT '',
    kind_label     TEXT    NOT NULL DEFAULT '',
    secret         TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
) STRICT;
CREATE INDEX hooks_owner ON hooks (owner_id, created_at);
CREATE INDEX hooks_agent ON hooks (agent_id, created_at);

CREATE TABLE hook_deliveries (
    id          TEXT    PRIMARY KEY,
    hook_id     TEXT    NOT NULL REFERENCES hooks (id) ON DELETE CASCADE,
    key         TEXT    NOT NULL DEFAULT '',
    event       TEXT    NOT NULL DEFAULT '',
    action      TEXT    NOT NULL DEFAULT '',
    outcome     TEXT    NOT NULL,
    reason      TEXT    NOT NULL DEFAULT '',
    todo_id     TEXT    NOT NULL DEFAULT '',
    received_at INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX hook_deliveries_key ON hook_deliveries (hook_id, key) WHERE key <> '';
CREATE INDEX hook_deliveries_recent ON hook_deliveries (hook_id, received_at);

-- +goose Down
DROP TABLE hook_deliveries;
DROP TABLE hooks;
ALTER TABLE agents DROP COLUMN handoff;
