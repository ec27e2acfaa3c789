package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/rollcall/rollcall/api/wire"
)

// AgentStatus returns the agent's runtime status (GET
// /v1/agents/{ref}/status): liveness state, last heartbeat, the reported billing mode,
// tool class, billing evidence, runtime and adapter, the warnings, project
// readiness and the in/out presence. Errors: not_found (unknown agent or
// another person's).
func (c *Client) AgentStatus(ctx context.Context, ref string) (wire.AgentRuntimeStatus, error) {
	var out wire.AgentRuntimeStatus
	_, err := c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(ref)+"/status", nil, nil, &out)
	return out, err
}
