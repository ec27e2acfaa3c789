package cli_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/cli"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi/apitest"
)

type result struct {
	code           int
	stdout, stderr string
}

// run runs the CLI in-process, as the binary would.
func run(args ...string) result {
	var out, errb bytes.Buffer
	code := cli.Main(args, strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func (r result) ok(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	return r
}

func (r result) fails(t *testing.T, code int, stderr string) result {
	t.Helper()
	if r.code != code || !strings.Contains(r.stderr, stderr) {
		t.Fatalf("exit %d, stderr %q; want exit %d and stderr containing %q (stdout %q)", r.code, r.stderr, code, stderr, r.stdout)
	}
	return r
}

// startAPI starts the real REST stack, clears ROLLCALL_SERVER and
// ROLLCALL_TOKEN, and returns it with cmd, which appends --server and the
// admin's --token to a command line.
func startAPI(t *testing.T) (*apitest.Env, func(args ...string) []string) {
	env := apitest.New(t)
	t.Setenv("ROLLCALL_SERVER", "")
	t.Setenv("ROLLCALL_TOKEN", "")
	conn := []string{"--server", env.URL, "--token", env.AdminToken}
	return env, func(args ...string) []string { return append(args, conn...) }
}

// startAPIEnv starts the real REST stack with ROLLCALL_SERVER and
// ROLLCALL_TOKEN (the admin's) set to it.
func startAPIEnv(t *testing.T) *apitest.Env {
	env := apitest.New(t)
	t.Setenv("ROLLCALL_SERVER", env.URL)
	t.Setenv("ROLLCALL_TOKEN", env.AdminToken)
	return env
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestCLIClientCommands(t *testing.T) {
	env, cmd := startAPI(t)
	api := client.New(env.URL, env.AdminToken)

	// vend (human output)
	r := run(cmd("agent", "vend", "--handle", "builder", "--queue", "build", "--queue", "review", "--verb", "list_todos,claim", "--verb", "complete", "--name", "Build bot")...).ok(t)
	for _, want := range []string{"Agent builder vended", "rca_", "MCP URL: " + env.URL + "/mcp", "claude mcp add --transport http rollcall-builder " + env.URL + "/mcp --header 'Authorization: Bearer rca_", "--dangerously-load-development-channels server:rollcall-builder"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("vend output lacks %q:\n%s", want, r.stdout)
		}
	}
	a, err := api.GetAgent(t.Context(), "builder")
	if err != nil || strings.Join(a.Scope.Queues, ",") != "build,review" || strings.Join(a.Scope.Verbs, ",") != "list_todos,claim,complete" || a.Name != "Build bot" {
		t.Fatalf("vended %+v, %v", a, err)
	}

	// vend --json
	r = run(cmd("agent", "vend", "--json", "--handle", "reviewer", "--queue", "review", "--billing-mode", "api", "--billing-modes", "api,max", "--tool-class", "codex")...).ok(t)
	var vr app.VendResult
	if err := json.Unmarshal([]byte(r.stdout), &vr); err != nil || vr.Agent.Handle != "reviewer" || vr.Agent.BillingMode != "api" || vr.Agent.ToolClass != "codex" || !strings.HasPrefix(vr.Credential, "rca_") {
		t.Fatalf("vend --json: %v\n%s", err, r.stdout)
	}

	// list
	r = run(cmd("agent", "list")...).ok(t)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^HANDLE\s+STATUS\s+QUEUES\s+VERBS\s+ID$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^builder\s+active\s+build,review\s+list_todos,claim,complete\s+`+a.ID+`$`).MatchString(lines[1]) ||
		!strings.HasPrefix(lines[2], "reviewer ") {
		t.Fatalf("agent list:\n%s", r.stdout)
	}
	// The columns are aligned: every row starts its STATUS column at the same offset.
	if strings.Index(lines[0], "STATUS") != strings.Index(lines[1], "active") || strings.Index(lines[1], "active") != strings.Index(lines[2], "active") {
		t.Errorf("columns not aligned:\n%s", r.stdout)
	}
	r = run(cmd("agent", "list", "--json")...).ok(t)
	var al struct{ Items []domain.Agent }
	if err := json.Unmarshal([]byte(r.stdout), &al); err != nil || len(al.Items) != 2 {
		t.Fatalf("agent list --json: %v\n%s", err, r.stdout)
	}

	// show
	r = run(cmd("agent", "show", "builder")...).ok(t)
	for _, want := range []string{"ID:", a.ID, "Handle:", "Build bot", "Status:", "active", "Queues:", "build,review"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("agent show lacks %q:\n%s", want, r.stdout)
		}
	}

	// update
	r = run(cmd("agent", "update", "builder", "--name", "Builder", "--json")...).ok(t)
	var upd domain.Agent
	if err := json.Unmarshal([]byte(r.stdout), &upd); err != nil || upd.Name != "Builder" {
		t.Fatalf("agent update: %v\n%s", err, r.stdout)
	}
	// The owner's self clock-in cap: default 8h, set to 90m, refused when out of range.
	if upd.SelfClockInCap.String() != "8h" {
		t.Fatalf("default self_clock_in_cap %s, want 8h", upd.SelfClockInCap)
	}
	r = run(cmd("agent", "update", "builder", "--self-clock-in-cap", "90m")...).ok(t)
	if !strings.Contains(r.stdout, "Self clock-in cap:") || !strings.Contains(r.stdout, "1h30m per off-shift stretch") {
		t.Fatalf("agent update --self-clock-in-cap printed:\n%s", r.stdout)
	}
	run(cmd("agent", "update", "builder", "--self-clock-in-cap", "169h")...).fails(t, 1, "self_clock_in_cap")

	// push: prints the id only
	r = run(cmd("todo", "push", "builder", "--queue", "build", "--title", "Build #42", "--payload", `{"pr":42}`, "--kind", "ci", "--source", "github")...).ok(t)
	id := strings.TrimSpace(r.stdout)
	if !uuidRE.MatchString(id) {
		t.Fatalf("todo push printed %q, want a todo id", r.stdout)
	}
	td, err := api.GetTodo(t.Context(), id)
	if err != nil || td.Title != "Build #42" || string(td.Payload) != `{"pr":42}` || td.Kind != "ci" || td.Source != "github" {
		t.Fatalf("pushed %+v, %v", td, err)
	}
	// idempotency: the same id twice, the second time with a note on stderr
	first := run(cmd("todo", "push", "builder", "--queue", "review", "--title", "Review", "--idempotency-key", "k1")...).ok(t)
	second := run(cmd("todo", "push", "builder", "--queue", "review", "--title", "Review", "--idempotency-key", "k1")...).ok(t)
	if first.stdout != second.stdout || first.stderr != "" || !strings.Contains(second.stderr, "already exists") {
		t.Fatalf("idempotent push: %+v then %+v", first, second)
	}
	r = run(cmd("todo", "push", "builder", "--queue", "build", "--title", "json", "--json")...).ok(t)
	var pushed domain.Todo
	if err := json.Unmarshal([]byte(r.stdout), &pushed); err != nil || pushed.Title != "json" {
		t.Fatalf("todo push --json: %v\n%s", err, r.stdout)
	}

	// list and show todos
	r = run(cmd("todo", "list", "builder")...).ok(t)
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], "ID ") ||
		!regexp.MustCompile(`^`+id+`\s+build\s+pending\s+0/5\s+\S+\s+Build #42$`).MatchString(lines[1]) {
		t.Fatalf("todo list:\n%s", r.stdout)
	}
	r = run(cmd("todo", "list", "builder", "--queue", "review", "--json")...).ok(t)
	var tl struct{ Items []domain.Todo }
	if err := json.Unmarshal([]byte(r.stdout), &tl); err != nil || len(tl.Items) != 1 || tl.Items[0].Queue != "review" {
		t.Fatalf("todo list --queue review --json: %v\n%s", err, r.stdout)
	}
	r = run(cmd("todo", "show", id)...).ok(t)
	for _, want := range []string{"Title:", "Build #42", "State:", "pending", "Payload:", `{"pr":42}`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("todo show lacks %q:\n%s", want, r.stdout)
		}
	}

	// errors from the server: code, detail and pointer, exit 1
	run(cmd("todo", "push", "builder", "--queue", "deploy", "--title", "t")...).
		fails(t, 1, `rollcall: invalid_argument: queue "deploy" is not in agent builder's scope`).
		fails(t, 1, "(at /queue)\n")
	run(cmd("agent", "vend", "--handle", "Bad Handle", "--queue", "q")...).fails(t, 1, "rollcall: invalid_argument: handle \"Bad Handle\" must match")
	run(cmd("agent", "show", "nobody")...).fails(t, 1, `rollcall: not_found: agent "nobody" not found`)

	// revoke, then a second revoke is a conflict
	r = run(cmd("agent", "revoke", "reviewer")...).ok(t)
	if !strings.Contains(r.stdout, "Agent reviewer revoked at ") {
		t.Fatalf("revoke: %s", r.stdout)
	}
	run(cmd("agent", "revoke", "reviewer")...).fails(t, 1, "rollcall: conflict: agent reviewer is already revoked")
	r = run(cmd("agent", "list")...).ok(t)
	if !regexp.MustCompile(`(?m)^reviewer\s+revoked\s`).MatchString(r.stdout) {
		t.Fatalf("list after revoke:\n%s", r.stdout)
	}

	// rotate
	r = run(cmd("agent", "rotate", "builder")...).ok(t)
	if !strings.Contains(r.stdout, "Agent builder has a new credential") || !strings.Contains(r.stdout, "rca_") {
		t.Fatalf("rotate: %s", r.stdout)
	}

	// audit
	r = run(cmd("audit", "list", "--agent", "builder")...).ok(t)
	if !regexp.MustCompile(`(?m)^1\s+\S+\s+operator:\S+\s+agent\.vend\s+` + a.ID + `\s+allow$`).MatchString(r.stdout) {
		t.Fatalf("audit list:\n%s", r.stdout)
	}
	r = run(cmd("audit", "verify")...).ok(t)
	if !strings.HasPrefix(r.stdout, "audit chain ok: ") {
		t.Fatalf("audit verify: %s", r.stdout)
	}
	env.Exec(t, `UPDATE audit SET data = '{"tampered":true}' WHERE seq = 2`)
	r = run(cmd("audit", "verify")...).fails(t, 1, "rollcall: audit chain verification failed")
	if !strings.Contains(r.stdout, "audit chain BROKEN") || !strings.Contains(r.stdout, "seq 2") {
		t.Fatalf("broken audit verify: %s", r.stdout)
	}
	r = run(cmd("audit", "verify", "--json")...).fails(t, 1, "verification failed")
	var ver domain.AuditVerifyResult
	if err := json.Unmarshal([]byte(r.stdout), &ver); err != nil || ver.OK {
		t.Fatalf("audit verify --json: %v\n%s", err, r.stdout)
	}
}

