package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

var todoTests = []contractTest{
	{"Todos/CreateGet", testTodoCreateGet},
	{"Todos/Idempotency", testTodoIdempotency},
	{"Todos/IdempotencyRace", testTodoIdempotencyRace},
	{"Todos/List", testListTodos},
	{"Todos/ListAfter", testListTodosAfter},
	{"Todos/Claim", testClaim},
	{"Todos/ClaimRace", testClaimRace},
	{"Todos/ClaimNextRace", testClaimNextRace},
	{"Todos/ClaimNext", testClaimNext},
	{"Todos/ClaimNextRetryAt", testClaimNextRetryAt},
	{"Todos/Renew", testRenew},
	{"Todos/Complete", testComplete},
	{"Todos/FailRetriesThenDeadLetter", testFailRetriesThenDeadLetter},
	{"Todos/FailGuards", testFailGuards},
	{"Todos/Reaper", testReaper},
	{"Todos/ReaperLimit", testReaperLimit},
	{"Todos/MarkRung", testMarkRung},
	{"Todos/MarkRungBatch", testMarkRungBatch},
}

func testTodoCreateGet(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	td := newTodo(a.ID, "build", at(987654321*time.Nanosecond))
	td.Payload = json.RawMessage(`{"b": 2,  "a": [1, "é"]}`) // bytes must round-trip exactly
	td.Kind, td.Source, td.IdempotencyKey = "review", "github", "key-1"
	td.PushEligible, td.CreatedBy = false, "agent:"+a.ID

	got, created, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: td})
	if err != nil || !created {
		t.Fatalf("CreateTodo = created %v, %v", created, err)
	}
	diff(t, "created todo", wantTodo(td), got)
	sameJSON(t, "payload", got.Payload, td.Payload)
	diff(t, "stored todo", wantTodo(td), getTodo(t, s, td.ID))

	bare := newTodo(a.ID, "build", at(time.Second))
	got = push(t, s, bare)
	if got.Payload != nil || got.Result != nil {
		t.Errorf("todo without payload reads back payload %q result %q, want none", got.Payload, got.Result)
	}

	_, err = s.GetTodo(ctx, uuid.NewString())
	wantErr(t, "GetTodo(unknown)", err, domain.ErrNotFound)
	dup := newTodo(a.ID, "build", at(time.Minute))
	dup.ID = td.ID
	_, _, err = s.CreateTodo(ctx, store.CreateTodoParams{Todo: dup})
	wantErr(t, "CreateTodo(taken id)", err, domain.ErrConflict)
	_, _, err = s.CreateTodo(ctx, store.CreateTodoParams{Todo: newTodo(uuid.NewString(), "build", Base)})
	wantErr(t, "CreateTodo(unknown agent)", err, domain.ErrNotFound)
}

func keyed(agentID, key string, created time.Time) domain.Todo {
	td := newTodo(agentID, "build", created)
	td.IdempotencyKey = key
	return td
}

