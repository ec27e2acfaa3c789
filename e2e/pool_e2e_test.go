package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

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
