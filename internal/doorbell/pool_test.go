package doorbell_test

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/postgres"
	"github.com/rollcall/rollcall/internal/store/sqlite"
)

// poolEnv is env with three members a, b, c of one pool on queue q.
type poolEnv struct {
	*env
	members []domain.Agent
	pool    domain.Pool
}

// wantRung fails t unless the todo rings want and the hub rang want last.
func (e *poolEnv) wantRung(t *testing.T, todoID, want, when string) {
	t.Helper()
	if who, _ := e.ringsAt(t, todoID); who != want || e.hub.last() != want {
		t.Fatalf("%s rings %s (hub rang %s last), want %s", when, who, e.hub.last(), want)
	}
}

func newPoolEnv(t *testing.T) *poolEnv {
	e := &poolEnv{env: newEnv(t)}
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
	// a returns first and gets it: by its return (RouteHeld) or by the
	// release's own signal when its goroutine reads the store after a
	// turned in — once either way.
	e.setMemberOut(t, 0, false)
	_, before := e.ringsAt(t, t2.ID)
	if n := e.bell.RouteHeld(ctx, a); n > 1 {
		t.Fatalf("RouteHeld(a) rang %d, want at most 1", n)
	}
	waitFor(t, "held t2 rings a after a returned", func() bool { who, _ := e.ringsAt(t, t2.ID); return who == a })
	if _, n := e.ringsAt(t, t2.ID); n > before+1 {
		t.Fatalf("held t2 took %d rings on a's return, want 1", n-before)
	}
}

// TestPoolLeaseExpiry: a member that dies holding a pooled todo gives it
// back to the pool when its lease expires, and the next member is rung
// (design: Pools, Pool routing).
func TestPoolLeaseExpiry(t *testing.T) {
	e := newPoolEnv(t)
	ctx := t.Context()
	a, b := e.members[0].ID, e.members[1].ID
	t1 := e.pushPooled(t, 1)
	e.bell.RoutePooled(ctx, t1)
	if _, err := e.st.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: a, TodoID: t1.ID, Queues: []string{"q"}, Lease: time.Minute, Now: e.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	e.hub.setCut(a, true) // a is killed
	e.clock.Advance(2 * time.Minute)
	reaped, err := e.st.ReapExpiredLeases(ctx, store.ReapParams{Now: e.clock.Now()})
	if err != nil || len(reaped) != 1 || reaped[0].PoolID != e.pool.ID {
		t.Fatalf("reaped %+v, %v", reaped, err)
	}
	e.bell.RoutePooledID(ctx, reaped[0].ID)
	e.wantRung(t, t1.ID, b, "after the lease expired t1")
}

