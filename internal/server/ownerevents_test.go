package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus/pgbus"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/testkit"
)

// TestHandOverFollowedWithoutSignal: a hand-over whose bus signal one
// instance missed (its LISTEN connection terminated with
// pg_terminate_backend and kept down while the hand-over is made through
// the other instance) still moves the agent's events to the new owner
// (design: Operator event stream). Instances A and B share a fresh
// database; B has the agent's owner cached from an event it published
// before. OwnerTTL after the hand-over, the next agent.todos_changed B
// publishes reaches the new owner's GET /v1/events on both instances, and
// the old owner's streams on both receive nothing of the agent up to a
// fence event (every instance receives the bus's events in one order).
func TestHandOverFollowedWithoutSignal(t *testing.T) {
	shared := pgtest.AdminURL(t)
	dbURL := pgtest.WithDatabase(t, shared, pgtest.CreateDatabase(t, shared))
	u, _ := url.Parse(dbURL)
	dbName := strings.TrimPrefix(u.Path, "/")
	a := startInstance(t, dbURL)
	b := startInstance(t, dbURL)
	bbus := b.srv.Bus.(*pgbus.Bus)
	ctx := context.Background()

	nia, err := a.srv.Service.CreatePerson(ctx, a.admin, app.PersonInput{Name: "nia", Role: "member"})
	if err != nil {
		t.Fatal(err)
	}
	vend(t, a, "ada")
	vend(t, a, "fen") // the old owner's other agent: its event is the fence
	oldA, oldB := testkit.Subscribe(t, "A", a.base, adminToken), testkit.Subscribe(t, "B", b.base, adminToken)
	newA, newB := testkit.Subscribe(t, "A", a.base, nia.Token.Token), testkit.Subscribe(t, "B", b.base, nia.Token.Token)
	todos := func(handle string) func(testkit.Event) bool {
		return func(ev testkit.Event) bool { return ev.Kind == events.KindTodosChanged && ev.Data.Agent == handle }
	}
	within := func(name string, s *testkit.Events, from int, handle string) testkit.Event {
		t.Helper()
		ev, ok := s.WithinFrom(from, wait, todos(handle))
		if !ok {
			t.Fatalf("%s: no agent.todos_changed of %s within %v", name, handle, wait)
		}
		return ev
	}

	// B publishes an event of the agent: B's hub holds its owner (the admin).
	push(t, b, "ada", "before the hand-over")
	within("old owner on A", oldA, 0, "ada")
	within("old owner on B", oldB, 0, "ada")

	// The hand-over through A while B's listener is down: B misses its signal.
	pgtest.Exec(t, shared, "ALTER DATABASE "+dbName+" ALLOW_CONNECTIONS false")
	reopened := false
	reopen := func() {
		if !reopened {
			reopened = true
			pgtest.Exec(t, shared, "ALTER DATABASE "+dbName+" ALLOW_CONNECTIONS true")
		}
	}
	defer reopen()
	pid := bbus.ListenerPID()
	if pid == 0 {
		t.Fatal("B has no listener")
	}
	pgtest.Exec(t, shared, "SELECT pg_terminate_backend($1)", int32(pid))
	eventually(t, "B notices its listener is gone", func() bool { return bbus.Listening() != nil })
	if code, err := testkit.REST(a.base, adminToken, http.MethodPatch, "/v1/agents/ada", map[string]any{"owner": nia.Person.ID}, nil); code != http.StatusOK {
		t.Fatalf("hand-over through A: %d %v", code, err)
	}
	handedAt := time.Now()
	reopen()
	eventually(t, "B's listener is back", func() bool { return bbus.Listening() == nil })

	// The bound: an event written OwnerTTL after the hand-over follows it.
	time.Sleep(time.Until(handedAt.Add(events.OwnerTTL)))
	fromOldA, fromOldB, fromNewA, fromNewB := oldA.Len(), oldB.Len(), newA.Len(), newB.Len()
	if _, _, err := b.srv.Service.PushTodo(ctx, nia.Person, "ada", app.PushInput{Queue: "q1", Title: "after the hand-over"}); err != nil {
		t.Fatal(err)
	}
	within("new owner on B", newB, fromNewB, "ada")
	ev := within("new owner on A", newA, fromNewA, "ada")
	t.Logf("new owner read the agent's event %v after the hand-over (OwnerTTL %v; a figure, not asserted)", ev.Read.Sub(handedAt).Round(time.Millisecond), events.OwnerTTL)

	push(t, b, "fen", "fence")
	within("old owner on A (fence)", oldA, fromOldA, "fen")
	within("old owner on B (fence)", oldB, fromOldB, "fen")
	for name, s := range map[string]*testkit.Events{"A": oldA, "B": oldB} {
		from := map[string]int{"A": fromOldA, "B": fromOldB}[name]
		if ev, found := s.WithinFrom(from, 0, func(ev testkit.Event) bool { return ev.Data.Agent == "ada" }); found {
			t.Errorf("the old owner's stream on %s received %s of the handed-over agent", name, ev.Kind)
		}
	}
	if n := newA.Count(todos("fen")) + newB.Count(todos("fen")); n != 0 {
		t.Errorf("the new owner received %d events of the old owner's other agent", n)
	}
}
