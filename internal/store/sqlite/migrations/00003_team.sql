-- Persons with roles and several named personal tokens, console sessions
-- (design: Console sessions, Persons and roles, Personal tokens), SQLite dialect. Times are INTEGER
-- unix microseconds (UTC). The single token of each existing person moves to
-- person_tokens (named "bootstrap"); persons loses its token_hash column
-- (rebuilt: a UNIQUE column cannot be dropped in SQLite).

-- +goose Up
CREATE TABLE person_tokens (
    id           TEXT    PRIMARY KEY,
    person_id    TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    hash         TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    last_used_at INTEGER,
    revoked_at   INTEGER
) STRICT;
CREATE INDEX person_tokens_person ON person_tokens (person_id, created_at);
INSERT INTO person_tokens (id, person_id, name, hash, created_at)
    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-' || hex(randomblob(2)) || '-' ||
                 hex(randomblob(2)) || '-' || hex(randomblob(6))),
           id, 'bootstrap', token_hash, created_at FROM persons;

CREATE TABLE persons_new (
    id             TEXT    PRIMARY KEY,
    name           TEXT    NOT NULL DEFAULT '',
    admin          INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL,
    deactivated_at INTEGER
) STRICT;
INSERT INTO persons_new (id, name, admin, created_at, updated_at)
    SELECT id, name, admin, created_at, created_at FROM persons;
DROP TABLE persons;
ALTER TABLE persons_new RENAME TO persons;

-- A console session: the cookie carries its id (sealed); every request
-- checks the row, its token and its person, so sign-out, a revoked or
-- expired token and a deactivated person end it on every instance.
CREATE TABLE console_sessions (
    id         TEXT    PRIMARY KEY,
    person_id  TEXT    NOT NULL,
    token_id   TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    ended_at   INTEGER
) STRICT;
CREATE INDEX console_sessions_person ON console_sessions (person_id);
CREATE INDEX console_sessions_token ON console_sessions (token_id);

-- +goose Down
DROP TABLE console_sessions;
CREATE TABLE persons_old (
    id         TEXT    PRIMARY KEY,
    name       TEXT    NOT NULL DEFAULT '',
    admin      INTEGER NOT NULL DEFAULT 0,
    token_hash TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
) STRICT;
INSERT INTO persons_old (id, name, admin, token_hash, created_at)
    SELECT p.id, p.name, p.admin,
           coalesce((SELECT t.hash FROM person_tokens t WHERE t.person_id = p.id AND t.revoked_at IS NULL
                     ORDER BY t.created_at LIMIT 1), 'none:' || p.id),
           p.created_at FROM persons p;
DROP TABLE persons;
ALTER TABLE persons_old RENAME TO persons;
DROP TABLE person_tokens;