func testTodoIdempotency(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	b := vend(t, s, newAgent("bravo", ownerID, "build"))
	create := func(td domain.Todo) (domain.Todo, bool) {
		t.Helper()
		got, created, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: td})
		must(t, "CreateTodo", err)
		return got, created
	}
	expectExisting := func(what string, td domain.Todo, existingID string) {
		t.Helper()
		got, created := create(td)
		if created || got.ID != existingID {
			t.Fatalf("%s: CreateTodo = (%s, created %v), want existing %s", what, got.ID, created, existingID)
		}
	}
	expectNew := func(what string, td domain.Todo) {
		t.Helper()
		got, created := create(td)
		if !created || got.ID != td.ID {
			t.Fatalf("%s: CreateTodo = (%s, created %v), want new %s", what, got.ID, created, td.ID)
		}
	}

	first := push(t, s, keyed(a.ID, "k", Base))
	again := keyed(a.ID, "k", at(time.Second))
	again.Title = "different title"
	expectExisting("same key while pending", again, first.ID)
	got, _ := create(keyed(a.ID, "k", at(time.Second)))
	diff(t, "existing todo returned", wantTodo(first), got)
	expectNew("same key, other agent", keyed(b.ID, "k", at(time.Second)))
	expectNew("other key", keyed(a.ID, "k2", at(time.Second)))
	expectNew("no key", newTodo(a.ID, "build", at(time.Second)))
	expectNew("no key twice", newTodo(a.ID, "build", at(time.Second)))

	claim(t, s, a, first.ID, time.Minute, at(time.Minute))
	expectExisting("same key while claimed", keyed(a.ID, "k", at(time.Minute)), first.ID)
	failed, err := s.FailTodo(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: first.ID, Reason: "x", Now: at(90 * time.Second)})
	must(t, "FailTodo", err)
	if failed.RetryAt == nil {
		t.Fatal("first failure dead-lettered the todo")
	}
	expectExisting("same key while waiting for a retry", keyed(a.ID, "k", at(2*time.Minute)), first.ID)
	claim(t, s, a, first.ID, time.Minute, *failed.RetryAt)
	_, err = s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: first.ID, Now: *failed.RetryAt})
	must(t, "CompleteTodo", err)
	expectNew("same key after done", keyed(a.ID, "k", at(time.Hour)))

	dead := keyed(a.ID, "dl", Base)
	dead.MaxAttempts = 1
	push(t, s, dead)
	claim(t, s, a, dead.ID, time.Minute, Base)
	_, err = s.FailTodo(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: dead.ID, Reason: "x", Now: at(time.Second)})
	must(t, "FailTodo(dead letter)", err)
	expectNew("same key after dead letter", keyed(a.ID, "dl", at(time.Hour)))
}

func testTodoIdempotencyRace(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	for round := range 10 {
		key := fmt.Sprintf("race-%d", round)
		ids := make([]string, 4)
		created := make([]bool, 4)
		errs := parallel(4, func(i int) error {
			got, c, err := s.CreateTodo(ctxOf(t), store.CreateTodoParams{Todo: keyed(a.ID, key, Base)})
			ids[i], created[i] = got.ID, c
			return err
		})
		n := 0
		for i, err := range errs {
			must(t, "CreateTodo", err)
			if created[i] {
				n++
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: concurrent creates with one key returned different todos %v", round, ids)
			}
		}
		if n != 1 {
			t.Fatalf("round %d: %d concurrent creates with one key created a todo, want 1", round, n)
		}
	}
}

func testListTodos(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "q1", "q2"))
	b := vend(t, s, newAgent("bravo", ownerID, "q1"))
	// Created out of order: the list is oldest first.
	t3 := push(t, s, newTodo(a.ID, "q1", at(3*time.Second)))
	t1 := push(t, s, newTodo(a.ID, "q1", at(1*time.Second)))
	t2 := push(t, s, newTodo(a.ID, "q2", at(2*time.Second)))
	tb := push(t, s, newTodo(b.ID, "q1", at(0)))
	t1 = claim(t, s, a, t1.ID, time.Minute, at(time.Minute))

	ids := func(p store.ListTodosParams) []string {
		t.Helper()
		got, err := s.ListTodos(ctx, p)
		must(t, "ListTodos", err)
		return idsOf(got, func(td domain.Todo) string { return td.ID })
	}
	diff(t, "agent a", []string{t1.ID, t2.ID, t3.ID}, ids(store.ListTodosParams{AgentID: a.ID}))
	diff(t, "every agent", []string{tb.ID, t1.ID, t2.ID, t3.ID}, ids(store.ListTodosParams{}))
	diff(t, "queue q1", []string{t1.ID, t3.ID}, ids(store.ListTodosParams{AgentID: a.ID, Queues: []string{"q1"}}))
	diff(t, "queues q1,q2", []string{t1.ID, t2.ID, t3.ID}, ids(store.ListTodosParams{AgentID: a.ID, Queues: []string{"q2", "q1"}}))
	diff(t, "unknown queue", []string{}, ids(store.ListTodosParams{AgentID: a.ID, Queues: []string{"nope"}}))
	diff(t, "pending", []string{t2.ID, t3.ID}, ids(store.ListTodosParams{AgentID: a.ID, State: domain.TodoPending}))
	diff(t, "claimed", []string{t1.ID}, ids(store.ListTodosParams{AgentID: a.ID, State: domain.TodoClaimed}))
	diff(t, "limit 2", []string{t1.ID, t2.ID}, ids(store.ListTodosParams{AgentID: a.ID, Limit: 2}))
	diff(t, "all filters", []string{t3.ID}, ids(store.ListTodosParams{AgentID: a.ID, Queues: []string{"q1"}, State: domain.TodoPending, Limit: 5}))

	got, err := s.ListTodos(ctx, store.ListTodosParams{AgentID: a.ID, State: domain.TodoClaimed})
	must(t, "ListTodos", err)
	diff(t, "listed todo", []domain.Todo{t1}, got)
}

