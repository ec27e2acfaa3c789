package doorbell_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/store"
)

// poolHub is a SessionHub with one session per agent, streaming unless
// the agent was cut off; it records which agent each doorbell reached.
type poolHub struct {
	mu   sync.Mutex
	cut  map[string]bool
	rung []string // agent ids, in order
}

func (h *poolHub) AgentSessions(agentID string) []doorbell.SessionInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return []doorbell.SessionInfo{{ID: "s-" + agentID, AgentID: agentID, Streaming: !h.cut[agentID]}}
}

func (h *poolHub) Notify(sessionID string, _ domain.ChannelMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rung = append(h.rung, sessionID[2:])
	return nil
}
func (h *poolHub) CloseAgentSessions(string, []string) {}
func (h *poolHub) AgentsWithSessions() []string        { return nil }

func (h *poolHub) setCut(agentID string, cut bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cut[agentID] = cut
}

func (h *poolHub) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rung) == 0 {
		return ""
	}
	return h.rung[len(h.rung)-1]
}

// poolEnv is env with three members a, b, c of one pool on queue q.
type poolEnv struct {
	*env
	hub     *poolHub
	members []domain.Agent
	pool    domain.Pool
}

func newPoolEnv(t *testing.T) *poolEnv {
	e := &poolEnv{env: newEnv(t), hub: &poolHub{cut: map[string]bool{}}}
	e.bell.SetSessionHub(e.hub)
	ctx := t.Context()
	e.pool = domain.Pool{ID: "00000000-0000-7000-8004-000000000001", OwnerID: e.agent.OwnerID, Name: "team", Queues: []string{"q"}, CreatedAt: t0}
	for i, h := range []string{"a", "b", "c"} {
		a := e.agent
		a.ID, a.Handle = fmt.Sprintf("00000000-0000-7000-8001-00000000001%d", i), h
		if err := e.st.CreateAgent(ctx, store.CreateAgentParams{Agent: a, CredentialID: fmt.Sprintf("00000000-0000-7000-8002-00000000001%d", i),
			CredentialHash: "c" + h, Audit: domain.AuditRecord{Actor: "operator:x", Action: "agent.vend", AgentID: a.ID}}); err != nil {
			t.Fatal(err)
		}
		e.eval.Upsert(&a, "")
		e.members = append(e.members, a)
		e.pool.Members = append(e.pool.Members, domain.PoolMember{AgentID: a.ID})
	}
	if err := e.st.CreatePool(ctx, store.CreatePoolParams{Pool: e.pool, Audit: domain.AuditRecord{Actor: "operator:x", Action: "pool.create"}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *poolEnv) pushPooled(t *testing.T, n int) domain.Todo {
	t.Helper()
	td := domain.Todo{ID: fmt.Sprintf("00000000-0000-7000-8005-%012d", n), PoolID: e.pool.ID, Queue: "q", Title: "t", PushEligible: true,
		CreatedBy: "operator:x", State: domain.TodoPending, MaxAttempts: 3, CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
	got, _, err := e.st.CreateTodo(t.Context(), store.CreateTodoParams{Todo: td})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// ringsAt reads who a pooled todo rings now and how many rings it took.
func (e *poolEnv) ringsAt(t *testing.T, id string) (string, int) {
	t.Helper()
	td, err := e.st.GetTodo(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return td.RingAgentID, td.RingAttempts
}

func (e *poolEnv) setMemberOut(t *testing.T, i int, out bool) {
	t.Helper()
	now := e.clock.Now()
	override := "in"
	if out {
		override = "out"
	}
	a, err := e.st.UpdatePresence(t.Context(), store.UpdatePresenceParams{AgentID: e.members[i].ID, Now: now, SetOverride: true,
		Override: override, OverrideSetAt: &now, OverrideBy: "operator:x",
		Audit: domain.AuditRecord{Actor: "operator:x", Action: "agent.presence", AgentID: e.members[i].ID}})
	if err != nil {
		t.Fatal(err)
	}
	e.eval.Upsert(&a, evaluator.ReasonOperator)
}

// TestPoolRouting: a pooled todo rings exactly one member that can answer,
// the one rung least recently; a member that goes out or loses its stream
// passes the ring on at once, one that does not claim within
// failover_after passes it on then; with nobody eligible the todo is
// held, and the first member to return gets it (design: Pool routing).
func TestPoolRouting(t *testing.T) {
	e := newPoolEnv(t)
	ctx := t.Context()
	a, b, c := e.members[0].ID, e.members[1].ID, e.members[2].ID

	t1 := e.pushPooled(t, 1)
	if !e.bell.RoutePooled(ctx, t1) {
		t.Fatal("first pooled todo not rung")
	}
	if who, n := e.ringsAt(t, t1.ID); who != a || n != 1 || e.hub.last() != a {
		t.Fatalf("first todo rings %s (%d rings, hub %s), want a once", who, n, e.hub.last())
	}
	e.clock.Advance(time.Second)
	t2 := e.pushPooled(t, 2)
	e.bell.RoutePooled(ctx, t2)
	if who, _ := e.ringsAt(t, t2.ID); who != b {
		t.Fatalf("second todo rings %s, want b (never rung)", who)
	}
	// The ring decision is not repeated: routing t1 again changes nothing.
	e.bell.RoutePooled(ctx, mustTodo(t, e.env, t1.ID))
	if who, n := e.ringsAt(t, t1.ID); who != a || n != 1 {
		t.Fatalf("re-routing a rung todo moved it to %s (%d rings)", who, n)
	}

	// a goes out: its ring passes at once to c, the least recently rung.
	e.setMemberOut(t, 0, true)
	e.bell.FailoverOnce(ctx)
	if who, n := e.ringsAt(t, t1.ID); who != c || n != 2 {
		t.Fatalf("after a went out t1 rings %s (%d rings), want c, 2", who, n)
	}
	// c does not claim within failover_after: it passes to b (a is out).
	e.clock.Advance(doorbell.DefaultFailoverAfter)
	e.bell.FailoverOnce(ctx)
	if who, _ := e.ringsAt(t, t1.ID); who != b {
		t.Fatalf("after failover_after t1 rings %s, want b", who)
	}
	if who, _ := e.ringsAt(t, t2.ID); who != c {
		t.Fatalf("after failover_after t2 rings %s, want c (b was rung more recently)", who)
	}

	// b claims t1: nobody is rung for it any more.
	if _, err := e.st.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: b, TodoID: t1.ID, Queues: []string{"q"}, Lease: time.Minute, Now: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(doorbell.DefaultFailoverAfter)
	e.bell.FailoverOnce(ctx)
	if who, _ := e.ringsAt(t, t1.ID); who != "" {
		t.Fatalf("a claimed todo rings %s", who)
	}

	// Everyone out or streamless: t2 is held.
	e.hub.setCut(b, true)
	e.setMemberOut(t, 2, true)
	e.bell.FailoverOnce(ctx)
	if who, _ := e.ringsAt(t, t2.ID); who != "" {
		t.Fatalf("with nobody eligible t2 rings %s, want held", who)
	}
	// a returns first and gets it.
	e.setMemberOut(t, 0, false)
	if n := e.bell.RouteHeldFor(ctx, a); n != 1 {
		t.Fatalf("RouteHeldFor(a) rang %d, want 1", n)
	}
	if who, _ := e.ringsAt(t, t2.ID); who != a || e.hub.last() != a {
		t.Fatalf("held t2 rings %s after a returned, want a", who)
	}
}

// TestPoolRingBudget: the ring budget is the todo's across members; once
// spent the ring stays where it is and the todo waits for a claim.
func TestPoolRingBudget(t *testing.T) {
	e := newPoolEnv(t)
	ctx := t.Context()
	t1 := e.pushPooled(t, 1)
	e.bell.RoutePooled(ctx, t1)
	for range 2 * domain.MaxRings {
		e.clock.Advance(doorbell.DefaultFailoverAfter)
		e.bell.FailoverOnce(ctx)
	}
	if _, n := e.ringsAt(t, t1.ID); n != domain.MaxRings {
		t.Fatalf("%d rings, want the budget %d", n, domain.MaxRings)
	}
}

func mustTodo(t *testing.T, e *env, id string) domain.Todo {
	t.Helper()
	td, err := e.st.GetTodo(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return td
}
