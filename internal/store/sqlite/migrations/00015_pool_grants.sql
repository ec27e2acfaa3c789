-- Pool grants (design: Pool grants), SQLite dialect: an agent's owner lets
-- another person put the agent in their pools. A member of another
-- person's pool carries granted_to (the pool's owner; NULL for the owner's
-- own agents), and its row references the grant it joined through, so
-- revoking the grant deletes the membership in the same statement. SQLite
-- cannot add a table constraint in place, so pool_members is rebuilt with
-- every row kept.

-- +goose Up
CREATE TABLE pool_grants (
    agent_id   TEXT    NOT NULL REFERENCES agents (id),
    person_id  TEXT    NOT NULL,
    granted_by TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, person_id)
) STRICT;
CREATE INDEX pool_grants_person ON pool_grants (person_id);

CREATE TABLE pool_members_new (
    pool_id      TEXT    NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    agent_id     TEXT    NOT NULL REFERENCES agents (id),
    last_rung_at INTEGER,
    granted_to   TEXT,
    PRIMARY KEY (pool_id, agent_id),
    FOREIGN KEY (agent_id, granted_to) REFERENCES pool_grants (agent_id, person_id) ON DELETE CASCADE
) STRICT;
INSERT INTO pool_members_new (pool_id, agent_id, last_rung_at)
SELECT pool_id, agent_id, last_rung_at FROM pool_members;
DROP TABLE pool_members;
ALTER TABLE pool_members_new RENAME TO pool_members;
CREATE INDEX pool_members_agent ON pool_members (agent_id);
-- +goose Down
-- Before grants, a pool held only its owner's agents.
CREATE TABLE pool_members_old (
    pool_id      TEXT    NOT NULL REFERENCES pools (id) ON DELETE CASCADE,
    agent_id     TEXT    NOT NULL REFERENCES agents (id),
    last_rung_at INTEGER,
    PRIMARY KEY (pool_id, agent_id)
) STRICT;
INSERT INTO pool_members_old (pool_id, agent_id, last_rung_at)
SELECT pool_id, agent_id, last_rung_at FROM pool_members WHERE granted_to IS NULL;
DROP TABLE pool_members;
ALTER TABLE pool_members_old RENAME TO pool_members;
CREATE INDEX pool_members_agent ON pool_members (agent_id);
DROP TABLE pool_grants;