// AfterID pages in (created_at, id) order, ties on created_at broken by id.
func testListTodosAfter(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "q1"))
	var want []string
	for i := range 5 {
		td := push(t, s, newTodo(a.ID, "q1", at(time.Duration(i/2)*time.Second))) // pairs share created_at
		want = append(want, td.ID)
	}
	got, err := s.ListTodos(ctx, store.ListTodosParams{AgentID: a.ID})
	must(t, "ListTodos", err)
	want = want[:0]
	for _, td := range got {
		want = append(want, td.ID)
	}
	var paged []string
	after := ""
	for range 10 {
		page, err := s.ListTodos(ctx, store.ListTodosParams{AgentID: a.ID, Limit: 2, AfterID: after})
		must(t, "ListTodos after", err)
		if len(page) == 0 {
			break
		}
		for _, td := range page {
			paged = append(paged, td.ID)
		}
		after = page[len(page)-1].ID
	}
	diff(t, "paged in twos", want, paged)
}

func testClaim(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "q1", "q2"))
	b := vend(t, s, newAgent("bravo", ownerID, "q1"))
	td := push(t, s, newTodo(a.ID, "q1", Base))

	now := at(time.Minute + 1500*time.Nanosecond)
	got := claim(t, s, a, td.ID, 90*time.Second, now)
	want := wantTodo(td)
	want.State, want.Attempt = domain.TodoClaimed, 1
	want.LeaseExpiresAt, want.ClaimedAt, want.UpdatedAt = ptr(micro(now.Add(90*time.Second))), ptr(micro(now)), micro(now)
	diff(t, "claimed todo", want, got)
	diff(t, "stored claimed todo", want, getTodo(t, s, td.ID))

	claimP := func(agent vended, todoID string, queues []string) error {
		_, err := s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: agent.ID, TodoID: todoID, Queues: queues,
			Lease: time.Minute, Now: at(2 * time.Minute)})
		return err
	}
	wantErr(t, "claim again", claimP(a, td.ID, a.Scope.Queues), domain.ErrConflict)
	wantErr(t, "claim by another agent", claimP(b, td.ID, b.Scope.Queues), domain.ErrNotFound)
	wantErr(t, "claim unknown id", claimP(a, uuid.NewString(), a.Scope.Queues), domain.ErrNotFound)

	other := push(t, s, newTodo(a.ID, "q2", Base))
	wantErr(t, "claim outside Queues", claimP(a, other.ID, []string{"q1"}), domain.ErrNotFound)
	wantErr(t, "claim with no Queues", claimP(a, other.ID, nil), domain.ErrNotFound)
	if st := getTodo(t, s, other.ID).State; st != domain.TodoPending {
		t.Errorf("refused claim changed the state to %s", st)
	}
	must(t, "claim in Queues", claimP(a, other.ID, []string{"q2"}))

	_, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: td.ID, Now: at(2 * time.Minute)})
	must(t, "CompleteTodo", err)
	wantErr(t, "claim a done todo", claimP(a, td.ID, a.Scope.Queues), domain.ErrConflict)
}

func testClaimRace(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	for round := range 20 {
		td := push(t, s, newTodo(a.ID, "build", at(time.Duration(round)*time.Second)))
		errs := parallel(2, func(int) error {
			_, err := s.ClaimTodo(ctxOf(t), store.ClaimTodoParams{AgentID: a.ID, TodoID: td.ID,
				Queues: a.Scope.Queues, Lease: time.Minute, Now: at(time.Hour)})
			return err
		})
		wins, conflicts, err := Outcome(errs)
		if err != nil {
			t.Fatalf("round %d: unexpected claim error %v", round, err)
		}
		if wins != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d claims won and %d got conflict, want 1 and 1", round, wins, conflicts)
		}
		if got := getTodo(t, s, td.ID); got.Attempt != 1 {
			t.Fatalf("round %d: attempt = %d after one winning claim, want 1", round, got.Attempt)
		}
	}
}

