package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/rollcall/rollcall/api/wire"
)

// CreatePerson creates a person and its first token, shown once
// (POST /v1/persons; admin). Errors: forbidden, invalid_argument.
func (c *Client) CreatePerson(ctx context.Context, in wire.PersonInput) (wire.PersonCreated, error) {
	return send[wire.PersonCreated](c, ctx, http.MethodPost, "/v1/persons", nil, in)
}

// ListPersons lists every person (GET /v1/persons; admin).
func (c *Client) ListPersons(ctx context.Context) ([]wire.Person, error) {
	return items[wire.Person](c, ctx, "/v1/persons", nil)
}

// UpdatePerson renames, re-roles, deactivates or reactivates a person
// (PATCH /v1/persons/{id}; admin). Errors: forbidden, not_found,
// invalid_argument, conflict (reason last_admin).
func (c *Client) UpdatePerson(ctx context.Context, id string, in wire.PersonUpdate) (wire.Person, error) {
	return send[wire.Person](c, ctx, http.MethodPatch, "/v1/persons/"+url.PathEscape(id), nil, in)
}

// CreateToken mints a personal token for the caller, shown once
// (POST /v1/tokens). Errors: invalid_argument.
func (c *Client) CreateToken(ctx context.Context, in wire.TokenInput) (wire.MintedToken, error) {
	return send[wire.MintedToken](c, ctx, http.MethodPost, "/v1/tokens", nil, in)
}

// ListTokens lists the caller's unrevoked tokens (GET /v1/tokens).
func (c *Client) ListTokens(ctx context.Context) ([]wire.PersonToken, error) {
	return items[wire.PersonToken](c, ctx, "/v1/tokens", nil)
}

// RevokeToken revokes one of the caller's tokens (DELETE /v1/tokens/{id}).
// Errors: not_found.
func (c *Client) RevokeToken(ctx context.Context, id string) (wire.PersonToken, error) {
	return send[wire.PersonToken](c, ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil)
}

// ListAgentsOf lists another person's agents (GET /v1/agents?owner=…;
// admin). Errors: forbidden.
func (c *Client) ListAgentsOf(ctx context.Context, ownerID string) ([]wire.Agent, error) {
	return items[wire.Agent](c, ctx, "/v1/agents", url.Values{"owner": {ownerID}})
}
