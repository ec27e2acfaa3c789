package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
)

func TestCLIHookCommands(t *testing.T) {
	_, cmd := startAPI(t)
	run(cmd("agent", "vend", "--handle", "reviewer", "--queue", "reviews")...).ok(t)
	r := run(cmd("agent", "vend", "--handle", "planner", "--queue", "plans", "--handoff", "reviewer/reviews", "--json")...).ok(t)
	var vended app.VendResult
	if err := json.Unmarshal([]byte(r.stdout), &vended); err != nil || len(vended.Agent.Scope.Handoff) != 1 || vended.Agent.Scope.Handoff[0].Queue != "reviews" {
		t.Fatalf("vend --handoff: %v %s", err, r.stdout)
	}
	run(cmd("agent", "vend", "--handle", "bad", "--queue", "q", "--handoff", "reviewer")...).fails(t, 2, "--handoff wants AGENT/QUEUE")

	r = run(cmd("hook", "add", "--kind", "github", "--agent", "reviewer", "--queue", "reviews", "--repo", "acme-corp/widgets", "--action", "pull_request", "--json")...).ok(t)
	var res app.HookSecretResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || !strings.HasPrefix(res.Secret, "whsec_") || res.Hook.Filter.Repositories[0] != "acme-corp/widgets" {
		t.Fatalf("hook add: %v %s", err, r.stdout)
	}
	human := run(cmd("hook", "add", "--kind", "standard", "--agent", "reviewer", "--queue", "reviews")...).ok(t)
	for _, want := range []string{"standard hook for reviewer", "/deliveries", "whsec_", "shown only this once"} {
		if !strings.Contains(human.stdout, want) {
			t.Errorf("hook add output lacks %q:\n%s", want, human.stdout)
		}
	}
	run(cmd("hook", "add", "--kind", "github", "--agent", "reviewer", "--queue", "nope")...).fails(t, 1, "/queue")

	// A real delivery shows up in hook show.
	if status := intaketest.DeliverGitHub(t, res.URL, res.Secret, "pull_request.opened"); status != 201 {
		t.Fatalf("delivery = %d", status)
	}

	list := run(cmd("hook", "list", "--agent", "reviewer")...).ok(t)
	if !strings.Contains(list.stdout, res.Hook.ID) || !strings.Contains(list.stdout, "repo=acme-corp/widgets action=pull_request") || strings.Contains(list.stdout, "whsec_") {
		t.Fatalf("hook list:\n%s", list.stdout)
	}
	show := run(cmd("hook", "show", res.Hook.ID)...).ok(t)
	if !strings.Contains(show.stdout, "created") || !strings.Contains(show.stdout, "pull_request.opened") {
		t.Fatalf("hook show:\n%s", show.stdout)
	}
	rot := run(cmd("hook", "rotate", res.Hook.ID, "--json")...).ok(t)
	var rotated app.HookSecretResult
	if err := json.Unmarshal([]byte(rot.stdout), &rotated); err != nil || rotated.Secret == res.Secret {
		t.Fatalf("rotate: %v %s", err, rot.stdout)
	}
	run(cmd("hook", "rm", res.Hook.ID)...).ok(t)
	run(cmd("hook", "show", res.Hook.ID)...).fails(t, 1, "not_found")
}