func testClaimNextRace(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	const todos, workers = 30, 4
	for i := range todos {
		push(t, s, newTodo(a.ID, "build", at(time.Duration(i)*time.Second)))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	errs := parallel(workers, func(int) error {
		for {
			td, err := s.ClaimNext(ctxOf(t), store.ClaimNextParams{AgentID: a.ID, Queues: a.Scope.Queues,
				Lease: time.Minute, Now: at(time.Hour)})
			if errors.Is(err, domain.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			mu.Lock()
			seen[td.ID]++
			mu.Unlock()
		}
	})
	for _, err := range errs {
		must(t, "ClaimNext", err)
	}
	if len(seen) != todos {
		t.Fatalf("%d workers claimed %d distinct todos, want %d", workers, len(seen), todos)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("todo %s claimed %d times", id, n)
		}
	}
}

func claimNext(s store.Store, t *testing.T, agent vended, queues []string, now time.Time) (domain.Todo, error) {
	return s.ClaimNext(t.Context(), store.ClaimNextParams{AgentID: agent.ID, Queues: queues, Lease: time.Minute, Now: now})
}

func testClaimNext(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("alpha", ownerID, "q1", "q2"))
	b := vend(t, s, newAgent("bravo", ownerID, "q1"))
	push(t, s, newTodo(b.ID, "q1", at(0))) // another agent's, oldest of all
	t1 := push(t, s, newTodo(a.ID, "q1", at(2*time.Second)))
	t2 := push(t, s, newTodo(a.ID, "q2", at(1*time.Second)))
	t3 := push(t, s, newTodo(a.ID, "q1", at(3*time.Second)))

	now := at(time.Minute)
	_, err := claimNext(s, t, a, nil, now)
	wantErr(t, "ClaimNext(no queues)", err, domain.ErrNotFound)
	got, err := claimNext(s, t, a, []string{"q1"}, now)
	must(t, "ClaimNext(q1)", err)
	if got.ID != t1.ID {
		t.Fatalf("ClaimNext(q1) = %s, want the oldest in q1 %s", got.ID, t1.ID)
	}
	want := wantTodo(t1)
	want.State, want.Attempt = domain.TodoClaimed, 1
	want.LeaseExpiresAt, want.ClaimedAt, want.UpdatedAt = ptr(now.Add(time.Minute)), ptr(now), now
	diff(t, "claimed next", want, got)

	for _, wantID := range []string{t2.ID, t3.ID} {
		got, err := claimNext(s, t, a, []string{"q1", "q2"}, now)
		must(t, "ClaimNext(q1,q2)", err)
		if got.ID != wantID {
			t.Fatalf("ClaimNext(q1,q2) = %s, want %s", got.ID, wantID)
		}
	}
	_, err = claimNext(s, t, a, []string{"q1", "q2"}, now)
	wantErr(t, "ClaimNext(drained)", err, domain.ErrNotFound)
}

func testClaimNextRetryAt(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "q1"))
	td := push(t, s, newTodo(a.ID, "q1", Base))
	claim(t, s, a, td.ID, time.Minute, at(time.Second))
	failed, err := s.FailTodo(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: td.ID, Reason: "flaky", Now: at(10 * time.Second)})
	must(t, "FailTodo", err)
	retryAt := at(40 * time.Second)
	sameTime(t, "retry_at", failed.RetryAt, retryAt)

	early := retryAt.Add(-time.Microsecond)
	_, err = claimNext(s, t, a, a.Scope.Queues, early)
	wantErr(t, "ClaimNext before retry_at", err, domain.ErrNotFound)
	_, err = s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: a.ID, TodoID: td.ID, Queues: a.Scope.Queues, Lease: time.Minute, Now: early})
	wantErr(t, "ClaimTodo before retry_at", err, domain.ErrConflict)

	got, err := claimNext(s, t, a, a.Scope.Queues, retryAt)
	must(t, "ClaimNext at retry_at", err)
	if got.ID != td.ID || got.Attempt != 2 || got.State != domain.TodoClaimed || got.LastError != "flaky" {
		t.Fatalf("retried claim = %s attempt %d state %s last_error %q; want %s attempt 2 claimed, last_error kept",
			got.ID, got.Attempt, got.State, got.LastError, td.ID)
	}
	isNil(t, "retry_at after the retry's claim", got.RetryAt)
}

