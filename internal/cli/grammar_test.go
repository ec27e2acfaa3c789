package cli_test

import (
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/cli"
	"github.com/rollcall/rollcall/internal/domain"
)

// TestCLIGrammar walks the client commands in their current spelling —
// NOUN create|list|show|update|delete|revoke, the agent positional — and
// the spellings of earlier releases next to them (they keep working for
// existing scripts; the other tests of this package use them too).
func TestCLIGrammar(t *testing.T) {
	startAPIEnv(t)
	vend := func(args ...string) wire.VendResult {
		t.Helper()
		var v wire.VendResult
		r := run(append(args, "--json")...).ok(t)
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, r.stdout)
		}
		return v
	}

	// Without --verb an agent gets every scope verb, as the console's vend
	// form ticks them all; --verb '' grants none.
	v := vend("agent", "create", "--handle", "builder", "--queue", "build")
	if !slices.Equal(v.Agent.Scope.Verbs, domain.ScopeVerbs) {
		t.Fatalf("agent create without --verb granted %v, want %v", v.Agent.Scope.Verbs, domain.ScopeVerbs)
	}
	if v := vend("agent", "vend", "--handle", "legacy", "--queue", "build"); !slices.Equal(v.Agent.Scope.Verbs, domain.ScopeVerbs) {
		t.Fatalf("agent vend without --verb granted %v", v.Agent.Scope.Verbs)
	}
	if v := vend("agent", "create", "--handle", "mute", "--queue", "build", "--verb", ""); len(v.Agent.Scope.Verbs) != 0 {
		t.Fatalf("--verb '' granted %v", v.Agent.Scope.Verbs)
	}
	if v := vend("agent", "create", "--handle", "picky", "--queue", "build", "--verb", "claim_next,complete"); !slices.Equal(v.Agent.Scope.Verbs, []string{"claim_next", "complete"}) {
		t.Fatalf("--verb claim_next,complete granted %v", v.Agent.Scope.Verbs)
	}

	// todo create = todo push.
	id := strings.TrimSpace(run("todo", "create", "builder", "--queue", "build", "--title", "one").ok(t).stdout)
	id2 := strings.TrimSpace(run("todo", "push", "builder", "--queue", "build", "--title", "two").ok(t).stdout)
	if !uuidRE.MatchString(id) || !uuidRE.MatchString(id2) {
		t.Fatalf("todo create / push printed %q, %q", id, id2)
	}

	// Hooks: AGENT is the argument (--agent, hidden, still works); delete = rm.
	var hook wire.HookSecretResult
	r := run("hook", "create", "builder", "--kind", "standard", "--queue", "build", "--json").ok(t)
	if err := json.Unmarshal([]byte(r.stdout), &hook); err != nil || hook.Hook.AgentHandle != "builder" {
		t.Fatalf("hook create: %v\n%s", err, r.stdout)
	}
	run("hook", "create", "--agent", "builder", "--kind", "standard", "--queue", "build").ok(t)
	run("hook", "create", "--kind", "standard", "--queue", "build").fails(t, 2, "expected 1 argument AGENT")
	run("hook", "create", "builder", "--agent", "legacy", "--kind", "standard", "--queue", "build").fails(t, 2, "the agent is given twice")
	for _, args := range [][]string{{"hook", "list", "builder"}, {"hook", "list", "--agent", "builder"}, {"hook", "list"}} {
		if r := run(args...).ok(t); !strings.Contains(r.stdout, hook.Hook.ID) {
			t.Fatalf("%v lacks the hook:\n%s", args, r.stdout)
		}
	}
	if r := run("hook", "list", "legacy").ok(t); strings.Contains(r.stdout, hook.Hook.ID) {
		t.Fatalf("hook list legacy shows builder's hook:\n%s", r.stdout)
	}
	run("hook", "delete", hook.Hook.ID).ok(t)
	run("hook", "show", hook.Hook.ID).fails(t, 1, "not_found")

	// Audit: AGENT is the argument (--agent, hidden, still works).
	for _, args := range [][]string{{"audit", "list", "builder"}, {"audit", "list", "--agent", "builder"}} {
		if r := run(args...).ok(t); !strings.Contains(r.stdout, "agent.vend") || !strings.Contains(r.stdout, v.Agent.ID) {
			t.Fatalf("%v:\n%s", args, r.stdout)
		}
	}

	// Persons: create = add; update --active=false = deactivate.
	var carol wire.PersonCreated
	if err := json.Unmarshal([]byte(run("person", "create", "carol", "--json").ok(t).stdout), &carol); err != nil || carol.Person.Name != "carol" {
		t.Fatalf("person create: %v", err)
	}
	if r := run("person", "update", carol.Person.ID, "--active=false").ok(t); !strings.Contains(r.stdout, "deactivated") {
		t.Fatalf("person update --active=false: %s", r.stdout)
	}
	if r := run("person", "update", carol.Person.ID, "--active=true").ok(t); !strings.Contains(r.stdout, ", active") {
		t.Fatalf("person update --active=true: %s", r.stdout)
	}

	// Presence: show and clear are their own commands; `presence AGENT
	// [--clear]` still runs.
	run("agent", "clock-out", "builder").ok(t)
	for _, args := range [][]string{{"agent", "presence", "show", "builder"}, {"agent", "presence", "builder"}} {
		if r := run(args...).ok(t); !strings.HasPrefix(r.stdout, "builder is out (source operator") {
			t.Fatalf("%v:\n%s", args, r.stdout)
		}
	}
	if r := run("agent", "presence", "clear", "builder").ok(t); strings.Contains(r.stdout, "source operator") {
		t.Fatalf("presence clear left the override:\n%s", r.stdout)
	}
	run("agent", "clock-out", "builder").ok(t)
	if r := run("agent", "presence", "builder", "--clear").ok(t); strings.Contains(r.stdout, "source operator") {
		t.Fatalf("presence --clear left the override:\n%s", r.stdout)
	}
	run("agent", "presence", "show").fails(t, 2, "expected 1 argument(s) AGENT")
	run("agent", "presence").fails(t, 2, "presence needs a subcommand")

	// Shift: set and clear; `shift AGENT SHIFT` and `shift AGENT --clear` still run.
	const shift = "TZ=UTC Mon-Fri 09:00-17:00"
	for _, args := range [][]string{{"agent", "shift", "set", "builder", shift}, {"agent", "shift", "builder", shift}} {
		if r := run(args...).ok(t); !strings.Contains(r.stdout, "shift: "+shift+"\n") {
			t.Fatalf("%v:\n%s", args, r.stdout)
		}
	}
	run("agent", "shift", "clear", "builder").ok(t)
	run("agent", "shift", "set", "builder", shift).ok(t)
	if r := run("agent", "shift", "builder", "--clear").ok(t); !strings.Contains(r.stdout, "shift: none\n") {
		t.Fatalf("shift --clear:\n%s", r.stdout)
	}
	run("agent", "shift", "builder").fails(t, 2, "shift needs a subcommand")
}

