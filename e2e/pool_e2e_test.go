package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/testkit"
)

// TestE2EPool runs pools (design: Pools, Pool routing) on the real binary
// with three member MCP sessions: a member that is out is never rung; the
// pooled todo rings exactly one other member, moves to the third when the
// first does not claim within doorbell.failover_after, and that one takes
// it with claim_next; list_todos of a member shows the pool's todos; a
// member killed holding a todo gives it back at lease expiry, and the one
// member left gets every todo.
func TestE2EPool(t *testing.T) {
	srv := startSQLite(t, "--doorbell.failover_after", "2s")
	handles := []string{"pool-a", "pool-b", "pool-c"}
	sessions := map[string]*testkit.Session{}
	for _, h := range handles {
		v := vend(t, srv, h, []string{"reviews"}, allVerbs)
		sessions[h] = testkit.OpenSession(t, v.MCPURL, v.Credential, h, nil)
	}
	cli(t, srv, "pool", "create", "team", "--queue", "reviews", "--member", "pool-a", "--member", "pool-b", "--member", "pool-c")
	cli(t, srv, "agent", "clock-out", "pool-a")
	waitFor(t, "pool-a out", func() bool {
		var p struct{ Presence string }
		return restGet(t, srv, "/v1/agents/pool-a/presence", &p) == 200 && p.Presence == "out"
	})

	out := cli(t, srv, "pool", "push", "team", "--queue", "reviews", "--title", "Review PR 9", "--json")
	var td todoJSON
	if err := json.Unmarshal([]byte(out), &td); err != nil || td.ID == "" {
		t.Fatalf("pool push output: %v\n%s", err, out)
	}
	// Exactly one of b and c is rung first; a (out) never is.
	var first, second string
	waitFor(t, "the pooled todo rings a member", func() bool {
		for _, h := range handles[1:] {
			if _, ok := sessions[h].Bell(td.ID, 0); ok {
				first = h
				return true
			}
		}
		return false
	})
	for _, h := range handles[1:] {
		if h != first {
			second = h
		}
	}
	if _, ok := sessions[second].Bell(td.ID, 0); ok {
		t.Fatalf("both %s and %s were rung at once", first, second)
	}
	// first does not claim: after failover_after the ring moves to second.
	if _, ok := sessions[second].Bell(td.ID, 15*time.Second); !ok {
		t.Fatalf("the ring did not pass from %s to %s", first, second)
	}
	if _, ok := sessions["pool-a"].Bell(td.ID, 0); ok {
		t.Fatal("pool-a was rung while out")
	}

	call := func(s *testkit.Session, name string, args map[string]any) string {
		t.Helper()
		b, _ := json.Marshal(callTool(t, s, name, args).Content)
		return string(b)
	}
	if got := call(sessions["pool-a"], "list_todos", map[string]any{}); !strings.Contains(got, td.ID) {
		t.Fatalf("list_todos of a member lacks the pool's todo: %s", got)
	}
	// first claims it after all, with a 1 s lease, and is killed: at lease
	// expiry the todo is back in the pool and second is rung again.
	call(sessions[first], "claim", map[string]any{"todo_id": td.ID, "lease_seconds": 1})
	sessions[first].Client().Close()
	bellsOf := func(s *testkit.Session, id string) int {
		n := 0
		for _, b := range s.Bells() {
			if b.TodoID() == id {
				n++
			}
		}
		return n
	}
	waitFor(t, "the todo rings "+second+" again after the lease expired", func() bool { return bellsOf(sessions[second], td.ID) >= 2 })
	if got := call(sessions[second], "claim_next", map[string]any{}); !strings.Contains(got, td.ID) {
		t.Fatalf("claim_next of %s = %s, want the pooled todo", second, got)
	}
	call(sessions[second], "complete", map[string]any{"todo_id": td.ID})
	var done todoJSON
	if code := restGet(t, srv, "/v1/todos/"+td.ID, &done); code != 200 || done.State != "done" {
		t.Fatalf("GET /v1/todos/%s = %d %+v, want done", td.ID, code, done)
	}
	// With one member out and one killed, the third gets every todo.
	for i := range 3 {
		out := cli(t, srv, "pool", "push", "team", "--queue", "reviews", "--title", fmt.Sprintf("Review PR %d", 20+i), "--json")
		var next todoJSON
		if err := json.Unmarshal([]byte(out), &next); err != nil {
			t.Fatal(err)
		}
		if _, ok := sessions[second].Bell(next.ID, wait); !ok {
			t.Fatalf("todo %d did not ring %s", i, second)
		}
		if got := call(sessions[second], "claim_next", map[string]any{}); !strings.Contains(got, next.ID) {
			t.Fatalf("claim_next = %s, want %s", got, next.ID)
		}
	}
	if n := len(sessions["pool-a"].Bells()); n != 0 {
		t.Fatalf("pool-a, out, got %d doorbells", n)
	}
}