func testRenew(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	b := vend(t, s, newAgent("bravo", ownerID, "build"))
	td := push(t, s, newTodo(a.ID, "build", Base))
	pending := push(t, s, newTodo(a.ID, "build", Base))
	claim(t, s, a, td.ID, time.Minute, Base)

	renew := func(agent vended, id string, now time.Time) (domain.Todo, error) {
		return s.RenewLease(ctx, store.RenewLeaseParams{AgentID: agent.ID, TodoID: id, Lease: 2 * time.Minute, Now: now})
	}
	got, err := renew(a, td.ID, at(30*time.Second))
	must(t, "RenewLease", err)
	sameTime(t, "renewed lease", got.LeaseExpiresAt, at(150*time.Second))
	sameTime(t, "updated_at", &got.UpdatedAt, at(30*time.Second))
	if got.Attempt != 1 || got.State != domain.TodoClaimed {
		t.Errorf("renew changed attempt/state to %d/%s", got.Attempt, got.State)
	}

	_, err = renew(b, td.ID, at(time.Minute))
	wantErr(t, "renew by another agent", err, domain.ErrNotFound)
	_, err = renew(a, uuid.NewString(), at(time.Minute))
	wantErr(t, "renew unknown", err, domain.ErrNotFound)
	_, err = renew(a, pending.ID, at(time.Minute))
	wantErr(t, "renew a pending todo", err, domain.ErrConflict)
	_, err = renew(a, td.ID, at(150*time.Second)) // the instant the lease ends
	wantErr(t, "renew an expired lease", err, domain.ErrConflict)
	sameTime(t, "lease after refused renew", getTodo(t, s, td.ID).LeaseExpiresAt, at(150*time.Second))
}

func testComplete(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	b := vend(t, s, newAgent("bravo", ownerID, "build"))
	complete := func(agent vended, id string, result json.RawMessage, now time.Time) (domain.Todo, error) {
		return s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: agent.ID, TodoID: id, Result: result, Now: now})
	}

	td := push(t, s, newTodo(a.ID, "build", Base))
	claimed := claim(t, s, a, td.ID, time.Minute, Base)
	_, err := complete(b, td.ID, nil, at(time.Second))
	wantErr(t, "complete by another agent", err, domain.ErrNotFound)
	result := json.RawMessage(`{"ok": true, "n": [1,2]}`)
	got, err := complete(a, td.ID, result, at(10*time.Second))
	must(t, "CompleteTodo", err)
	want := claimed
	want.State, want.Result, want.LeaseExpiresAt, want.NextRingAt = domain.TodoDone, result, nil, nil
	want.UpdatedAt, want.FinishedAt = at(10*time.Second), ptr(at(10*time.Second))
	diff(t, "completed todo", want, got)
	if claimed.NextRingAt == nil {
		t.Error("claimed todo has no next_ring_at: the check of a done one proves nothing")
	}
	isNil(t, "next_ring_at of a done todo (design: Ring budget)", getTodo(t, s, td.ID).NextRingAt)
	sameJSON(t, "result", getTodo(t, s, td.ID).Result, result)
	_, err = complete(a, td.ID, nil, at(11*time.Second))
	wantErr(t, "complete twice", err, domain.ErrConflict)

	late := push(t, s, newTodo(a.ID, "build", Base))
	claim(t, s, a, late.ID, time.Minute, Base)
	_, err = complete(a, late.ID, nil, at(time.Minute)) // the instant the lease ends
	wantErr(t, "complete after lease expiry", err, domain.ErrConflict)
	if st := getTodo(t, s, late.ID).State; st != domain.TodoClaimed {
		t.Errorf("state after refused complete = %s, want claimed", st)
	}

	pending := push(t, s, newTodo(a.ID, "build", Base))
	_, err = complete(a, pending.ID, nil, at(time.Second))
	wantErr(t, "complete a pending todo", err, domain.ErrConflict)
	_, err = complete(a, uuid.NewString(), nil, at(time.Second))
	wantErr(t, "complete unknown", err, domain.ErrNotFound)

	noResult := push(t, s, newTodo(a.ID, "build", Base))
	claim(t, s, a, noResult.ID, time.Minute, Base)
	got, err = complete(a, noResult.ID, nil, at(time.Second))
	must(t, "CompleteTodo(no result)", err)
	if got.Result != nil {
		t.Errorf("result = %q, want none", got.Result)
	}
}

