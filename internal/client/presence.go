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
	return send[wire.AgentPresence](c, ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, nil)
}

// SetPresence puts the agent in or out with an operator override
// (PUT /v1/agents/{ref}/presence). Errors: invalid_argument (/presence,
// /until), not_found, conflict (revoked).
func (c *Client) SetPresence(ctx context.Context, ref string, in wire.PresenceInput) (wire.AgentPresence, error) {
	return send[wire.AgentPresence](c, ctx, http.MethodPut, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, in)
}

// ClearPresence clears any override (DELETE /v1/agents/{ref}/presence).
func (c *Client) ClearPresence(ctx context.Context, ref string) (wire.AgentPresence, error) {
	return send[wire.AgentPresence](c, ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, nil)
}

// SetShift sets (nil clears) the agent's shift (PUT /v1/agents/{ref}/shift).
// Errors: invalid_argument at /shift with the grammar error.
func (c *Client) SetShift(ctx context.Context, ref string, shift *string) (wire.AgentPresence, error) {
	return send[wire.AgentPresence](c, ctx, http.MethodPut, "/v1/agents/"+url.PathEscape(ref)+"/shift", nil, map[string]*string{"shift": shift})
}

// AgentStatus returns the agent's runtime status (GET
// /v1/agents/{ref}/status): liveness state, last heartbeat, the reported billing mode,
// tool class, billing evidence, runtime and adapter, the warnings, project
// readiness and the in/out presence. Errors: not_found (unknown agent or
// another person's).
func (c *Client) AgentStatus(ctx context.Context, ref string) (wire.AgentRuntimeStatus, error) {
	return send[wire.AgentRuntimeStatus](c, ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(ref)+"/status", nil, nil)
}