// TestPoolDigest: a member's digest counts the pooled todos rung at it;
// another member's does not (design: Pool routing).
func TestPoolDigest(t *testing.T) {
	e := newPoolEnv(t)
	ctx := t.Context()
	a, b := e.members[0].ID, e.members[1].ID
	e.bell.RoutePooled(ctx, e.pushPooled(t, 1))
	if !e.bell.Digest(ctx, a, "return") {
		t.Error("the digest of the member rung was not sent")
	}
	if e.bell.Digest(ctx, b, "return") {
		t.Error("a member not rung got a digest of the pool's todo")
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

// TestPoolRoutingAcrossInstances: two engines (instances) on one store
// and one bus, with no other shared memory: a decision one made is not
// repeated by the other; a ring the first cannot pass on (nobody eligible
// there) is released and the other instance, hosting an eligible member,
// rings it; two instances routing one held todo at once ring it once
// (design: Pool routing). On SQLite and on PostgreSQL.
func TestPoolRoutingAcrossInstances(t *testing.T) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			ctx := t.Context()
			var st store.Store
			if dialect == "sqlite" {
				s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
				if err != nil {
					t.Fatal(err)
				}
				st = s
			} else {
				url := pgtest.FreshDatabase(t)
				if err := postgres.Migrate(ctx, url); err != nil {
					t.Fatal(err)
				}
				s, err := postgres.Open(ctx, url)
				if err != nil {
					t.Fatal(err)
				}
				st = s
			}
			t.Cleanup(func() { st.Close() })
			clock := clockwork.NewFakeClockAt(t0)
			bs := bus.NewLocal()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			eval := evaluator.New(evaluator.Config{Store: st, Bus: bs, Events: nopEvents{}, Clock: clock, Log: log})
			var ids []string
			pool := domain.Pool{ID: "00000000-0000-7000-8004-000000000002", OwnerID: "o", Name: "team", Queues: []string{"q"}, CreatedAt: t0}
			for i := range 2 {
				a := domain.Agent{ID: fmt.Sprintf("00000000-0000-7000-8001-00000000002%d", i), Handle: fmt.Sprintf("m%d", i), OwnerID: "o",
					Active: true, Scope: domain.Scope{Queues: []string{"q"}, Verbs: []string{"claim_next"}}, BillingModes: []string{}, CreatedAt: t0, UpdatedAt: t0}
				if err := st.CreateAgent(ctx, store.CreateAgentParams{Agent: a, CredentialID: fmt.Sprintf("00000000-0000-7000-8002-00000000002%d", i),
					CredentialHash: a.Handle, Audit: domain.AuditRecord{Actor: "operator:o", Action: "agent.vend", AgentID: a.ID}}); err != nil {
					t.Fatal(err)
				}
				eval.Upsert(&a, "")
				ids = append(ids, a.ID)
				pool.Members = append(pool.Members, domain.PoolMember{AgentID: a.ID})
			}
			if err := st.CreatePool(ctx, store.CreatePoolParams{Pool: pool, Audit: domain.AuditRecord{Actor: "operator:o", Action: "pool.create"}}); err != nil {
				t.Fatal(err)
			}
			engine := func(h *hub) *doorbell.Engine {
				d := doorbell.New(doorbell.Config{Store: st, Bus: bs, Presence: eval, Clock: clock, Log: log})
				d.SetSessionHub(h)
				return d
			}
			h1 := &hub{only: map[string]bool{ids[0]: true}}
			h2 := &hub{only: map[string]bool{ids[1]: true}}
			d1, d2 := engine(h1), engine(h2)
			push := func(n int) domain.Todo {
				td, _, err := st.CreateTodo(ctx, store.CreateTodoParams{Todo: domain.Todo{ID: fmt.Sprintf("00000000-0000-7000-8005-1%011d", n),
					PoolID: pool.ID, Queue: "q", Title: "t", PushEligible: true, CreatedBy: "operator:o", State: domain.TodoPending,
					MaxAttempts: 3, CreatedAt: clock.Now(), UpdatedAt: clock.Now()}})
				if err != nil {
					t.Fatal(err)
				}
				return td
			}
			ringsAt := func(id string) (string, int) {
				td, err := st.GetTodo(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				return td.RingAgentID, td.RingAttempts
			}

			t1 := push(1)
			if !d1.RoutePooled(ctx, t1) {
				t.Fatal("instance 1 did not ring its member")
			}
			d2.RoutePooled(ctx, t1) // as read before: not repeated
			if who, n := ringsAt(t1.ID); who != ids[0] || n != 1 {
				t.Fatalf("t1 rings %s (%d rings), want m0 once", who, n)
			}
			// m0 goes out: instance 1 has nobody else, releases, tells; instance 2 rings m1.
			now := clock.Now()
			a, err := st.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: ids[0], Now: now, SetOverride: true, Override: "out",
				OverrideSetAt: &now, OverrideBy: "operator:o", Audit: domain.AuditRecord{Actor: "operator:o", Action: "agent.presence", AgentID: ids[0]}})
			if err != nil {
				t.Fatal(err)
			}
			eval.Upsert(&a, evaluator.ReasonOperator)
			d1.FailoverOnce(ctx)
			deadline := time.Now().Add(10 * time.Second)
			// The ring is committed (RouteRing) before it is delivered: wait for both.
			for who, _ := ringsAt(t1.ID); who != ids[1] || h2.last() != ids[1]; who, _ = ringsAt(t1.ID) {
				if time.Now().After(deadline) {
					t.Fatalf("t1 rings %q (instance 2's last doorbell: %q), want m1 rung by instance 2", who, h2.last())
				}
				time.Sleep(10 * time.Millisecond)
			}

			// Both instances host m1 and route one held todo at once: one ring.
			h1.mu.Lock()
			h1.only[ids[1]] = true
			h1.mu.Unlock()
			t2 := push(2)
			var wg sync.WaitGroup
			for _, d := range []*doorbell.Engine{d1, d2} {
				wg.Go(func() { d.RoutePooled(ctx, t2) })
			}
			wg.Wait()
			if who, n := ringsAt(t2.ID); who != ids[1] || n != 1 {
				t.Fatalf("t2 rings %s (%d rings), want m1 once", who, n)
			}
		})
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

// TestPoolConcurrentRoutesSpread: pooled todos routed at the same moment
// on one instance ring different members — each pick is reserved before
// the next reads the pool — instead of every route reading the same
// last_rung_at and ringing one member many times at once (design: Pool
// routing).
func TestPoolConcurrentRoutesSpread(t *testing.T) {
	e := newPoolEnv(t)
	ctx := t.Context()
	todos := make([]domain.Todo, 6)
	for i := range todos {
		todos[i] = e.pushPooled(t, i+1)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, td := range todos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e.bell.RoutePooled(ctx, td)
		}()
	}
	close(start)
	wg.Wait()
	per := map[string]int{}
	for _, td := range todos {
		who, _ := e.ringsAt(t, td.ID)
		per[who]++
	}
	for _, m := range e.members {
		if per[m.ID] != 2 {
			t.Fatalf("6 todos routed at once over 3 members rang them %v, want each member twice", per)
		}
	}
}