func testFailRetriesThenDeadLetter(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	td := newTodo(a.ID, "build", Base)
	td.MaxAttempts = 7
	push(t, s, td)

	// 30 s doubling, capped at 15 min (design: Retries and dead letter).
	backoff := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute}
	now := at(time.Minute)
	for attempt := 1; attempt <= td.MaxAttempts; attempt++ {
		claimed := claim(t, s, a, td.ID, time.Minute, now)
		if claimed.Attempt != attempt {
			t.Fatalf("claim #%d: attempt = %d", attempt, claimed.Attempt)
		}
		failAt := now.Add(time.Second)
		reason := fmt.Sprintf("boom %d", attempt)
		got, err := s.FailTodo(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: td.ID, Reason: reason, Now: failAt})
		must(t, "FailTodo", err)
		if got.State != domain.TodoFailed || got.LastError != reason || got.Attempt != attempt {
			t.Fatalf("after failure #%d: state %s last_error %q attempt %d", attempt, got.State, got.LastError, got.Attempt)
		}
		isNil(t, "lease after fail", got.LeaseExpiresAt)
		sameTime(t, "updated_at after fail", &got.UpdatedAt, failAt)
		diff(t, "stored failed todo", got, getTodo(t, s, td.ID))
		wantRetry := domain.NextAfterFailure(attempt, td.MaxAttempts, failAt)
		if attempt == td.MaxAttempts {
			if wantRetry != nil {
				t.Fatal("domain.NextAfterFailure scheduled a retry after the last attempt")
			}
			isNil(t, "retry_at after the last attempt", got.RetryAt)
			if !got.DeadLettered() {
				t.Fatal("todo not dead-lettered after max_attempts")
			}
			sameTime(t, "finished_at of a dead letter", got.FinishedAt, failAt)
			isNil(t, "next_ring_at of a dead letter (design: Ring budget)", getTodo(t, s, td.ID).NextRingAt)
			break
		}
		if !wantRetry.Equal(failAt.Add(backoff[attempt-1])) {
			t.Fatalf("domain.NextAfterFailure(%d) = %v, want fail time + %v", attempt, wantRetry, backoff[attempt-1])
		}
		sameTime(t, fmt.Sprintf("retry_at after failure #%d", attempt), got.RetryAt, *wantRetry)
		isNil(t, "finished_at of a retrying todo", got.FinishedAt)
		_, err = s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: a.ID, TodoID: td.ID, Queues: a.Scope.Queues,
			Lease: time.Minute, Now: wantRetry.Add(-time.Second)})
		wantErr(t, "claim before retry_at", err, domain.ErrConflict)
		now = *wantRetry
	}

	_, err := s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: a.ID, TodoID: td.ID, Queues: a.Scope.Queues,
		Lease: time.Minute, Now: at(24 * time.Hour)})
	wantErr(t, "claim a dead letter", err, domain.ErrConflict)
	_, err = claimNext(s, t, a, a.Scope.Queues, at(24*time.Hour))
	wantErr(t, "ClaimNext with only a dead letter", err, domain.ErrNotFound)
}

func testFailGuards(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	b := vend(t, s, newAgent("bravo", ownerID, "build"))
	fail := func(agent vended, id string, now time.Time) error {
		_, err := s.FailTodo(ctx, store.FailTodoParams{AgentID: agent.ID, TodoID: id, Reason: "x", Now: now})
		return err
	}
	td := push(t, s, newTodo(a.ID, "build", Base))
	wantErr(t, "fail a pending todo", fail(a, td.ID, at(time.Second)), domain.ErrConflict)
	claim(t, s, a, td.ID, time.Minute, Base)
	wantErr(t, "fail by another agent", fail(b, td.ID, at(time.Second)), domain.ErrNotFound)
	wantErr(t, "fail unknown", fail(a, uuid.NewString(), at(time.Second)), domain.ErrNotFound)
	wantErr(t, "fail after lease expiry", fail(a, td.ID, at(time.Minute)), domain.ErrConflict)
	if got := getTodo(t, s, td.ID); got.State != domain.TodoClaimed || got.LastError != "" {
		t.Errorf("refused fail changed the todo: state %s last_error %q", got.State, got.LastError)
	}
}

