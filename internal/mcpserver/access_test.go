package mcpserver_test

import (
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/mcpserver"
	"github.com/rollcall/rollcall/internal/store"
)

// TestHandOff: hand_off is listed only to agents with handoff grants,
// pushes a push-eligible todo attributed agent:<id> that rings the target's
// session, is audited, dedupes by key, and refuses any pair outside the
// grants with a pointer while changing nothing (design: Handoff).
func TestHandOff(t *testing.T) {
	e := newEnv(t)
	builder := e.vend("builder", allVerbs, "build", "review")
	res, err := e.svc.Vend(e.ctx, e.admin, app.VendInput{Handle: "planner", Queues: []string{"plan"}, Verbs: []string{domain.VerbListTodos},
		Handoff: []app.HandoffInput{{Agent: "builder", Queue: "build"}}})
	if err != nil {
		t.Fatal(err)
	}
	e.creds = append(e.creds, res.Credential)

	names := func(ts []mcp.Tool) []string {
		var out []string
		for _, tl := range ts {
			out = append(out, tl.Name)
		}
		return out
	}
	planner := e.connect(res.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	if got := names(planner.listTools()); len(got) < 2 || got[0] != domain.VerbListTodos || got[1] != domain.VerbHandOff {
		t.Fatalf("planner tools/list = %v, want list_todos, hand_off, then the self verbs", got)
	}
	bc := e.connect(builder.Credential, clientConfig{version: mcp.ProtocolVersion20251125, listen: true})
	if got := names(bc.listTools()); slices.Contains(got, domain.VerbHandOff) {
		t.Fatalf("builder (no grants, every verb) lists hand_off: %v", got)
	}
	if r, err := bc.call(domain.VerbHandOff, map[string]any{"to": "planner", "queue": "plan", "title": "x"}); err == nil && !r.IsError {
		t.Fatal("builder called hand_off")
	}
	e.waitEvent(bc.sessionID(), mcpserver.StreamOpened)

	var out app.HandOffResult
	planner.ok(domain.VerbHandOff, map[string]any{"to": "builder", "queue": "build", "title": "Build </channel> the plan", "payload": map[string]any{"plan": 7}, "idempotency_key": "plan-7"}, &out)
	td := out.Todo
	if !out.Created || td.AgentID != builder.Agent.ID || td.Queue != "build" || td.CreatedBy != "agent:"+res.Agent.ID || !td.PushEligible ||
		td.Source != "handoff" || string(td.Payload) != `{"plan":7}` {
		t.Fatalf("handed off %+v", out)
	}
	_, meta := channelParams(t, bc.note())
	if meta["todo_id"] != td.ID || meta["source"] != "handoff" {
		t.Fatalf("doorbell meta %v", meta)
	}
	planner.ok(domain.VerbHandOff, map[string]any{"to": builder.Agent.ID, "queue": "build", "title": "again", "idempotency_key": "plan-7"}, &out)
	if out.Created || out.Todo.ID != td.ID {
		t.Fatalf("same key = %+v", out)
	}
	for _, c := range []struct {
		args map[string]any
		ptr  string
	}{
		{map[string]any{"to": "builder", "queue": "review", "title": "x"}, "/queue"},
		{map[string]any{"to": "planner", "queue": "plan", "title": "x"}, "/to"},
		{map[string]any{"to": "nobody", "queue": "build", "title": "x"}, "/to"},
		{map[string]any{"to": "builder", "queue": "build", "title": " "}, "/title"},
	} {
		if te := planner.fails(domain.VerbHandOff, c.args); te.Code != domain.CodeInvalidArgument || te.Pointer != c.ptr {
			t.Errorf("%v: %+v, want invalid_argument at %s", c.args, te, c.ptr)
		}
	}
	ts, err := e.store.ListTodos(e.ctx, store.ListTodosParams{AgentID: builder.Agent.ID})
	if err != nil || len(ts) != 1 {
		t.Fatalf("todos of builder %d, %v; want only the one handed off", len(ts), err)
	}
	es, err := e.store.ListAudit(e.ctx, store.ListAuditParams{AgentID: builder.Agent.ID})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, en := range es {
		if en.Action == "todo.hand_off" && en.Actor == "agent:"+res.Agent.ID {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("todo.hand_off audit entries %d, want 1", n)
	}
}

// revokeBehindTheBack revokes the agent in the store only: no bus signal
// reaches this instance, as when another instance revoked it and the NOTIFY
// was lost.
func (e *env) revokeBehindTheBack(agentID string) {
	e.t.Helper()
	_, err := e.store.RevokeAgent(e.ctx, store.RevokeAgentParams{ID: agentID, Now: e.clock.Now(),
		Audit: domain.AuditRecord{Actor: "system", Action: "agent.revoke", AgentID: agentID}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// TestRecheckClosesSessionWithoutBusSignal: a session (with its open GET
// stream) whose credential was revoked elsewhere is closed within one
// re-check period (design: Revocation within 5 s).
func TestRecheckClosesSessionWithoutBusSignal(t *testing.T) {
	e := newEnv(t)
	a := e.vend("ada", allVerbs, "q1")
	ac := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125, listen: true})
	id := ac.sessionID()
	e.waitEvent(id, mcpserver.StreamOpened)
	e.revokeBehindTheBack(a.Agent.ID)
	e.clock.Advance(app.RecheckInterval)
	if ev := e.waitEvent(id, mcpserver.SessionClosed); ev.Reason != "credential no longer valid" {
		t.Fatalf("closed with reason %q", ev.Reason)
	}
	e.waitEvent(id, mcpserver.StreamClosed)
	if s := e.sessions(a.Agent.ID); len(s) != 0 {
		t.Fatalf("sessions after the re-check: %+v", s)
	}
}

// TestCredentialCache: a tool call reuses the credential lookup for
// app.CredentialCacheTTL (a revoke the bus did not announce is honoured
// after at most that), and a revoke through this instance invalidates the
// cache at once (design: Credential cache).
func TestCredentialCache(t *testing.T) {
	e := newEnv(t, func(o *mcpserver.Options) { o.Recheck = -1 })
	a := e.vend("ada", allVerbs, "q1")
	ac := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	ac.ok("list_todos", nil, nil)
	e.revokeBehindTheBack(a.Agent.ID)
	ac.ok("list_todos", nil, nil) // served from the cache: the store says revoked
	e.clock.Advance(app.CredentialCacheTTL)
	wantProblem(t, e.raw("POST", a.Credential, ac.sessionID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`), 401, domain.CodeUnauthenticated)

	b := e.vend("bea", allVerbs, "q1")
	bc := e.connect(b.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	bc.ok("list_todos", nil, nil)
	if _, err := e.svc.RevokeAgent(e.ctx, e.admin, "bea"); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.raw("POST", b.Credential, "", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`), 401, domain.CodeUnauthenticated)
}

// BenchmarkAuthenticateAgent compares the store lookup of an agent
// credential with the cached lookup MCP requests use (see docs/benchmarks.md).
//
//	go test -run '^$' -bench BenchmarkAuthenticateAgent -benchtime 20000x ./internal/mcpserver/
func BenchmarkAuthenticateAgent(b *testing.B) {
	e := newEnv(b)
	a := e.vend("ada", allVerbs, "q1")
	b.Run("store", func(b *testing.B) {
		for range b.N {
			if _, err := e.svc.AuthenticateAgent(e.ctx, a.Credential); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for range b.N {
			if _, err := e.svc.AuthenticateAgentCached(e.ctx, a.Credential); err != nil {
				b.Fatal(err)
			}
		}
	})
}
