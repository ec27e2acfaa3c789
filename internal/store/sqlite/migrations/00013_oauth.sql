-- Sign-in for MCP clients (design: Sign-in for MCP clients), SQLite dialect:
-- registered clients, authorization requests with their one code, grants
-- and their tokens. Codes and tokens are stored as SHA-256 hashes only. A
-- grant is an agent credential (credentials.id) whose secret nobody is
-- shown: revoking the agent, rotating it or revoking the grant revokes it.

-- +goose Up
CREATE TABLE oauth_clients (
    id            TEXT    PRIMARY KEY,
    name          TEXT    NOT NULL,
    redirect_uris TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER
) STRICT;
CREATE INDEX oauth_clients_expires ON oauth_clients (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE oauth_requests (
    id             TEXT    PRIMARY KEY,
    client_id      TEXT    NOT NULL,
    redirect_uri   TEXT    NOT NULL,
    state          TEXT    NOT NULL,
    scopes         TEXT    NOT NULL,
    code_challenge TEXT    NOT NULL,
    resource       TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    agent_id       TEXT,
    approved_at    INTEGER,
    code_hash      TEXT    UNIQUE,
    redeemed_at    INTEGER,
    grant_id       TEXT
) STRICT;
CREATE INDEX oauth_requests_expires ON oauth_requests (expires_at);

CREATE TABLE oauth_grants (
    id           TEXT    PRIMARY KEY REFERENCES credentials (id),
    agent_id     TEXT    NOT NULL REFERENCES agents (id),
    client_id    TEXT    NOT NULL,
    client_name  TEXT    NOT NULL,
    resource     TEXT    NOT NULL,
    scopes       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER
) STRICT;
CREATE INDEX oauth_grants_agent ON oauth_grants (agent_id);

CREATE TABLE oauth_tokens (
    hash       TEXT    PRIMARY KEY,
    grant_id   TEXT    NOT NULL REFERENCES oauth_grants (id),
    kind       TEXT    NOT NULL CHECK (kind IN ('access', 'refresh')),
    expires_at INTEGER NOT NULL,
    rotated_at INTEGER
) STRICT;
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id, expires_at);

-- +goose Down
DROP TABLE oauth_tokens;
DROP TABLE oauth_grants;
DROP TABLE oauth_requests;
DROP TABLE oauth_clients;