func TestCLIUsageAndConnection(t *testing.T) {
	env, cmd := startAPI(t)

	// Usage errors exit 2 and send nothing.
	run(cmd("agent", "vend", "--queue", "q")...).fails(t, 2, "--handle is required")
	run(cmd("agent", "vend", "--handle", "h")...).fails(t, 2, "--queue is required")
	run(cmd("agent", "show")...).fails(t, 2, "AGENT")
	run(cmd("agent", "show", "a", "b")...).fails(t, 2, "AGENT")
	run(cmd("agent", "list", "--bogus")...).fails(t, 2, "unknown flag")
	run(cmd("agent", "update", "h")...).fails(t, 2, "nothing to change")
	run(cmd("todo", "push", "h", "--queue", "q", "--title", "t", "--payload", "{bad")...).fails(t, 2, "--payload must be valid JSON")
	run(cmd("todo", "push", "h", "--title", "t")...).fails(t, 2, "--queue is required")
	run("agent", "list", "--server", "ftp://x", "--token", "t").fails(t, 2, "must be an http")
	run("agent").fails(t, 2, "needs a subcommand")
	// Nested typos get a suggestion.
	run("agent", "vnd").fails(t, 2, "unknown command \"vnd\" for \"rollcall agent\"\n\nDid you mean this?\n\tvend\n")
	run("todo", "psh").fails(t, 2, "Did you mean this?\n\tpush\n")
	run("agent", "xyzzy").fails(t, 2, "Run 'rollcall agent --help' for usage.")
	if agents, _ := client.New(env.URL, env.AdminToken).ListAgents(t.Context()); len(agents) != 0 {
		t.Fatalf("usage errors created %v", agents)
	}

	// No token, a wrong token, an unreachable server.
	run("agent", "list", "--server", env.URL).fails(t, 1, "rollcall: unauthenticated: no token")
	run("agent", "list", "--server", env.URL, "--token", "rcp_wrong").fails(t, 1, "rollcall: unauthenticated: ")
	run("agent", "list", "--server", "http://127.0.0.1:1", "--token", "rcp_x").fails(t, 1, "rollcall: cannot reach the server at http://127.0.0.1:1")

	// The environment supplies server and token; flags win over it.
	t.Setenv("ROLLCALL_SERVER", env.URL)
	t.Setenv("ROLLCALL_TOKEN", env.AdminToken)
	r := run("agent", "list").ok(t)
	if !strings.HasPrefix(r.stdout, "HANDLE") {
		t.Fatalf("agent list from env: %q", r.stdout)
	}
	run("agent", "list", "--token", "rcp_wrong").fails(t, 1, "unauthenticated")
	run("agent", "list", "--server", "http://127.0.0.1:1").fails(t, 1, "cannot reach")

	// Help does not print the token from the environment.
	r = run("agent", "list", "--help").ok(t)
	if strings.Contains(r.stdout, env.AdminToken) {
		t.Fatal("help output shows the token")
	}
}