// TestE2EPoolTwoInstances: two `rollcall serve` processes on one
// PostgreSQL database, a pool member streaming on each. The member on A is
// out, so A, where the todo is pushed, rings nobody; the member on B is
// rung by B (the todo-ready signal carries the pool), once (design: Pool
// routing).
func TestE2EPoolTwoInstances(t *testing.T) {
	a, b := startPair(t, "--doorbell.failover_after", "2s")
	m0 := vend(t, a, "pool-m0", []string{"reviews"}, allVerbs)
	m1 := vend(t, a, "pool-m1", []string{"reviews"}, allVerbs)
	s0 := testkit.OpenSession(t, a.URL+"/mcp", m0.Credential, "pool-m0", nil)
	s1 := testkit.OpenSession(t, b.URL+"/mcp", m1.Credential, "pool-m1", nil)
	cli(t, a, "pool", "create", "team", "--queue", "reviews", "--member", "pool-m0", "--member", "pool-m1")
	cli(t, a, "agent", "clock-out", "pool-m0")
	waitFor(t, "pool-m0 out on A", func() bool {
		var p struct{ Presence string }
		return restGet(t, a, "/v1/agents/pool-m0/presence", &p) == 200 && p.Presence == "out"
	})
	var td todoJSON
	if code := restDo(t, a, "POST", "/v1/pools/team/todos", map[string]string{"queue": "reviews", "title": "Review PR 10"}, &td); code != 201 {
		t.Fatalf("pool push: %d", code)
	}
	if _, ok := s1.Bell(td.ID, wait); !ok {
		t.Fatalf("the member on instance B was not rung for %s", td.ID)
	}
	if _, ok := s0.Bell(td.ID, 0); ok {
		t.Fatal("the member that is out was rung")
	}
	var got todoJSON
	if code := restGet(t, b, "/v1/todos/"+td.ID, &got); code != 200 || got.State != "pending" {
		t.Fatalf("GET on B = %d %+v", code, got)
	}
}