// waitFor polls cond until it holds, failing t after 10 s: for work the
// engine does on its own goroutine (a bus signal's route).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPoolClaimFreesMember: a member that claims the todo it was rung for
// is free again at once, so the next pooled todo rings it rather than a
// member still holding an unanswered ring, though that member was rung
// less recently (design: Pool routing).
func TestPoolClaimFreesMember(t *testing.T) {
	e := newPoolEnv(t)
	ctx := t.Context()
	var ts []domain.Todo
	for i, m := range e.members {
		td := e.pushPooled(t, i+1)
		if !e.bell.RoutePooled(ctx, td) {
			t.Fatalf("todo %d not rung", i+1)
		}
		e.wantRung(t, td.ID, m.ID, fmt.Sprintf("todo %d", i+1))
		ts = append(ts, td)
		e.clock.Advance(time.Second)
	}
	b := e.members[1].ID
	claimed, err := e.st.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: b, TodoID: ts[1].ID, Queues: []string{"q"}, Lease: time.Minute, Now: e.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	e.bell.Claimed(claimed)
	t4 := e.pushPooled(t, 4)
	e.bell.RoutePooled(ctx, t4)
	e.wantRung(t, t4.ID, b, "after b claimed its ring, the next todo")
	// a and c still hold an unanswered ring each, b one again: the next
	// goes to the least recently rung of them, a.
	t5 := e.pushPooled(t, 5)
	e.bell.RoutePooled(ctx, t5)
	e.wantRung(t, t5.ID, e.members[0].ID, "with every member rung once, the next todo")
}

// TestPoolRoutingPassesOverOffline (design: Pool routing): a member whose
// stored liveness is offline is not rung although it is in and streaming
// here — the ring goes to the next member; with every member offline the
// todo is held, and rung once one is online again.
func TestPoolRoutingPassesOverOffline(t *testing.T) {
	e := newPoolEnv(t)
	ctx := t.Context()
	liveness := func(state string, members ...domain.Agent) {
		t.Helper()
		var rows []store.HeartbeatRow
		for _, m := range members {
			rows = append(rows, store.HeartbeatRow{AgentID: m.ID, State: state, LastHeartbeatAt: e.clock.Now()})
		}
		if _, err := e.st.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{Rows: rows}); err != nil {
			t.Fatal(err)
		}
	}
	liveness("offline", e.members[0])
	t1 := e.pushPooled(t, 1)
	if !e.bell.RoutePooled(ctx, t1) {
		t.Fatal("not rung although b and c are not offline")
	}
	e.wantRung(t, t1.ID, e.members[1].ID, "with a offline, the first todo")
	e.clock.Advance(time.Second)
	liveness("offline", e.members[1], e.members[2])
	t2 := e.pushPooled(t, 2)
	if e.bell.RoutePooled(ctx, t2) {
		t.Fatal("rung with every member offline")
	}
	if who, n := e.ringsAt(t, t2.ID); who != "" || n != 0 {
		t.Fatalf("with every member offline t2 rings %q (%d rings), want held", who, n)
	}
	e.clock.Advance(time.Second)
	liveness("online", e.members[2])
	if !e.bell.RoutePooled(ctx, mustTodo(t, e.env, t2.ID)) {
		t.Fatal("not rung once c is online again")
	}
	e.wantRung(t, t2.ID, e.members[2].ID, "once c is online again, t2")
}

// TestRouteHeldReadsPastRungTodos (design: Pool routing): a pool whose
// oldest pending todos all ring someone still has the held todos behind
// them routed when a member may have become eligible — the read goes past
// the rung ones instead of stopping at the first page.
func TestRouteHeldReadsPastRungTodos(t *testing.T) {
	e := newPoolEnv(t)
	ctx := t.Context()
	const rung, held = 210, 7 // past two pages of the read (100 a page)
	for i := range rung + held {
		td := e.pushPooled(t, i+1)
		if i < rung {
			ok, err := e.st.RouteRing(ctx, store.RouteRingParams{TodoID: td.ID, AgentID: e.members[i%3].ID, At: e.clock.Now()})
			if err != nil || !ok {
				t.Fatalf("RouteRing %d: %v %v", i, ok, err)
			}
		}
		e.clock.Advance(time.Millisecond)
	}
	if n := e.bell.RouteHeld(ctx, e.members[0].ID); n != held {
		t.Fatalf("RouteHeld rang %d, want the %d held behind %d rung", n, held, rung)
	}
	for i := rung; i < rung+held; i++ {
		if who, _ := e.ringsAt(t, fmt.Sprintf("00000000-0000-7000-8005-%012d", i+1)); who == "" {
			t.Errorf("held todo %d still rings nobody", i+1)
		}
	}
}