// TestCLITypos: a mistyped command gets one message and exit 2 at every
// level, before any flag is parsed.
func TestCLITypos(t *testing.T) {
	t.Setenv("ROLLCALL_SERVER", "http://127.0.0.1:1")
	t.Setenv("ROLLCALL_TOKEN", "rcp_unused")
	want := func(word, path, suggestion string) string {
		msg := "rollcall: unknown command \"" + word + "\" for \"" + path + "\"\n\n"
		if suggestion != "" {
			msg += "Did you mean this?\n\t" + suggestion + "\n\n"
		}
		return msg + "Run '" + path + " --help' for usage.\n"
	}
	for _, tc := range []struct {
		args                   []string
		word, path, suggestion string
	}{
		{[]string{"todo", "pussh", "x", "--queue", "y"}, "pussh", "rollcall todo", "push"},
		{[]string{"todo", "--json", "pussh", "x"}, "pussh", "rollcall todo", "push"},
		{[]string{"todo", "--token=rcp_x", "pussh"}, "pussh", "rollcall todo", "push"},
		{[]string{"--server", "http://127.0.0.1:2", "todo", "pussh"}, "pussh", "rollcall todo", "push"},
		{[]string{"todo", "crate", "x"}, "crate", "rollcall todo", "create"},
		{[]string{"agnet", "list", "--owner", "x"}, "agnet", "rollcall", "agent"},
		{[]string{"--json", "agnet"}, "agnet", "rollcall", "agent"},
		{[]string{"xyzzy", "--queue", "y"}, "xyzzy", "rollcall", ""},
		{[]string{"agent", "vnd", "--handle", "h"}, "vnd", "rollcall agent", "vend"},
		{[]string{"agent", "presence", "claer", "builder"}, "claer", "rollcall agent presence", "clear"},
		{[]string{"agent", "shift", "st", "builder", "TZ=UTC Mon 09:00-17:00"}, "st", "rollcall agent shift", "set"},
		{[]string{"agent", "grant", "crate", "builder", "p"}, "crate", "rollcall agent grant", "create"},
	} {
		r := run(tc.args...)
		if r.code != 2 || r.stderr != want(tc.word, tc.path, tc.suggestion) || r.stdout != "" {
			t.Errorf("%q: exit %d, stderr\n%s\nwant exit 2, stderr\n%s", tc.args, r.code, r.stderr, want(tc.word, tc.path, tc.suggestion))
		}
	}
	// Words that are not commands pass: help, completion, arguments.
	run("help", "todo").ok(t)
	run("completion", "bash").ok(t)
	run("todo", "--help").ok(t)
	run("todo", "list", "--help").ok(t)
	run("todo").fails(t, 2, "todo needs a subcommand")
	run("todo", "--bogus").fails(t, 2, "unknown flag: --bogus")
	run("todo", "list", "x", "--bogus").fails(t, 2, "unknown flag: --bogus")
	run("--bogus", "agent", "list").fails(t, 2, "unknown flag: --bogus")
	run("todo", "--queue", "y", "pussh").fails(t, 2, "unknown flag: --queue")
}

