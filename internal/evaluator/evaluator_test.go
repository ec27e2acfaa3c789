package evaluator_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/testkit"
)

// monday0900 is a Monday; the shift "09:00-17:00" starts then.
var monday0900 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// events records the transition events an evaluator publishes.
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) PresenceTransition(_ context.Context, agentID, p, reason string) {
	e.mu.Lock()
	e.got = append(e.got, agentID+":"+p+":"+reason)
	e.mu.Unlock()
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

// instance is one evaluator with what it published and was told.
type instance struct {
	ev     *evaluator.Evaluator
	events *events
	mu     sync.Mutex
	ins    []string // OnIn calls, "<agent_id>:<reason>"
}

func (in *instance) onIn() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.ins)
}

func newInstance(st store.Store, b bus.Bus, clock clockwork.Clock) *instance {
	in := &instance{events: &events{}}
	in.ev = evaluator.New(evaluator.Config{Store: st, Bus: b, Events: in.events, Clock: clock, Instance: "self",
		Log: slog.New(slog.DiscardHandler),
		OnIn: func(agentID, reason string) {
			in.mu.Lock()
			in.ins = append(in.ins, agentID+":"+reason)
			in.mu.Unlock()
		}})
	return in
}

func openStore(t *testing.T) *sqlite.Store { return testkit.OpenSQLite(t) }

