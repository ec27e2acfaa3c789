package console

import (
	"context"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// hookDeliveriesShown is how many recent deliveries the agent page shows
// per hook.
const hookDeliveriesShown = 5

// agentHooks loads the agent's hooks (design: Hooks) with their last few
// deliveries, newest first, for the agent page. Secrets are never loaded
// into the view (app.HookView does not render them).
func (h *Handler) agentHooks(ctx context.Context, by domain.Person, agentID string) ([]app.HookView, error) {
	hs, err := h.svc.ListHooks(ctx, by, agentID)
	if err != nil {
		return nil, err
	}
	for i := range hs {
		ds, err := h.svc.HookDeliveries(ctx, by, hs[i].ID, hookDeliveriesShown)
		if err != nil {
			return nil, err
		}
		hs[i].LastDeliveries = ds
	}
	return hs, nil
}