func testReaper(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	expiring := push(t, s, newTodo(a.ID, "build", Base))
	long := push(t, s, newTodo(a.ID, "build", Base))
	last := newTodo(a.ID, "build", Base)
	last.MaxAttempts = 1
	push(t, s, last)
	idle := push(t, s, newTodo(a.ID, "build", Base))
	claim(t, s, a, expiring.ID, time.Minute, Base)
	claim(t, s, a, long.ID, 10*time.Minute, Base)
	claim(t, s, a, last.ID, 30*time.Second, Base)

	reap := func(now time.Time) []string {
		t.Helper()
		reaped, err := s.ReapExpiredLeases(ctx, store.ReapParams{Now: now, Limit: 100})
		must(t, "ReapExpiredLeases", err)
		ids := make([]string, 0, len(reaped))
		for _, r := range reaped {
			if r.AgentID != a.ID {
				t.Fatalf("reaped %s of agent %q, want %q", r.ID, r.AgentID, a.ID)
			}
			ids = append(ids, r.ID)
		}
		sort.Strings(ids)
		return ids
	}
	diff(t, "reaped before any expiry", []string{}, reap(at(29*time.Second)))
	want := []string{expiring.ID, last.ID}
	sort.Strings(want)
	diff(t, "reaped at expiry", want, reap(at(time.Minute)))

	got := getTodo(t, s, expiring.ID)
	if got.State != domain.TodoPending || got.Attempt != 1 || got.LastError != "lease expired" {
		t.Errorf("reaped todo: state %s attempt %d last_error %q; want pending, 1, lease expired", got.State, got.Attempt, got.LastError)
	}
	isNil(t, "lease of a reaped todo", got.LeaseExpiresAt)
	isNil(t, "retry_at of a reaped todo", got.RetryAt)
	sameTime(t, "updated_at of a reaped todo", &got.UpdatedAt, at(time.Minute))

	dead := getTodo(t, s, last.ID)
	if !dead.DeadLettered() || dead.LastError != "lease expired" {
		t.Errorf("reaped todo at max attempts: state %s retry_at %v last_error %q; want dead letter, lease expired",
			dead.State, dead.RetryAt, dead.LastError)
	}
	sameTime(t, "finished_at of a reaped dead letter", dead.FinishedAt, at(time.Minute))
	if st := getTodo(t, s, long.ID).State; st != domain.TodoClaimed {
		t.Errorf("unexpired claim reaped: state %s", st)
	}
	if got := getTodo(t, s, idle.ID); got.State != domain.TodoPending || got.LastError != "" {
		t.Errorf("pending todo touched by the reaper: %s %q", got.State, got.LastError)
	}
	diff(t, "reaped again", []string{}, reap(at(time.Minute)))

	_, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: expiring.ID, Now: at(time.Minute)})
	wantErr(t, "complete a reaped todo", err, domain.ErrConflict)
	again := claim(t, s, a, expiring.ID, time.Minute, at(2*time.Minute))
	if again.Attempt != 2 {
		t.Errorf("attempt after re-claiming a reaped todo = %d, want 2", again.Attempt)
	}
}

func testReaperLimit(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	for i := range 3 {
		td := push(t, s, newTodo(a.ID, "build", Base))
		claim(t, s, a, td.ID, time.Duration(i+1)*time.Second, Base)
	}
	ids, err := s.ReapExpiredLeases(ctx, store.ReapParams{Now: at(time.Hour), Limit: 2})
	must(t, "ReapExpiredLeases(limit 2)", err)
	if len(ids) != 2 {
		t.Fatalf("reaped %d with limit 2", len(ids))
	}
	ids, err = s.ReapExpiredLeases(ctx, store.ReapParams{Now: at(time.Hour), Limit: 2})
	must(t, "ReapExpiredLeases(rest)", err)
	if len(ids) != 1 {
		t.Fatalf("second pass reaped %d, want 1", len(ids))
	}
}