// TestCLICommandTree checks the grammar's rules on the whole tree: no flag
// is written into a Use line, the connection flags exist once (persistent
// on the root), and the old spellings stay out of help.
func TestCLICommandTree(t *testing.T) {
	root := cli.NewRoot(strings.NewReader(""), io.Discard, io.Discard)
	for _, name := range []string{"server", "token", "json", "ca-cert"} {
		if root.PersistentFlags().Lookup(name) == nil {
			t.Errorf("the root has no persistent --%s", name)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if strings.Contains(c.Use, "-") && !strings.HasPrefix(c.Name(), "clock-") {
			t.Errorf("%s: Use %q names a flag", c.CommandPath(), c.Use)
		}
		if c != root {
			for _, name := range []string{"server", "token", "json", "ca-cert"} {
				if c.PersistentFlags().Lookup(name) != nil || c.LocalNonPersistentFlags().Lookup(name) != nil {
					t.Errorf("%s registers its own --%s", c.CommandPath(), name)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	for _, tc := range []struct {
		args   []string
		hidden string
	}{
		{[]string{"person", "--help"}, "\n  deactivate "},
		{[]string{"hook", "create", "--help"}, "--agent"},
		{[]string{"hook", "list", "--help"}, "--agent"},
		{[]string{"audit", "list", "--help"}, "--agent"},
		{[]string{"agent", "presence", "--help"}, "--clear"},
		{[]string{"agent", "shift", "--help"}, "--clear"},
	} {
		if r := run(tc.args...).ok(t); strings.Contains(r.stdout, tc.hidden) {
			t.Errorf("%v shows %q:\n%s", tc.args, tc.hidden, r.stdout)
		}
	}
	if r := run("agent", "--help").ok(t); !strings.Contains(r.stdout, "--server") || !strings.Contains(r.stdout, "--ca-cert") {
		t.Errorf("agent --help lacks the global flags:\n%s", r.stdout)
	}
}
