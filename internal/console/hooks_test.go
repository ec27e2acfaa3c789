package console_test

import (
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
)

// TestAgentPageListsHooksAndDeliveries: the agent page shows the agent's
// hooks, their filters and their last deliveries, never a secret.
func TestAgentPageListsHooksAndDeliveries(t *testing.T) {
	e, me, b := reviewerSignedIn(t)
	_, body := b.get("/console/agents/reviewer")
	wantContains(t, body, `<h2 id="hooks-title">Hooks</h2>`, "No hooks.")

	res, err := e.Service.CreateHook(t.Context(), me, app.HookInput{Kind: "github", Agent: "reviewer", Queue: "reviews",
		Filter: &domain.HookFilter{Repositories: []string{"acme-corp/widgets"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pull_request.review_requested", "star.created"} {
		intaketest.DeliverGitHub(t, e.URL+"/v1/hooks/"+res.Hook.ID+"/deliveries", res.Secret, name)
	}
	_, body = b.get("/console/agents/reviewer")
	wantContains(t, body, res.Hook.ID, "/v1/hooks/"+res.Hook.ID+"/deliveries", "acme-corp/widgets",
		"delivery-created", "pull_request.review_requested", "delivery-ignored", "star", "PR #42 review requested")
	if strings.Contains(body, res.Secret) || strings.Contains(body, "whsec_") {
		t.Fatal("the agent page shows a hook secret")
	}
}