// TestE2EPoolGrant runs pool grants (design: Pool grants) on the real
// binary: bob's agent cannot join the admin's pool until bob grants it to
// the admin; then it is rung for the pool's todo and claims it with
// claim_next. When bob revokes the grant while the next pooled todo rings
// his agent, the agent leaves the pool — it cannot claim that todo — and
// the todo goes to the admin's own member once that one is in.
func TestE2EPoolGrant(t *testing.T) {
	srv := startSQLite(t, "--doorbell.failover_after", "2s")
	var bob struct {
		Person struct{ ID string }
		Token  struct{ Token string }
	}
	if code := restDo(t, srv, "POST", "/v1/persons", map[string]string{"name": "bob"}, &bob); code != 201 {
		t.Fatalf("create bob: %d", code)
	}
	asBob := func(method, path string, body, into any) int {
		t.Helper()
		code, err := testkit.REST(srv.URL, bob.Token.Token, method, path, body, into)
		if err != nil {
			t.Fatalf("bob %s %s: %v", method, path, err)
		}
		return code
	}
	var bobs vendResult
	if code := asBob("POST", "/v1/agents", map[string]any{"handle": "bob-bot", "queues": []string{"reviews"}, "verbs": allVerbs}, &bobs); code != 201 {
		t.Fatalf("bob vends: %d", code)
	}
	own := vend(t, srv, "own-bot", []string{"reviews"}, allVerbs)
	cli(t, srv, "agent", "clock-out", "own-bot")
	bobSession := testkit.OpenSession(t, bobs.MCPURL, bobs.Credential, "bob-bot", nil)
	ownSession := testkit.OpenSession(t, own.MCPURL, own.Credential, "own-bot", nil)
	var persons struct {
		Items []struct{ ID, Name string }
	}
	restGet(t, srv, "/v1/persons", &persons)
	adminID := ""
	for _, p := range persons.Items {
		if p.Name != "bob" {
			adminID = p.ID
		}
	}

	if out, err := cliResult(srv, "pool", "create", "lent", "--queue", "reviews", "--member", "own-bot", "--member", "bob-bot"); err == nil ||
		!strings.Contains(out, "/members/1") || !strings.Contains(out, "rollcall agent grant create bob-bot "+adminID) {
		t.Fatalf("pool with bob's agent before the grant: %v\n%s", err, out)
	}
	if code := asBob("POST", "/v1/agents/bob-bot/pool-grants", map[string]string{"person": adminID}, nil); code != 201 {
		t.Fatalf("bob grants bob-bot to the admin: %d", code)
	}
	cli(t, srv, "pool", "create", "lent", "--queue", "reviews", "--member", "own-bot", "--member", "bob-bot")

	push := func(title string) todoJSON {
		t.Helper()
		var td todoJSON
		if code := restDo(t, srv, "POST", "/v1/pools/lent/todos", map[string]string{"queue": "reviews", "title": title}, &td); code != 201 {
			t.Fatalf("pool push: %d", code)
		}
		return td
	}
	first := push("Review PR 30")
	if _, ok := bobSession.Bell(first.ID, wait); !ok {
		t.Fatal("bob's granted agent was not rung for the admin's pooled todo")
	}
	claimed, _ := json.Marshal(callTool(t, bobSession, "claim_next", map[string]any{}).Content)
	if !strings.Contains(string(claimed), first.ID) {
		t.Fatalf("claim_next of bob's agent = %s, want %s", claimed, first.ID)
	}
	callTool(t, bobSession, "complete", map[string]any{"todo_id": first.ID})
	var done todoJSON
	if code := restGet(t, srv, "/v1/todos/"+first.ID, &done); code != 200 || done.State != "done" {
		t.Fatalf("the admin reads the pooled todo bob's agent did: %d %+v", code, done)
	}

	second := push("Review PR 31")
	if _, ok := bobSession.Bell(second.ID, wait); !ok {
		t.Fatal("bob's agent was not rung for the second todo")
	}
	if code := asBob("DELETE", "/v1/agents/bob-bot/pool-grants/"+adminID, nil, nil); code != 200 {
		t.Fatalf("bob revokes: %d", code)
	}
	var pool struct{ Members []struct{ Handle string } }
	restGet(t, srv, "/v1/pools/lent", &pool)
	if len(pool.Members) != 1 || pool.Members[0].Handle != "own-bot" {
		t.Fatalf("pool after the revocation: %+v, want own-bot alone", pool.Members)
	}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	r, err := bobSession.Client().CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"todo_id": second.ID}}})
	if err != nil || !r.IsError {
		t.Fatalf("bob's agent claims from the pool after the revocation: %+v, %v; want a tool error", r, err)
	}
	cli(t, srv, "agent", "clock-in", "own-bot")
	if _, ok := ownSession.Bell(second.ID, wait); !ok {
		t.Fatal("the todo rung at bob's agent did not go to own-bot")
	}
}

// TestE2EPoolUpdate replaces a pool's members on the real binary (design:
// Pools): the todo rung at the member that leaves rings the one that
// joins at once, and the member that left can no longer claim it.
func TestE2EPoolUpdate(t *testing.T) {
	srv := startSQLite(t)
	leaving := vend(t, srv, "leaving-bot", []string{"reviews"}, allVerbs)
	joining := vend(t, srv, "joining-bot", []string{"reviews"}, allVerbs)
	leavingSession := testkit.OpenSession(t, leaving.MCPURL, leaving.Credential, "leaving-bot", nil)
	joiningSession := testkit.OpenSession(t, joining.MCPURL, joining.Credential, "joining-bot", nil)
	cli(t, srv, "pool", "create", "shifting", "--queue", "reviews", "--member", "leaving-bot")

	var td todoJSON
	if code := restDo(t, srv, "POST", "/v1/pools/shifting/todos", map[string]string{"queue": "reviews", "title": "Review PR 40"}, &td); code != 201 {
		t.Fatalf("pool push: %d", code)
	}
	if _, ok := leavingSession.Bell(td.ID, wait); !ok {
		t.Fatal("the only member was not rung")
	}
	cli(t, srv, "pool", "update", "shifting", "--member", "joining-bot")
	if _, ok := joiningSession.Bell(td.ID, wait); !ok {
		t.Fatal("the member that joined was not rung for the todo rung at the member that left")
	}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	r, err := leavingSession.Client().CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"todo_id": td.ID}}})
	if err != nil || !r.IsError {
		t.Fatalf("the member that left claims the pooled todo: %+v, %v; want a tool error", r, err)
	}
	claimed, _ := json.Marshal(callTool(t, joiningSession, "claim", map[string]any{"todo_id": td.ID}).Content)
	if !strings.Contains(string(claimed), td.ID) {
		t.Fatalf("claim by the member that joined = %s", claimed)
	}
}
