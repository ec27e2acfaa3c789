package cli_test

import (
	"strings"
	"testing"
)

func TestCLIPoolCommands(t *testing.T) {
	_, cmd := startAPI(t)
	run(cmd("agent", "vend", "--handle", "rev-a", "--queue", "reviews")...).ok(t)
	run(cmd("agent", "vend", "--handle", "rev-b", "--queue", "reviews")...).ok(t)
	run(cmd("pool", "create", "reviewers", "--queue", "reviews", "--member", "rev-a", "--member", "rev-b")...).ok(t)
	run(cmd("pool", "create", "x", "--queue", "reviews")...).fails(t, 2, "--member")
	run(cmd("pool", "create", "reviewers", "--queue", "reviews", "--member", "rev-a")...).fails(t, 1, "conflict")

	id := strings.TrimSpace(run(cmd("pool", "push", "reviewers", "--queue", "reviews", "--title", "Review PR 8", "--idempotency-key", "pr-8")...).ok(t).stdout)
	again := run(cmd("pool", "push", "reviewers", "--queue", "reviews", "--title", "Review PR 8", "--idempotency-key", "pr-8")...).ok(t)
	if strings.TrimSpace(again.stdout) != id || !strings.Contains(again.stderr, "already exists") {
		t.Fatalf("push again: %q %q, want %s and a note", again.stdout, again.stderr, id)
	}
	list := run(cmd("pool", "list")...).ok(t)
	if !strings.Contains(list.stdout, "reviewers") || !strings.Contains(list.stdout, "rev-a,rev-b") {
		t.Fatalf("pool list:\n%s", list.stdout)
	}
	show := run(cmd("pool", "show", "reviewers")...).ok(t)
	for _, want := range []string{"rev-a", "rev-b", id, "pending", "Review PR 8"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("pool show lacks %q:\n%s", want, show.stdout)
		}
	}
	run(cmd("pool", "rm", "reviewers")...).fails(t, 1, "live todos")
	// The members change while the pool has live todos.
	run(cmd("agent", "vend", "--handle", "rev-c", "--queue", "reviews")...).ok(t)
	if got := run(cmd("pool", "update", "reviewers", "--member", "rev-c", "--member", "rev-a")...).ok(t).stdout; got != "pool reviewers: members rev-a,rev-c\n" {
		t.Errorf("pool update: %q", got)
	}
	run(cmd("pool", "update", "reviewers")...).fails(t, 2, "--member")
	run(cmd("pool", "update", "reviewers", "--member", "nobody")...).fails(t, 1, "/members/0")
	run(cmd("pool", "show", "nope")...).fails(t, 1, "not_found")
}

// TestCLIPoolGrants: `agent grant create|list|revoke` — the admin's agent
// joins bob's pool once granted to bob, and leaves it when revoked
// (docs/design.md, "Pool grants").
func TestCLIPoolGrants(t *testing.T) {
	env, cmd := startAPI(t)
	bobToken := env.AddPerson(t, "bob")
	bob, err := env.Service.AuthenticatePerson(t.Context(), bobToken)
	if err != nil {
		t.Fatal(err)
	}
	asBob := func(args ...string) []string { return append(args, "--server", env.URL, "--token", bobToken) }
	run(cmd("agent", "create", "--handle", "shared-bot", "--queue", "reviews")...).ok(t)
	pool := asBob("pool", "create", "reviewers", "--queue", "reviews", "--member", "shared-bot")
	run(pool...).fails(t, 1, "rollcall agent grant create shared-bot "+bob.ID)

	if r := run(cmd("agent", "grant", "create", "shared-bot", bob.ID)...).ok(t); !strings.Contains(r.stdout, "granted to person "+bob.ID) {
		t.Fatalf("grant create:\n%s", r.stdout)
	}
	if r := run(cmd("agent", "grant", "create", "shared-bot", bob.ID)...).ok(t); !strings.Contains(r.stderr, "already") {
		t.Errorf("grant create again: stderr %q, want a note", r.stderr)
	}
	run(cmd("agent", "grant", "create", "shared-bot")...).fails(t, 2, "expected 2 argument(s) AGENT PERSON")
	if r := run(cmd("agent", "grant", "list", "shared-bot")...).ok(t); !strings.Contains(r.stdout, bob.ID) {
		t.Errorf("grant list:\n%s", r.stdout)
	}
	run(pool...).ok(t)
	if r := run(asBob("pool", "show", "reviewers")...).ok(t); !strings.Contains(r.stdout, "shared-bot") {
		t.Errorf("bob's pool lacks the granted agent:\n%s", r.stdout)
	}
	run(asBob("agent", "grant", "revoke", "shared-bot", bob.ID)...).fails(t, 1, "not_found")
	if r := run(cmd("agent", "grant", "revoke", "shared-bot", bob.ID)...).ok(t); !strings.Contains(r.stdout, "revoked") {
		t.Errorf("grant revoke:\n%s", r.stdout)
	}
	if r := run(asBob("pool", "show", "reviewers")...).ok(t); strings.Contains(r.stdout, "shared-bot") {
		t.Errorf("bob's pool still has the agent after the revocation:\n%s", r.stdout)
	}
}
