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
