package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/events"
)

// TestTodoChangesPublishEvents: pushing, claiming, completing, failing and
// reaping a todo on one instance each reach the owner's event stream on
// another instance as agent.todos_changed of the agent (design: Operator
// event stream); another person's stream gets none of them.
func TestTodoChangesPublishEvents(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	b := bus.NewLocal()
	s1 := app.New(app.Options{Store: st, Bus: b, Clock: clock, InstanceID: "i1"})
	defer s1.Close()
	s2 := app.New(app.Options{Store: st, Bus: b, Clock: clock, InstanceID: "i2"})
	defer s2.Close()
	admin := bootstrapAdmin(t, s1)
	p := vendAgent(t, s1, admin, app.VendInput{Handle: "counted", Queues: []string{"q"}, Verbs: []string{"claim", "claim_next", "complete", "fail"}})
	a := p.Agent
	sub, err := s2.SubscribeEvents(admin.ID, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	other, err := s2.SubscribeEvents("someone-else", "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	// expect waits for the step's agent.todos_changed: at once when the
	// agent's coalescing window is closed, else at the window's end, so the
	// fake clock moves on by windows until it comes.
	expect := func(step string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case ev := <-sub.C():
				var d events.TodosChangedData
				if err := json.Unmarshal(ev.Data, &d); err != nil || ev.Kind != events.KindTodosChanged || ev.AgentID != a.ID || d.Agent != "counted" {
					t.Fatalf("%s: event %+v %s, want agent.todos_changed of counted", step, ev, ev.Data)
				}
				return
			case <-time.After(50 * time.Millisecond):
				clock.Advance(events.TodosWindow)
			case <-deadline:
				t.Fatalf("%s: no agent.todos_changed within 10 s", step)
			}
		}
	}
	push := func(title string) {
		t.Helper()
		if _, _, err := s1.PushTodo(ctx, admin, a.ID, app.PushInput{Queue: "q", Title: title}); err != nil {
			t.Fatal(err)
		}
		expect("push " + title)
	}

	push("first")
	td, err := s1.ClaimNext(ctx, a, "q", 0)
	if err != nil {
		t.Fatal(err)
	}
	expect("claim_next")
	if _, err := s1.Complete(ctx, a, td.ID, nil); err != nil {
		t.Fatal(err)
	}
	expect("complete")
	push("second")
	all, err := s1.AgentListTodos(ctx, a, app.TodoFilter{State: "pending"})
	if err != nil || len(all) != 1 {
		t.Fatalf("pending todos = %d, %v; want 1", len(all), err)
	}
	if _, err := s1.Claim(ctx, a, all[0].ID, 60); err != nil {
		t.Fatal(err)
	}
	expect("claim")
	if _, err := s1.Fail(ctx, a, all[0].ID, "flaky"); err != nil {
		t.Fatal(err)
	}
	expect("fail")
	push("third")
	held, err := s1.ClaimNext(ctx, a, "q", 1)
	if err != nil {
		t.Fatal(err)
	}
	expect("claim_next with a 1 s lease")
	clock.Advance(2 * time.Second)
	if n, err := s1.ReapOnce(ctx); err != nil || n != 1 {
		t.Fatalf("ReapOnce = %d, %v; want 1 (todo %s)", n, err, held.ID)
	}
	expect("reap")
	push("fourth")
	batch, err := s1.ClaimNextN(ctx, a, app.NextClaim{Queue: "q", N: 5})
	if err != nil || len(batch) != 2 { // fourth and the reaped third
		t.Fatalf("ClaimNextN = %d todos, %v; want 2", len(batch), err)
	}
	expect("claim_next with n")
	if _, _, err := s1.CompleteAndClaim(ctx, a, batch[0].ID, nil, app.NextClaim{}); err != nil {
		t.Fatal(err)
	}
	expect("complete with next")
	select {
	case ev := <-other.C():
		t.Errorf("another person received %+v", ev)
	default:
	}
}
