package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/rollcall/rollcall/api/wire"
)

// GetPresence returns the agent's effective presence, source, until, shift,
// pending count and held todos (GET /v1/agents/{ref}/presence).
func (c *Client) GetPresence(ctx context.Context, ref string) (wire.AgentPresence, error) {
	var out wire.AgentPresence
	_, err := c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, nil, &out)
	return out, err
}

// SetPresence puts the agent in or out with an operator override
// (PUT /v1/agents/{ref}/presence). Errors: invalid_argument (/presence,
// /until), not_found, conflict (revoked).
func (c *Client) SetPresence(ctx context.Context, ref string, in wire.PresenceInput) (wire.AgentPresence, error) {
	var out wire.AgentPresence
	_, err := c.do(ctx, http.MethodPut, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, in, &out)
	return out, err
}

// ClearPresence clears any override (DELETE /v1/agents/{ref}/presence).
func (c *Client) ClearPresence(ctx context.Context, ref string) (wire.AgentPresence, error) {
	var out wire.AgentPresence
	_, err := c.do(ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, nil, &out)
	return out, err
}

// SetShift sets (nil clears) the agent's shift (PUT /v1/agents/{ref}/shift).
// Errors: invalid_argument at /shift with the grammar error.
func (c *Client) SetShift(ctx context.Context, ref string, shift *string) (wire.AgentPresence, error) {
	var out wire.AgentPresence
	_, err := c.do(ctx, http.MethodPut, "/v1/agents/"+url.PathEscape(ref)+"/shift", nil, map[string]*string{"shift": shift}, &out)
	return out, err
}
