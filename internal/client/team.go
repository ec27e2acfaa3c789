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
	var out wire.PersonCreated
	_, err := c.do(ctx, http.MethodPost, "/v1/persons", nil, in, &out)
	return out, err
}

// ListPersons lists every person (GET /v1/persons; admin).
func (c *Client) ListPersons(ctx context.Context) ([]wire.Person, error) {
	var out listOf[wire.Person]
	_, err := c.do(ctx, http.MethodGet, "/v1/persons", nil, nil, &out)
	return out.Items, err
}

// UpdatePerson renames, re-roles, deactivates or reactivates a person
// (PATCH /v1/persons/{id}; admin). Errors: forbidden, not_found,
// invalid_argument, conflict (reason last_admin).
func (c *Client) UpdatePerson(ctx context.Context, id string, in wire.PersonUpdate) (wire.Person, error) {
	var out wire.Person
	_, err := c.do(ctx, http.MethodPatch, "/v1/persons/"+url.PathEscape(id), nil, in, &out)
	return out, err
}

// CreateToken mints a personal token for the caller, shown once
// (POST /v1/tokens). Errors: invalid_argument.
func (c *Client) CreateToken(ctx context.Context, in wire.TokenInput) (wire.MintedToken, error) {
	var out wire.MintedToken
	_, err := c.do(ctx, http.MethodPost, "/v1/tokens", nil, in, &out)
	return out, err
}

// ListTokens lists the caller's unrevoked tokens (GET /v1/tokens).
func (c *Client) ListTokens(ctx context.Context) ([]wire.PersonToken, error) {
	var out listOf[wire.PersonToken]
	_, err := c.do(ctx, http.MethodGet, "/v1/tokens", nil, nil, &out)
	return out.Items, err
}

// RevokeToken revokes one of the caller's tokens (DELETE /v1/tokens/{id}).
// Errors: not_found.
func (c *Client) RevokeToken(ctx context.Context, id string) (wire.PersonToken, error) {
	var out wire.PersonToken
	_, err := c.do(ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// ListAgentsOf lists another person's agents (GET /v1/agents?owner=…;
// admin). Errors: forbidden.
func (c *Client) ListAgentsOf(ctx context.Context, ownerID string) ([]wire.Agent, error) {
	var out listOf[wire.Agent]
	_, err := c.do(ctx, http.MethodGet, "/v1/agents", url.Values{"owner": {ownerID}}, nil, &out)
	return out.Items, err
}
