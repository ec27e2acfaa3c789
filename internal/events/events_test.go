package events_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/testkit"
)

// The hub on the real in-process bus. A hub without a store takes the
// owner the publisher gives, so most of these tests need none.

func newHub(t *testing.T) (*events.Hub, bus.Bus) {
	t.Helper()
	b := bus.NewLocal()
	t.Cleanup(func() { _ = b.Close() })
	return events.New(events.Options{Bus: b, Clock: clockwork.NewFakeClockAt(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))}), b
}

func next(t *testing.T, sub *events.Subscription) events.Event {
	t.Helper()
	select {
	case ev, ok := <-sub.C():
		if !ok {
			t.Fatal("subscription closed")
		}
		return ev
	case <-time.After(testkit.Wait):
		t.Fatalf("no event within %s", testkit.Wait)
	}
	panic("unreachable")
}

// subscribe subscribes ownerID after lastEventID and closes the
// subscription when the test ends.
func subscribe(t *testing.T, h *events.Hub, ownerID, lastEventID string) *events.Subscription {
	t.Helper()
	sub, err := h.Subscribe(ownerID, lastEventID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Close)
	return sub
}

func changed(state string) events.PresenceChangedData {
	return events.PresenceChangedData{Agent: "builder", State: state}
}

// TestOwnAgentsOnlyAndOnce: a subscriber receives the events of its own
// agents only, and two consecutive equal presence_changed pairs of one
// agent (two instances publishing the same change) are delivered once.
func TestOwnAgentsOnlyAndOnce(t *testing.T) {
	h, _ := newHub(t)
	mine := subscribe(t, h, "me", "")
	ctx := t.Context()
	h.Publish(ctx, events.KindPresenceChanged, "a-bob", "bob", changed("online"))
	h.Publish(ctx, events.KindPresenceChanged, "a-me", "me", changed("online"))
	h.Publish(ctx, events.KindPresenceChanged, "a-me", "me", changed("online")) // the same change again
	h.Publish(ctx, events.KindPresenceChanged, "a-me", "me", changed("offline"))
	for _, want := range []string{"online", "offline"} {
		ev := next(t, mine)
		var d events.PresenceChangedData
		if err := json.Unmarshal(ev.Data, &d); err != nil || ev.AgentID != "a-me" || ev.Kind != events.KindPresenceChanged || d.State != want || ev.ID == "" {
			t.Fatalf("event = %+v %s, want a-me %s", ev, ev.Data, want)
		}
	}
	if p, ok := h.LastPair("a-me"); !ok || p.State != "offline" {
		t.Errorf("LastPair = %+v, %v; want offline", p, ok)
	}
}

// TestResume: a subscriber that gives the id of a buffered event gets the
// later events of its own agents as Backlog; an id no longer buffered is
// Missed.
func TestResume(t *testing.T) {
	h, _ := newHub(t)
	watch := subscribe(t, h, "me", "")
	ctx := t.Context()
	h.Publish(ctx, events.KindPresenceChanged, "a-me", "me", changed("online"))
	first := next(t, watch)
	h.Publish(ctx, events.KindPresenceChanged, "a-bob", "bob", changed("online"))
	h.Publish(ctx, events.KindPresenceChanged, "a-me", "me", changed("degraded"))
	second := next(t, watch)

	sub := subscribe(t, h, "me", first.ID)
	if sub.Missed || len(sub.Backlog) != 1 || sub.Backlog[0].ID != second.ID {
		t.Fatalf("resume after %s: missed=%v backlog=%+v, want [%s]", first.ID, sub.Missed, sub.Backlog, second.ID)
	}
	gone := subscribe(t, h, "me", "9999-gone")
	if !gone.Missed || len(gone.Backlog) != 0 {
		t.Errorf("unknown Last-Event-ID: missed=%v backlog=%d, want missed", gone.Missed, len(gone.Backlog))
	}
}

// TestCloseTokenOwnerAndHub: revoking a token ends the streams opened with
// it, deactivating a person ends theirs, a hand-over sends later events to
// the new owner, and Close ends the rest and refuses new subscriptions.
func TestCloseTokenOwnerAndHub(t *testing.T) {
	h, _ := newHub(t)
	byToken, _ := h.SubscribeWith("me", "tok-1", "")
	other, _ := h.SubscribeWith("me", "tok-2", "")
	bobs, _ := h.SubscribeWith("bob", "tok-3", "")
	h.CloseToken("tok-1")
	if _, ok := <-byToken.C(); ok {
		t.Fatal("the revoked token's stream is open")
	}
	h.SetOwner("a-me", "bob", "builder") // handed over to bob
	h.Publish(t.Context(), events.KindPresenceChanged, "a-me", "me", changed("online"))
	if ev := next(t, bobs); ev.AgentID != "a-me" {
		t.Fatalf("bob got %+v, want the handed-over agent's event", ev)
	}
	h.CloseOwner("bob")
	if _, ok := <-bobs.C(); ok {
		t.Fatal("the deactivated person's stream is open")
	}
	h.Close()
	if _, ok := <-other.C(); ok {
		t.Fatal("a stream is open after Close")
	}
	if _, err := h.Subscribe("me", ""); !errors.Is(err, events.ErrClosed) {
		t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
	}
}

