package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/app"
)

// TestCLIAgentStatus: `rollcall agent status REF` shows the liveness state,
// last heartbeat, reported runtime and adapter, billing evidence and the
// warnings.
func TestCLIAgentStatus(t *testing.T) {
	env, cmd := startAPI(t)
	api := client.New(env.URL, env.AdminToken)
	res, err := api.VendAgent(t.Context(), app.VendInput{Handle: "statused", Queues: []string{"build"}, BillingMode: "subscription"})
	if err != nil {
		t.Fatal(err)
	}
	r := run(cmd("agent", "status", "statused")...).ok(t)
	for _, want := range []string{"state:             unknown", "last heartbeat:    -", "billing mode:      not reported (configured subscription)", "warnings:          -"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status before any heartbeat lacks %q:\n%s", want, r.stdout)
		}
	}
	p, err := env.Service.AuthenticateAgent(context.Background(), res.Credential)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"state":"online","billing_mode":"api","runtime_version":"2.1.3","billing_evidence":{"key_type":"unknown","method":"guess"},` +
		`"details":{"adapter":{"name":"rc-adapter","version":"0.4.0"},"runtime":{"name":"claude-code"}},"project_readiness":[{"queue":"build","ready":false,"reason":"dirty_tree"}]}`
	if _, err := env.Service.Heartbeat(t.Context(), p, "statused", []byte(body), app.Arrival{}); err != nil {
		t.Fatal(err)
	}
	r = run(cmd("agent", "status", "statused")...).ok(t)
	for _, want := range []string{
		"state:             online",
		"last heartbeat:    " + env.Clock.Now().UTC().Format("2006-01-02T15:04:05Z"),
		"billing mode:      api (configured subscription)",
		"billing evidence:  key_type unknown, method guess",
		"runtime:           claude-code 2.1.3",
		"adapter:           rc-adapter 0.4.0",
		"warnings:          billing_evidence_unknown",
		"project readiness: build=not ready (dirty_tree)",
		"presence:          in (source default",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(cmd("agent", "status", "statused", "--json")...).ok(t)
	var st app.AgentRuntimeStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.State != "online" || st.Adapter == nil || st.Adapter.Name != "rc-adapter" {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	run(cmd("agent", "status", "nobody")...).fails(t, 1, "not_found")
	run(cmd("agent", "status")...).fails(t, 2, "expected 1 argument")
}
