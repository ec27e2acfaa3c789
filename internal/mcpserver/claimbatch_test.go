package mcpserver_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/domain"
)

func ids(ts []domain.Todo) []string {
	out := []string{}
	for _, td := range ts {
		out = append(out, td.ID)
	}
	return out
}

// claim_next with n (design: Claiming in batches): up to n todos, oldest
// first, as {"todos": [...]}; none claimable is an empty list, not
// not_found; without n the answer is the one todo it always was.
func TestClaimNextN(t *testing.T) {
	e := newEnv(t)
	a := e.vend("ada", allVerbs, "q1", "q2")
	ac := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	var pushed []domain.Todo
	for _, title := range []string{"one", "two", "three", "four"} {
		pushed = append(pushed, e.push("ada", "q1", title))
		e.clock.Advance(time.Millisecond)
	}
	other := e.push("ada", "q2", "elsewhere")

	for _, tc := range []struct {
		args    map[string]any
		pointer string
	}{
		{map[string]any{"n": 0}, "/n"},
		{map[string]any{"n": domain.MaxClaimBatch + 1}, "/n"},
		{map[string]any{"n": 1.5}, "/n"},
		{map[string]any{"n": "2"}, "/n"},
	} {
		if te := ac.fails("claim_next", tc.args); te.Code != domain.CodeInvalidArgument || te.Pointer != tc.pointer {
			t.Errorf("claim_next %v: %+v, want invalid_argument at %s", tc.args, te, tc.pointer)
		}
	}

	var list struct{ Todos []domain.Todo }
	ac.ok("claim_next", map[string]any{"queue": "q1", "n": 3, "lease_seconds": 60}, &list)
	if got, want := ids(list.Todos), ids(pushed[:3]); !slices.Equal(got, want) {
		t.Fatalf("claim_next n=3 = %v, want the three oldest %v", got, want)
	}
	now := e.clock.Now().UTC()
	for _, td := range list.Todos {
		if td.State != domain.TodoClaimed || td.LeaseExpiresAt == nil || !td.LeaseExpiresAt.Equal(now.Add(time.Minute)) {
			t.Errorf("claimed %s: state %s lease %v, want claimed until %v", td.ID, td.State, td.LeaseExpiresAt, now.Add(time.Minute))
		}
	}
	var one domain.Todo
	ac.ok("claim_next", map[string]any{"queue": "q1"}, &one) // no n: today's answer
	if one.ID != pushed[3].ID {
		t.Fatalf("claim_next without n = %s, want %s", one.ID, pushed[3].ID)
	}
	ac.ok("claim_next", map[string]any{"n": 32}, &list)
	if got := ids(list.Todos); !slices.Equal(got, []string{other.ID}) {
		t.Fatalf("claim_next n=32 = %v, want %s", got, other.ID)
	}
	res, err := ac.call("claim_next", map[string]any{"n": 2})
	if err != nil || res.IsError || resultText(t, res) != `{"todos":[]}` {
		t.Fatalf("claim_next n=2 with nothing claimable = %v %v, want {\"todos\":[]}", res, err)
	}
	if te := ac.fails("claim_next", nil); te.Code != domain.CodeNotFound {
		t.Fatalf("claim_next without n, nothing claimable: %+v, want not_found", te)
	}
}

type finishedAnswer struct {
	Todo domain.Todo   `json:"todo"`
	Next []domain.Todo `json:"next"`
}

