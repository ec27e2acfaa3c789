-- Owner leases (design: Owner lease), SQLite dialect. Each instance holds
-- one row whose expires_at (INTEGER unix microseconds, UTC, on the
-- database's clock) it moves forward about every half second; agent_owners
-- records which instance owns each agent's liveness deadline. When a
-- lease has expired, the instance that deletes its row (a conditional
-- delete: exactly one wins) takes the dead instance's agents over in the
-- same transaction.

-- +goose Up
CREATE TABLE owner_leases (
    instance_id TEXT PRIMARY KEY,
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE agent_owners (
    agent_id     TEXT PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    instance_id  TEXT NOT NULL,
    heartbeat_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The take-over: every agent of one instance.
CREATE INDEX agent_owners_instance ON agent_owners (instance_id);

-- +goose Down
DROP TABLE agent_owners;
DROP TABLE owner_leases;