// TestTodosChangedCoalesced: a burst of 1 000 todo changes of one agent
// publishes agent.todos_changed once at once and once more at the end of
// the window (the last change is never lost); changes in the next window
// make one more event at its end; only the owner receives them.
func TestTodosChangedCoalesced(t *testing.T) {
	b := bus.NewLocal()
	t.Cleanup(func() { _ = b.Close() })
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	h := events.New(events.Options{Bus: b, Clock: clock}) // SetOwner fills the owner cache: no store read
	h.SetOwner("a-me", "me", "builder")
	mine := subscribe(t, h, "me", "")
	ctx := t.Context()
	check := func(ev events.Event) {
		t.Helper()
		var d events.TodosChangedData
		if err := json.Unmarshal(ev.Data, &d); err != nil || ev.Kind != events.KindTodosChanged || ev.AgentID != "a-me" || d.Agent != "builder" || ev.ID == "" {
			t.Fatalf("event = %+v %s, want agent.todos_changed of a-me (builder)", ev, ev.Data)
		}
	}

	for range 1000 {
		h.TodosChanged(ctx, "a-me")
	}
	first := next(t, mine)
	check(first)
	clock.Advance(events.TodosWindow) // the window ends with changes waiting
	check(next(t, mine))
	if err := clock.BlockUntilContext(ctx, 1); err != nil { // the next window is open
		t.Fatal(err)
	}
	for range 3 {
		h.TodosChanged(ctx, "a-me")
	}
	clock.Advance(events.TodosWindow)
	check(next(t, mine))
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(events.TodosWindow) // a window without changes ends and publishes nothing
	h.Publish(ctx, events.KindPresenceChanged, "a-me", "me", changed("online"))
	if ev := next(t, mine); ev.Kind != events.KindPresenceChanged {
		t.Fatalf("after the quiet window got %+v %s, want the presence_changed marker", ev, ev.Data)
	}

	again := subscribe(t, h, "me", first.ID)
	var kinds []string
	for _, ev := range again.Backlog {
		kinds = append(kinds, ev.Kind)
	}
	want := []string{events.KindTodosChanged, events.KindTodosChanged, events.KindPresenceChanged}
	if len(kinds) != len(want) || kinds[0] != want[0] || kinds[1] != want[1] || kinds[2] != want[2] {
		t.Errorf("events after the first = %v, want %v (1 003 changes make 3 events)", kinds, want)
	}
	if bob := subscribe(t, h, "bob", first.ID); len(bob.Backlog) != 0 {
		t.Errorf("another person received %d of the agent's events", len(bob.Backlog))
	}
}

// TestOwnerFollowsStoreWithoutSignal: a hub that missed a hand-over's bus
// signal (no SetOwner) routes the agent's events to the owner in the store
// once its cached owner is OwnerTTL old: before that the cached owner
// still gets them, from then on only the new owner does — for events with
// an explicit (stale) owner, presence transitions and todos_changed alike
// (design: Operator event stream).
func TestOwnerFollowsStoreWithoutSignal(t *testing.T) {
	ctx := t.Context()
	st := testkit.OpenSQLite(t)
	start := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	a := domain.Agent{ID: "0b6f7a44-0000-4000-8000-0000000000a1", Handle: "builder", OwnerID: "old", Name: "Builder", Active: true,
		Scope: domain.Scope{Queues: []string{"q1"}, Verbs: domain.ScopeVerbs}, BillingMode: "subscription",
		BillingModes: []string{"subscription"}, ToolClass: "claude-code", CreatedAt: start, UpdatedAt: start,
		SelfClockInCap: domain.ClockInCap(8 * time.Hour)}
	if err := st.CreateAgent(ctx, store.CreateAgentParams{Agent: a, CredentialID: "0b6f7a44-0000-4000-8000-0000000000c1", CredentialHash: "h",
		Audit: domain.AuditRecord{Actor: "operator:old", Action: "agent.vend", AgentID: a.ID}}); err != nil {
		t.Fatal(err)
	}
	b := bus.NewLocal()
	t.Cleanup(func() { _ = b.Close() })
	clock := clockwork.NewFakeClockAt(start)
	h := events.New(events.Options{Store: st, Bus: b, Clock: clock})
	old, neu := subscribe(t, h, "old", ""), subscribe(t, h, "new", "")

	h.Publish(ctx, events.KindPresenceChanged, a.ID, "old", changed("online")) // the owner is read and cached
	if ev := next(t, old); ev.AgentID != a.ID {
		t.Fatalf("old owner got %+v", ev)
	}
	to := "new"
	if _, err := st.UpdateAgent(ctx, store.UpdateAgentParams{ID: a.ID, OwnerID: &to, Now: start,
		Audit: &domain.AuditRecord{Actor: "operator:admin", Action: "agent.hand_over", AgentID: a.ID}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(events.OwnerTTL - time.Millisecond) // the hand-over signal never came
	h.Publish(ctx, events.KindPresenceChanged, a.ID, "old", changed("offline"))
	if ev := next(t, old); ev.AgentID != a.ID {
		t.Fatalf("within OwnerTTL the cached owner got %+v", ev)
	}
	clock.Advance(time.Millisecond) // the cached owner is OwnerTTL old
	h.Publish(ctx, events.KindPresenceChanged, a.ID, "old", changed("online"))
	h.PresenceTransition(ctx, a.ID, "out", "operator")
	for _, kind := range []string{events.KindPresenceChanged, events.KindPresenceTransition} {
		if ev := next(t, neu); ev.Kind != kind || ev.AgentID != a.ID {
			t.Fatalf("new owner got %+v, want %s of the agent", ev, kind)
		}
	}
	clock.Advance(events.OwnerTTL) // and again after the next re-read
	h.TodosChanged(ctx, a.ID)
	if ev := next(t, neu); ev.Kind != events.KindTodosChanged {
		t.Fatalf("new owner got %+v, want agent.todos_changed", ev)
	}
	h.Publish(ctx, events.KindPresenceChanged, "a-fence", "old", changed("online")) // a fence: everything before it was delivered
	if ev := next(t, old); ev.AgentID != "a-fence" {
		t.Fatalf("after OwnerTTL the old owner got %+v %s", ev, ev.Data)
	}
}
