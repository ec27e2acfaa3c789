-- Pool grants (design: Pool grants), PostgreSQL dialect: an agent's owner
-- lets another person put the agent in their pools. A member of another
-- person's pool carries granted_to (the pool's owner; NULL for the owner's
-- own agents), and its row references the grant it joined through, so
-- revoking the grant deletes the membership in the same statement, and a
-- member joining while the grant is revoked waits for the revocation (the
-- foreign key check locks the grant row) and fails.

-- +goose Up
CREATE TABLE pool_grants (
    agent_id   text        NOT NULL REFERENCES agents (id),
    person_id  text        NOT NULL,
    granted_by text        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (agent_id, person_id)
);
CREATE INDEX pool_grants_person ON pool_grants (person_id);

ALTER TABLE pool_members ADD COLUMN granted_to text;
ALTER TABLE pool_members ADD CONSTRAINT pool_members_grant FOREIGN KEY (agent_id, granted_to)
    REFERENCES pool_grants (agent_id, person_id) ON DELETE CASCADE;
-- +goose Down
-- Before grants, a pool held only its owner's agents.
DELETE FROM pool_members WHERE granted_to IS NOT NULL;
ALTER TABLE pool_members DROP CONSTRAINT pool_members_grant;
ALTER TABLE pool_members DROP COLUMN granted_to;
DROP TABLE pool_grants;
