-- Persons with roles and several named personal tokens, console sessions
-- (design: Console sessions, Persons and roles, Personal tokens), PostgreSQL dialect. The single
-- token of each existing person moves to person_tokens (named "bootstrap").

-- +goose Up
CREATE TABLE person_tokens (
    id           text        PRIMARY KEY,
    person_id    text        NOT NULL REFERENCES persons (id),
    name         text        NOT NULL,
    hash         text        NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz,
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX person_tokens_person ON person_tokens (person_id, created_at);
INSERT INTO person_tokens (id, person_id, name, hash, created_at)
    SELECT gen_random_uuid()::text, id, 'bootstrap', token_hash, created_at FROM persons;
ALTER TABLE persons DROP COLUMN token_hash;
ALTER TABLE persons ADD COLUMN updated_at timestamptz;
UPDATE persons SET updated_at = created_at;
ALTER TABLE persons ALTER COLUMN updated_at SET NOT NULL;
ALTER TABLE persons ADD COLUMN deactivated_at timestamptz;

-- A console session: the cookie carries its id (sealed); every request
-- checks the row, its token and its person, so sign-out, a revoked or
-- expired token and a deactivated person end it on every instance.
CREATE TABLE console_sessions (
    id         text        PRIMARY KEY,
    person_id  text        NOT NULL REFERENCES persons (id),
    token_id   text        NOT NULL REFERENCES person_tokens (id),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    ended_at   timestamptz
);
CREATE INDEX console_sessions_person ON console_sessions (person_id);
CREATE INDEX console_sessions_token ON console_sessions (token_id);

-- +goose Down
DROP TABLE console_sessions;
ALTER TABLE persons DROP COLUMN deactivated_at;
ALTER TABLE persons DROP COLUMN updated_at;
ALTER TABLE persons ADD COLUMN token_hash text;
UPDATE persons p SET token_hash = coalesce((SELECT t.hash FROM person_tokens t
    WHERE t.person_id = p.id AND t.revoked_at IS NULL ORDER BY t.created_at LIMIT 1), 'none:' || p.id);
ALTER TABLE persons ALTER COLUMN token_hash SET NOT NULL;
ALTER TABLE persons ADD CONSTRAINT persons_token_hash_key UNIQUE (token_hash);
DROP TABLE person_tokens;