// complete and fail with next (design: Complete and claim the next): the
// todo finished and the next claimed in one call; a refused call claims
// nothing.
func TestCompleteWithNext(t *testing.T) {
	e := newEnv(t)
	a := e.vend("ada", allVerbs, "q1", "q2")
	ac := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	var pushed []domain.Todo
	for _, title := range []string{"one", "two", "three", "four", "five"} {
		pushed = append(pushed, e.push("ada", "q1", title))
		e.clock.Advance(time.Millisecond)
	}
	var td domain.Todo
	ac.ok("claim_next", nil, &td)

	for _, tc := range []struct {
		args    map[string]any
		pointer string
	}{
		{map[string]any{"todo_id": td.ID, "next": true}, "/next"},
		{map[string]any{"todo_id": td.ID, "next": "q1"}, "/next"},
		{map[string]any{"todo_id": td.ID, "next": map[string]any{"bogus": 1}}, "/next/bogus"},
		{map[string]any{"todo_id": td.ID, "next": map[string]any{"n": 0}}, "/next/n"},
		{map[string]any{"todo_id": td.ID, "next": map[string]any{"n": 33}}, "/next/n"},
		{map[string]any{"todo_id": td.ID, "next": map[string]any{"queue": ""}}, "/next/queue"},
		{map[string]any{"todo_id": td.ID, "next": map[string]any{"queue": "elsewhere"}}, "/next/queue"},
		{map[string]any{"todo_id": td.ID, "next": map[string]any{"lease_seconds": 0}}, "/next/lease_seconds"},
	} {
		if te := ac.fails("complete", tc.args); te.Code != domain.CodeInvalidArgument || te.Pointer != tc.pointer {
			t.Errorf("complete %v: %+v, want invalid_argument at %s", tc.args, te, tc.pointer)
		}
	}
	if got, err := e.svc.GetTodo(e.ctx, e.admin, td.ID); err != nil || got.State != domain.TodoClaimed {
		t.Fatalf("after refused completes the todo is %+v %v, want still claimed", got, err)
	}

	var fin finishedAnswer
	ac.ok("complete", map[string]any{"todo_id": td.ID, "result": map[string]any{"ok": true}, "next": map[string]any{}}, &fin)
	if fin.Todo.ID != pushed[0].ID || fin.Todo.State != domain.TodoDone || !jsonEqual(fin.Todo.Result, []byte(`{"ok":true}`)) {
		t.Fatalf("complete with next: todo %+v", fin.Todo)
	}
	if got := ids(fin.Next); !slices.Equal(got, []string{pushed[1].ID}) || fin.Next[0].State != domain.TodoClaimed {
		t.Fatalf("complete with next {} claimed %v, want %s", got, pushed[1].ID)
	}
	ac.ok("complete", map[string]any{"todo_id": pushed[1].ID, "next": map[string]any{"queue": "q1", "n": 2, "lease_seconds": 60}}, &fin)
	if got, want := ids(fin.Next), ids(pushed[2:4]); !slices.Equal(got, want) {
		t.Fatalf("complete with next n=2 claimed %v, want %v", got, want)
	}
	if lease := fin.Next[1].LeaseExpiresAt; lease == nil || !lease.Equal(e.clock.Now().UTC().Add(time.Minute)) {
		t.Errorf("next's lease %v, want 60 s from now", lease)
	}

	// A refused complete claims nothing: pushed[4] stays pending.
	te := ac.fails("complete", map[string]any{"todo_id": pushed[0].ID, "next": map[string]any{}})
	if te.Code != domain.CodeConflict {
		t.Fatalf("complete of a done todo with next: %+v, want conflict", te)
	}
	if got, err := e.svc.GetTodo(e.ctx, e.admin, pushed[4].ID); err != nil || got.State != domain.TodoPending {
		t.Fatalf("after a refused complete with next the next todo is %+v %v, want pending", got, err)
	}

	// fail with next: the failed todo waits for its retry, the next is claimed.
	ac.ok("fail", map[string]any{"todo_id": pushed[2].ID, "reason": "flaky", "next": map[string]any{"n": 5}}, &fin)
	if fin.Todo.State != domain.TodoFailed || fin.Todo.RetryAt == nil || fin.Todo.LastError != "flaky" {
		t.Fatalf("fail with next: todo %+v", fin.Todo)
	}
	if got := ids(fin.Next); !slices.Equal(got, []string{pushed[4].ID}) {
		t.Fatalf("fail with next claimed %v, want %s", got, pushed[4].ID)
	}
	// Nothing left: next is an empty list, never null.
	res, err := ac.call("complete", map[string]any{"todo_id": pushed[3].ID, "next": map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("complete with nothing left: %v %v", res, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(resultText(t, res)), &raw); err != nil || string(raw["next"]) != "[]" {
		t.Fatalf("complete with nothing left answered %s, want next []", resultText(t, res))
	}
	// Without next, complete answers the todo as it always did.
	ac.ok("complete", map[string]any{"todo_id": pushed[4].ID}, &td)
	if td.ID != pushed[4].ID || td.State != domain.TodoDone {
		t.Fatalf("complete without next: %+v", td)
	}
}

// The next argument's schema is an object of exactly queue, lease_seconds
// and n, as claim_next's.
func TestNextSchema(t *testing.T) {
	e := newEnv(t)
	a := e.vend("ada", allVerbs, "q1")
	ac := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	for _, tl := range ac.listTools() {
		if tl.Name != "complete" && tl.Name != "fail" {
			continue
		}
		next, _ := tl.InputSchema.Properties["next"].(map[string]any)
		props, _ := next["properties"].(map[string]any)
		var names []string
		for k := range props {
			names = append(names, k)
		}
		slices.Sort(names)
		if next["type"] != "object" || next["additionalProperties"] != false || !slices.Equal(names, []string{"lease_seconds", "n", "queue"}) {
			t.Errorf("%s next schema %v, want an object of lease_seconds, n, queue", tl.Name, next)
		}
		n, _ := props["n"].(map[string]any)
		if n["minimum"] != 1.0 || n["maximum"] != float64(domain.MaxClaimBatch) {
			t.Errorf("%s next.n bounds %v..%v, want 1..%d", tl.Name, n["minimum"], n["maximum"], domain.MaxClaimBatch)
		}
	}
}
