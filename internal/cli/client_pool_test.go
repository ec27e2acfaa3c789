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
	run(cmd("pool", "show", "nope")...).fails(t, 1, "not_found")
}
