-- Sign-in for MCP clients (design: Sign-in for MCP clients), PostgreSQL dialect:
-- registered clients, authorization requests with their one code, grants
-- and their tokens. Codes and tokens are stored as SHA-256 hashes only. A
-- grant is an agent credential (credentials.id) whose secret nobody is
-- shown: revoking the agent, rotating it or revoking the grant revokes it.

-- +goose Up
CREATE TABLE oauth_clients (
    id            text    PRIMARY KEY,
    name          text    NOT NULL,
    redirect_uris text    NOT NULL,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz
);
CREATE INDEX oauth_clients_expires ON oauth_clients (expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE oauth_requests (
    id             text    PRIMARY KEY,
    client_id      text    NOT NULL,
    redirect_uri   text    NOT NULL,
    state          text    NOT NULL,
    scopes         text    NOT NULL,
    code_challenge text    NOT NULL,
    resource       text    NOT NULL,
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    agent_id       text,
    approved_at    timestamptz,
    code_hash      text    UNIQUE,
    redeemed_at    timestamptz,
    grant_id       TEXT
);
CREATE INDEX oauth_requests_expires ON oauth_requests (expires_at);

CREATE TABLE oauth_grants (
    id           text    PRIMARY KEY REFERENCES credentials (id),
    agent_id     text    NOT NULL REFERENCES agents (id),
    client_id    text    NOT NULL,
    client_name  text    NOT NULL,
    resource     text    NOT NULL,
    scopes       text    NOT NULL,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz
);
CREATE INDEX oauth_grants_agent ON oauth_grants (agent_id);

CREATE TABLE oauth_tokens (
    hash       text    PRIMARY KEY,
    grant_id   text    NOT NULL REFERENCES oauth_grants (id),
    kind       text    NOT NULL CHECK (kind IN ('access', 'refresh')),
    expires_at timestamptz NOT NULL,
    rotated_at timestamptz
);
CREATE INDEX oauth_tokens_grant ON oauth_tokens (grant_id, expires_at);

-- +goose Down
DROP TABLE oauth_tokens;
DROP TABLE oauth_grants;
DROP TABLE oauth_requests;
DROP TABLE oauth_clients;
