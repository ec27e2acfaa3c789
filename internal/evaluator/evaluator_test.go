package evaluator_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
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
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
	want := a.ID + ":in:" + evaluator.ReasonShiftStart
	if got := one.events.list(); len(got) != 2 || got[1] != want {
		t.Fatalf("events of the claiming instance = %v, want the out transition then %s", got, want)
	}
	if got := two.events.list(); len(got) != 0 {
		t.Fatalf("the other instance published %v; only the claimer publishes", got)
	}
	for i, in := range []*instance{one, two} {
		if got := in.onIn(); !slices.Equal(got, []string{a.ID + ":" + evaluator.ReasonShiftStart}) {
			t.Fatalf("instance %d OnIn = %v, want one shift_start", i+1, got)
		}
	}
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