// vend stores an agent with the shift ("" = none) and returns it.
func vend(t testing.TB, st store.Store, n int, shift string, at time.Time) domain.Agent {
	t.Helper()
	ctx := t.Context()
	owner := domain.Person{ID: "00000000-0000-7000-8000-000000000001", Name: "admin", Active: true, CreatedAt: at}
	owner.SetRole(domain.RoleAdmin)
	if _, err := st.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: owner, TokenHash: "h", TokenID: "00000000-0000-7000-8000-000000000002"}); err != nil {
		t.Fatal(err)
	}
	a := domain.Agent{ID: fmt.Sprintf("00000000-0000-7000-8001-%012d", n), Handle: fmt.Sprintf("a%d", n), OwnerID: owner.ID, Name: "a",
		Active: true, Scope: domain.Scope{Queues: []string{"q"}, Verbs: []string{"claim_next"}}, BillingModes: []string{}, CreatedAt: at, UpdatedAt: at}
	if err := st.CreateAgent(ctx, store.CreateAgentParams{Agent: a, CredentialID: fmt.Sprintf("00000000-0000-7000-8002-%012d", n), CredentialHash: fmt.Sprint("c", n),
		Audit: domain.AuditRecord{Actor: "operator:" + owner.ID, Action: "agent.vend", AgentID: a.ID}}); err != nil {
		t.Fatal(err)
	}
	if shift != "" {
		var err error
		a, err = st.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at, SetShift: true, Shift: shift,
			Audit: domain.AuditRecord{Actor: "operator:" + owner.ID, Action: "agent.shift", AgentID: a.ID}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// TestTransitionClaimedOnce: two instances share a store and a bus; at a
// shift start both passes see the transition, exactly one claims it and
// publishes its event, and the broadcast tells both (OnIn) once.
func TestTransitionClaimedOnce(t *testing.T) {
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(monday0900.Add(-time.Hour)) // 08:00, before the shift
	b := bus.NewLocal()
	a := vend(t, st, 1, "09:00-17:00", clock.Now())
	one, two := newInstance(st, b, clock), newInstance(st, b, clock)
	ctx := t.Context()
	for _, in := range []*instance{one, two} {
		if err := in.ev.Load(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// 08:00: out by the shift; the first pass claims in → out.
	n1, err := one.ev.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n2, err := two.ev.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n1+n2 != 1 {
		t.Fatalf("the out transition was claimed %d times, want once", n1+n2)
	}
	if p, ok := one.ev.Presence(a.ID, clock.Now()); !ok || p != "out" {
		t.Fatalf("Presence at 08:00 = %q, %v; want out", p, ok)
	}
	clock.Advance(time.Hour) // 09:00: the shift starts
	n1, _ = one.ev.Pass(ctx)
	n2, _ = two.ev.Pass(ctx)
	if n1 != 1 || n2 != 0 {
		t.Fatalf("at 09:00 the passes claimed %d and %d, want 1 and 0", n1, n2)
	}
	shiftStartClaimedBy(t, a.ID, one, two, 2) // the out transition, then in
}

// shiftStartClaimedBy checks that claimer published events events, the last
// agentID's shift-start in, the other instance none, and that both ran
// OnIn once for the shift start.
func shiftStartClaimedBy(t *testing.T, agentID string, claimer, other *instance, events int) {
	t.Helper()
	want := agentID + ":in:" + evaluator.ReasonShiftStart
	if got := claimer.events.list(); len(got) != events || got[events-1] != want {
		t.Fatalf("events of the claiming instance = %v, want %d ending in %s", got, events, want)
	}
	if got := other.events.list(); len(got) != 0 {
		t.Fatalf("the other instance published %v; only the claimer publishes", got)
	}
	for i, in := range []*instance{claimer, other} {
		if got := in.onIn(); !slices.Equal(got, []string{agentID + ":" + evaluator.ReasonShiftStart}) {
			t.Fatalf("instance %d OnIn = %v, want one shift_start", i+1, got)
		}
	}
}

// TestClockBehindCannotUndoTransition: at a shift start the instance
// whose clock is 20 ms ahead claims in; the one 10 ms behind, evaluating
// an instant earlier, computes out but cannot claim it back (design:
// Transition claim): one transition, one event, one OnIn on each.
func TestClockBehindCannotUndoTransition(t *testing.T) {
	st := openStore(t)
	ahead := clockwork.NewFakeClockAt(monday0900.Add(20 * time.Millisecond))
	behind := clockwork.NewFakeClockAt(monday0900.Add(-10 * time.Millisecond))
	b := bus.NewLocal()
	a := vend(t, st, 1, "09:00-17:00", monday0900.Add(-time.Hour))
	ctx := t.Context()
	if _, err := st.ClaimTransition(ctx, store.ClaimTransitionParams{AgentID: a.ID, New: "out", At: monday0900.Add(-time.Hour), By: "shift"}); err != nil {
		t.Fatal(err)
	}
	first, second := newInstance(st, b, ahead), newInstance(st, b, behind)
	for _, in := range []*instance{first, second} {
		if err := in.ev.Load(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := first.ev.Evaluate(ctx, a.ID, ahead.Now()); err != nil || !ok {
		t.Fatalf("the instance ahead: Evaluate = %v, %v; want it to claim in", ok, err)
	}
	if ok, err := second.ev.Evaluate(ctx, a.ID, behind.Now()); err != nil || ok {
		t.Fatalf("the instance behind: Evaluate = %v, %v; want its out refused", ok, err)
	}
	if g, err := st.GetAgent(ctx, store.AgentRef{ID: a.ID}); err != nil || g.Presence.Seen != "in" {
		t.Fatalf("stored presence_seen = %q (%v), want in", g.Presence.Seen, err)
	}
	behind.Advance(20 * time.Millisecond) // now past 09:00 there too
	if ok, err := second.ev.Evaluate(ctx, a.ID, behind.Now()); err != nil || ok {
		t.Fatalf("the instance behind after 09:00: Evaluate = %v, %v; want nothing to claim", ok, err)
	}
	shiftStartClaimedBy(t, a.ID, first, second, 1)
}

// TestPresenceSignalRefreshes: a presence write on another instance,
// signalled on the bus, reaches this instance's cache without a pass; a
// signal of its own writes is not read again.
func TestPresenceSignalRefreshes(t *testing.T) {
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(monday0900)
	b := bus.NewLocal()
	a := vend(t, st, 1, "", clock.Now())
	in := newInstance(st, b, clock)
	if err := in.ev.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p, _ := in.ev.Presence(a.ID, clock.Now()); p != "in" {
		t.Fatalf("Presence = %q, want in", p)
	}
	setAt := clock.Now()
	if _, err := st.UpdatePresence(t.Context(), store.UpdatePresenceParams{AgentID: a.ID, Now: setAt, SetOverride: true,
		Override: "out", OverrideSetAt: &setAt, OverrideBy: "operator:x",
		Audit: domain.AuditRecord{Actor: "operator:x", Action: "agent.presence", AgentID: a.ID}}); err != nil {
		t.Fatal(err)
	}
	// Its own signal is not refreshed: the writer cached the row it wrote.
	if err := bus.Send(t.Context(), b, bus.Presence{AgentID: a.ID, Cause: evaluator.ReasonOperator, Origin: "self"}); err != nil {
		t.Fatal(err)
	}
	if p, _ := in.ev.Presence(a.ID, clock.Now()); p != "in" {
		t.Fatalf("Presence after its own signal = %q, want in (no store read)", p)
	}
	if err := bus.Send(t.Context(), b, bus.Presence{AgentID: a.ID, Cause: evaluator.ReasonOperator, Origin: "other"}); err != nil {
		t.Fatal(err)
	}
	if p, _ := in.ev.Presence(a.ID, clock.Now()); p != "out" {
		t.Fatalf("Presence after the signal = %q, want out", p)
	}
}

// TestMissedTransitionHandledOnce: a transition whose broadcast this
// instance missed is found by MissedTransitions after a Load, with the
// reason its stored source names, and only once.
func TestMissedTransitionHandledOnce(t *testing.T) {
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(monday0900)
	a := vend(t, st, 1, "", clock.Now())
	deaf := newInstance(st, bus.NewLocal(), clock) // its bus hears nothing of the other's
	if err := deaf.ev.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimTransition(t.Context(), store.ClaimTransitionParams{AgentID: a.ID, New: "out", At: clock.Now(), By: "operator"}); err != nil {
		t.Fatal(err)
	}
	if err := deaf.ev.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := deaf.ev.MissedTransitions()
	if len(got) != 1 || got[0] != (bus.PresenceTransition{AgentID: a.ID, Presence: "out", Reason: evaluator.ReasonOperator}) {
		t.Fatalf("MissedTransitions = %+v, want the operator's out", got)
	}
	if again := deaf.ev.MissedTransitions(); len(again) != 0 {
		t.Fatalf("MissedTransitions a second time = %+v, want none", again)
	}
}

// countingStore counts the evaluator's "changed since" reads: a pass does
// one, the timer's evaluation of the agents due none.
type countingStore struct {
	*sqlite.Store
	changedSince atomic.Int32
}

func (c *countingStore) ListAgentsChangedSince(ctx context.Context, p store.ListChangedParams) ([]domain.Agent, error) {
	c.changedSince.Add(1)
	return c.Store.ListAgentsChangedSince(ctx, p)
}

// running starts an evaluator's Run loop with period every on st and b and
// stops it at cleanup.
func running(t *testing.T, st evaluator.Store, b bus.Bus, clock clockwork.Clock, every time.Duration) *instance {
	t.Helper()
	in := &instance{events: &events{}}
	in.ev = evaluator.New(evaluator.Config{Store: st, Bus: b, Events: in.events, Clock: clock, Instance: fmt.Sprintf("i%p", in),
		Log: slog.New(slog.DiscardHandler),
		OnIn: func(agentID, reason string) {
			in.mu.Lock()
			in.ins = append(in.ins, agentID+":"+reason)
			in.mu.Unlock()
		}})
	if err := in.ev.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); in.ev.Run(ctx, every) }()
	t.Cleanup(func() { cancel(); <-done })
	return in
}

// eventually waits (real time, at most 20 s: the machine is busy) until
// cond holds, and fails with what otherwise.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// blockUntil waits until n timers or tickers wait on the fake clock.
func blockUntil(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("%d waiters on the fake clock: %v", n, err)
	}
}

// TestShiftBoundaryOnTime (design: Shift boundaries on time): 1 000 agents
// on one shift, two instances on one store and bus, a 30 s period. The
// clock is advanced to the shift's start and no further — the next period
// is 20 s away — and every agent's transition is claimed once, published,
// and heard by both instances, with no "changed since" read: it was the
// timer set to the boundary, not a pass. On the old code nothing happened
// until the next period.
func TestShiftBoundaryOnTime(t *testing.T) {
	const agents = 1000
	sq := openStore(t)
	st := &countingStore{Store: sq}
	clock := clockwork.NewFakeClockAt(monday0900.Add(-10 * time.Second)) // 08:59:50
	ids := map[string]bool{}
	for i := range agents {
		a := vend(t, sq, i, "09:00-17:00", clock.Now())
		ids[a.ID] = true
	}
	b := bus.NewLocal()
	one := running(t, st, b, clock, 30*time.Second)
	two := running(t, st, b, clock, 30*time.Second)
	blockUntil(t, clock, 4) // each Run's ticker and timer
	// The vends left every agent "in" (no transition seen yet): the first
	// wake-up finds them all due and out.
	eventually(t, "the out transitions of 08:59:50 were not published", func() bool {
		return len(one.events.list())+len(two.events.list()) == agents
	})
	reads := st.changedSince.Load()

	clock.Advance(10 * time.Second) // 09:00:00, the shift starts
	inAt := func(in *instance) int {
		n := 0
		for _, ev := range in.events.list() {
			if id, rest, _ := strings.Cut(ev, ":"); ids[id] && rest == "in:"+evaluator.ReasonShiftStart {
				n++
			}
		}
		return n
	}
	eventually(t, "the shift start was not published at 09:00 for every agent", func() bool {
		return inAt(one)+inAt(two) == agents && len(one.onIn()) == agents && len(two.onIn()) == agents
	})
	if got := inAt(one) + inAt(two); got != agents {
		t.Fatalf("%d shift_start events, want %d (one per agent)", got, agents)
	}
	if got := st.changedSince.Load(); got != reads {
		t.Fatalf("%d \"changed since\" reads at the boundary, want none (the timer, not a pass)", got-reads)
	}
	if !clock.Now().Equal(monday0900) {
		t.Fatalf("clock at %s, want 09:00", clock.Now())
	}
	for _, in := range []*instance{one, two} {
		if p, ok := in.ev.Presence(sortedFirst(ids), clock.Now()); !ok || p != "in" {
			t.Fatalf("Presence at 09:00 = %q, %v; want in", p, ok)
		}
	}
}

// TestEarlierBoundaryRearms (design: Shift boundaries on time): the timer
// is set to the shift start at 10:00 and the period is 10 min; the shift is
// then edited to start at 09:00 — once on this instance (Upsert), once on
// another (the presence signal) — and advancing the clock to 09:00 alone
// publishes the transition: the earlier boundary re-armed the timer.
func TestEarlierBoundaryRearms(t *testing.T) {
	for _, here := range []bool{true, false} {
		t.Run(map[bool]string{true: "written here", false: "written elsewhere"}[here], func(t *testing.T) {
			sq := openStore(t)
			st := &countingStore{Store: sq}
			clock := clockwork.NewFakeClockAt(monday0900.Add(-10 * time.Second)) // 08:59:50
			a := vend(t, sq, 1, "10:00-17:00", clock.Now())
			b := bus.NewLocal()
			in := running(t, st, b, clock, 10*time.Minute)
			blockUntil(t, clock, 2)
			eventually(t, "the out transition was not published", func() bool { return len(in.events.list()) == 1 })

			edited, err := sq.UpdatePresence(t.Context(), store.UpdatePresenceParams{AgentID: a.ID, Now: clock.Now(), SetShift: true, Shift: "09:00-17:00",
				Audit: domain.AuditRecord{Actor: "operator:x", Action: "agent.shift", AgentID: a.ID}})
			if err != nil {
				t.Fatal(err)
			}
			if here {
				in.ev.Upsert(&edited, "")
			} else if err := bus.Send(t.Context(), b, bus.Presence{AgentID: a.ID, Origin: "other"}); err != nil {
				t.Fatal(err)
			}
			reads := st.changedSince.Load()
			clock.Advance(10 * time.Second) // 09:00, the new start; the old one and the period are far
			want := a.ID + ":in:" + evaluator.ReasonShiftStart
			eventually(t, "the earlier shift start was not published at 09:00", func() bool {
				got := in.events.list()
				return len(got) == 2 && got[1] == want
			})
			if got := st.changedSince.Load(); got != reads {
				t.Fatalf("%d \"changed since\" reads, want none (the re-armed timer, not a pass)", got-reads)
			}
		})
	}
}

// sortedFirst returns the smallest key of m.
func sortedFirst(m map[string]bool) string {
	first := ""
	for k := range m {
		if first == "" || k < first {
			first = k
		}
	}
	return first
}

// failingStore refuses the claims while fail is set.
type failingStore struct {
	*countingStore
	fail atomic.Bool
}

func (f *failingStore) ClaimTransition(ctx context.Context, p store.ClaimTransitionParams) (bool, error) {
	if f.fail.Load() {
		return false, fmt.Errorf("database unavailable")
	}
	return f.countingStore.ClaimTransition(ctx, p)
}

// TestFailedDueEvaluationRetried (design: Shift boundaries on time): the
// claim at a shift start fails (the store is down); the timer evaluates the
// agent again RetryAfter later, not at its next change (17:00) or the next
// period (10 min away), and the transition is published then.
func TestFailedDueEvaluationRetried(t *testing.T) {
	sq := openStore(t)
	st := &failingStore{countingStore: &countingStore{Store: sq}}
	clock := clockwork.NewFakeClockAt(monday0900.Add(-10 * time.Second))
	a := vend(t, sq, 1, "09:00-17:00", clock.Now())
	in := running(t, st, bus.NewLocal(), clock, 10*time.Minute)
	blockUntil(t, clock, 2)
	eventually(t, "the out transition was not published", func() bool { return len(in.events.list()) == 1 })
	st.fail.Store(true)
	clock.Advance(10 * time.Second) // 09:00: the claim fails
	blockUntil(t, clock, 2)         // the failed evaluation re-armed the timer
	st.fail.Store(false)
	clock.Advance(evaluator.RetryAfter)
	want := a.ID + ":in:" + evaluator.ReasonShiftStart
	eventually(t, "the shift start was not retried "+evaluator.RetryAfter.String()+" after the failed claim", func() bool {
		got := in.events.list()
		return len(got) == 2 && got[1] == want
	})
}
