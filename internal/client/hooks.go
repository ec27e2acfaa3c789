package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/rollcall/rollcall/api/wire"
)

// --- hooks (webhook intake) ---

// CreateHook creates a webhook endpoint (POST /v1/hooks); the result holds
// the secret, shown only this once. Errors: invalid_argument (400, with
// pointer), not_found (the agent), conflict (revoked agent).
func (c *Client) CreateHook(ctx context.Context, in wire.HookInput) (wire.HookSecretResult, error) {
	return send[wire.HookSecretResult](c, ctx, http.MethodPost, "/v1/hooks", nil, in)
}

// ListHooks lists the caller's hooks, oldest first (GET /v1/hooks), only
// those of agent when it is not "". Errors: not_found (agent).
func (c *Client) ListHooks(ctx context.Context, agent string) ([]wire.HookView, error) {
	q := url.Values{}
	if agent != "" {
		q.Set("agent", agent)
	}
	return items[wire.HookView](c, ctx, "/v1/hooks", q)
}

// GetHook returns one hook with its last deliveries (GET /v1/hooks/{id}).
// Errors: not_found (also another person's hook).
func (c *Client) GetHook(ctx context.Context, id string) (wire.HookView, error) {
	return send[wire.HookView](c, ctx, http.MethodGet, "/v1/hooks/"+url.PathEscape(id), nil, nil)
}

// RotateHookSecret replaces the hook's secret (POST /v1/hooks/{id}/secret);
// the new one is shown only this once. Errors: not_found.
func (c *Client) RotateHookSecret(ctx context.Context, id string) (wire.HookSecretResult, error) {
	return send[wire.HookSecretResult](c, ctx, http.MethodPost, "/v1/hooks/"+url.PathEscape(id)+"/secret", nil, nil)
}

// DeleteHook deletes the hook (DELETE /v1/hooks/{id}) and returns it as it
// was. Errors: not_found.
func (c *Client) DeleteHook(ctx context.Context, id string) (wire.HookView, error) {
	return send[wire.HookView](c, ctx, http.MethodDelete, "/v1/hooks/"+url.PathEscape(id), nil, nil)
}