func testMarkRung(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	td := push(t, s, newTodo(a.ID, "build", Base))
	mark := func(id string, when time.Time) bool {
		t.Helper()
		ok, err := markOne(ctx, s, store.MarkRungParams{TodoID: id, At: when})
		must(t, "MarkRung", err)
		return ok
	}
	if !mark(td.ID, at(5*time.Minute)) || !mark(td.ID, at(25*time.Minute)) {
		t.Fatal("MarkRung on a pending todo reported no change")
	}
	got := getTodo(t, s, td.ID)
	if got.RingAttempts != 2 {
		t.Errorf("ring_attempts = %d, want 2", got.RingAttempts)
	}
	sameTime(t, "last_ringed_at", got.LastRingedAt, at(25*time.Minute))

	claim(t, s, a, td.ID, time.Minute, at(time.Hour))
	if mark(td.ID, at(time.Hour)) {
		t.Error("MarkRung changed a claimed todo")
	}
	got = getTodo(t, s, td.ID)
	if got.RingAttempts != 2 {
		t.Errorf("ring_attempts after ringing a claimed todo = %d, want 2", got.RingAttempts)
	}
	if mark(uuid.NewString(), at(time.Hour)) {
		t.Error("MarkRung reported a change for an unknown todo")
	}
}

// testMarkRungBatch: a batch of ring records is MarkRung of each in
// order, in one transaction (design: Ring budget): a todo named twice
// counts two rings, the later time last; a claimed or unknown todo is not
// changed and not counted; an empty batch changes nothing.
func testMarkRungBatch(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	first := push(t, s, newTodo(a.ID, "build", Base))
	second := push(t, s, newTodo(a.ID, "build", at(time.Second)))
	untouched := push(t, s, newTodo(a.ID, "build", at(2*time.Second)))
	held := push(t, s, newTodo(a.ID, "build", at(3*time.Second)))
	claim(t, s, a, held.ID, time.Hour, at(time.Minute))
	n, err := s.MarkRungBatch(ctx, nil)
	if err != nil || n != 0 {
		t.Fatalf("MarkRungBatch(none) = %d, %v; want 0, nil", n, err)
	}
	// Out of id order (twice, rung first and last, has the greater id), a
	// claimed and an unknown todo.
	twice, once := first, second
	if twice.ID < once.ID {
		twice, once = once, twice
	}
	marks := []store.MarkRungParams{
		{TodoID: twice.ID, At: at(5 * time.Minute)},
		{TodoID: once.ID, At: at(5 * time.Minute)},
		{TodoID: held.ID, At: at(5 * time.Minute)},
		{TodoID: uuid.NewString(), At: at(5 * time.Minute)},
		{TodoID: twice.ID, At: at(25 * time.Minute)},
	}
	n, err = s.MarkRungBatch(ctx, marks)
	must(t, "MarkRungBatch", err)
	if n != 3 {
		t.Errorf("MarkRungBatch changed %d, want 3 (two rings of one todo, one of another)", n)
	}
	for _, c := range []struct {
		what  string
		id    string
		rings int
		last  time.Time
	}{
		{"the todo rung twice", twice.ID, 2, at(25 * time.Minute)},
		{"the todo rung once", once.ID, 1, at(5 * time.Minute)},
	} {
		got := getTodo(t, s, c.id)
		next, _ := domain.NextRingAt(c.rings, c.last)
		if got.RingAttempts != c.rings {
			t.Errorf("%s: ring_attempts = %d, want %d", c.what, got.RingAttempts, c.rings)
		}
		sameTime(t, c.what+": last_ringed_at", got.LastRingedAt, c.last)
		sameTime(t, c.what+": next_ring_at", got.NextRingAt, next)
	}
	diff(t, "todo not in the batch", untouched, getTodo(t, s, untouched.ID))
	if got := getTodo(t, s, held.ID); got.RingAttempts != 0 || got.LastRingedAt != nil {
		t.Errorf("claimed todo: ring_attempts %d last_ringed_at %v, want unchanged", got.RingAttempts, got.LastRingedAt)
	}
}