// TestCLIIntegerFlagsRefuseMeaninglessValues: an integer flag given a value
// the API would read as "absent" (0) or refuse (negative) is a usage error
// (exit 2) before any request, not a silently unfiltered call.
func TestCLIIntegerFlagsRefuseMeaninglessValues(t *testing.T) {
	t.Setenv("ROLLCALL_SERVER", "")
	t.Setenv("ROLLCALL_TOKEN", "")
	// Nothing listens here: reaching the server would exit 1, not 2.
	conn := []string{"--server", "http://127.0.0.1:1", "--token", "rcp_unused"}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"todo", "list", "builder", "--limit", "0"}, "--limit"},
		{[]string{"todo", "list", "builder", "--limit=-1"}, "--limit"},
		{[]string{"todo", "push", "builder", "--queue", "q", "--title", "t", "--max-attempts", "0"}, "--max-attempts"},
		{[]string{"todo", "push", "builder", "--queue", "q", "--title", "t", "--max-attempts=-2"}, "--max-attempts"},
		{[]string{"audit", "list", "--limit", "0"}, "--limit"},
		{[]string{"audit", "list", "--after=-1"}, "--after"},
	} {
		r := run(append(tc.args, conn...)...)
		r.fails(t, 2, tc.flag+" must be an integer ≥")
	}
	// Meaningful values pass the check and reach (here: fail to reach) the server.
	for _, args := range [][]string{
		{"todo", "list", "builder", "--limit", "1"},
		{"todo", "push", "builder", "--queue", "q", "--title", "t", "--max-attempts", "1"},
		{"audit", "list", "--after", "0", "--limit", "1"},
	} {
		run(append(args, conn...)...).fails(t, 1, "cannot reach the server")
	}
}
