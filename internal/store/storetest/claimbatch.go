package storetest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The batched claims (design: Claiming in batches) and complete or fail
// with the next claim (design: Complete and claim the next).
var claimBatchTests = []contractTest{
	{"ClaimBatch/OldestFirstWithPools", testClaimNextNOrder},
	{"ClaimBatch/Bounds", testClaimNextNBounds},
	{"ClaimBatch/Race", testClaimNextNRace},
	{"ClaimBatch/CompleteAndClaim", testCompleteAndClaim},
	{"ClaimBatch/CompleteAndClaimRefused", testCompleteAndClaimRefused},
	{"ClaimBatch/FailAndClaim", testFailAndClaim},
	{"ClaimBatch/CompleteAndClaimRace", testCompleteAndClaimRace},
}

// idsInOrder is the ids of ts in their order.
func idsInOrder(ts []domain.Todo) []string {
	ids := make([]string, 0, len(ts))
	for _, td := range ts {
		ids = append(ids, td.ID)
	}
	return ids
}

func claimN(t *testing.T, s store.Store, agentID string, queues []string, n int, now time.Time) []domain.Todo {
	t.Helper()
	ts, err := s.ClaimNextN(t.Context(), store.ClaimNextParams{AgentID: agentID, Queues: queues, Lease: time.Minute, Now: now, N: n})
	must(t, "ClaimNextN", err)
	return ts
}

// testClaimNextNOrder: the n oldest claimable todos, own and pooled
// interleaved by age, only in the queues asked, each with its own lease,
// returned oldest first; none left is an empty slice.
func testClaimNextNOrder(t *testing.T, in Instance) {
	s := in.Store
	a, b, p := pairPool(t, s, "team")
	other := vend(t, s, newAgent("charlie", ownerID, "build", "docs"))
	push(t, s, newTodo(other.ID, "build", at(0))) // another agent's, oldest of all
	own1 := push(t, s, newTodo(a.ID, "build", at(4*time.Second)))
	pool1 := push(t, s, pooledTodo(p.ID, "build", at(1*time.Second)))
	own2 := push(t, s, newTodo(a.ID, "build", at(2*time.Second)))
	pool2 := push(t, s, pooledTodo(p.ID, "build", at(3*time.Second)))
	own3 := push(t, s, newTodo(a.ID, "build", at(5*time.Second)))
	bOwn := push(t, s, newTodo(b.ID, "build", at(time.Second/2))) // bravo's own: never alpha's
	claimedByB := push(t, s, pooledTodo(p.ID, "build", at(time.Second/4)))
	_, err := s.ClaimTodo(t.Context(), store.ClaimTodoParams{AgentID: b.ID, TodoID: claimedByB.ID, Queues: []string{"build"},
		Lease: time.Minute, Now: at(time.Minute)})
	must(t, "bravo claims a pooled todo", err)

	now := at(time.Hour)
	got := claimN(t, s, a.ID, []string{"build"}, 4, now)
	wantIDs(t, "ClaimNextN(4)", idsInOrder(got), pool1.ID, own2.ID, pool2.ID, own1.ID)
	for i, td := range got {
		if td.State != domain.TodoClaimed || td.AgentID != a.ID || td.Attempt != 1 ||
			td.LeaseExpiresAt == nil || !td.LeaseExpiresAt.Equal(now.Add(time.Minute)) || td.RingAgentID != "" {
			t.Errorf("claim %d: state %s agent %s attempt %d lease %v ring %q, want claimed by alpha, attempt 1, lease %v",
				i, td.State, td.AgentID, td.Attempt, td.LeaseExpiresAt, td.RingAgentID, now.Add(time.Minute))
		}
		diff(t, "stored claim "+strconv.Itoa(i), td, getTodo(t, s, td.ID))
	}
	wantIDs(t, "ClaimNextN(4) again", idsInOrder(claimN(t, s, a.ID, []string{"build"}, 4, now)), own3.ID)
	if got := claimN(t, s, a.ID, []string{"build"}, 4, now); got == nil || len(got) != 0 {
		t.Errorf("ClaimNextN with nothing claimable = %v, want an empty slice", got)
	}
	if st := getTodo(t, s, bOwn.ID).State; st != domain.TodoPending {
		t.Errorf("bravo's own todo is %s, want pending", st)
	}
	// Only the queues asked for.
	c := vend(t, s, newAgent("delta", ownerID, "q1", "q2"))
	q2 := push(t, s, newTodo(c.ID, "q2", at(time.Second)))
	q1 := push(t, s, newTodo(c.ID, "q1", at(2*time.Second)))
	wantIDs(t, "ClaimNextN(q1)", idsInOrder(claimN(t, s, c.ID, []string{"q1"}, 5, now)), q1.ID)
	wantIDs(t, "ClaimNextN(no queues)", idsInOrder(claimN(t, s, c.ID, nil, 5, now)))
	wantIDs(t, "ClaimNextN(q1,q2)", idsInOrder(claimN(t, s, c.ID, []string{"q1", "q2"}, 5, now)), q2.ID)
}

// testClaimNextNBounds: N <= 1 claims one, N past domain.MaxClaimBatch
// claims domain.MaxClaimBatch; ClaimNext claims one whatever N says.
func testClaimNextNBounds(t *testing.T, in Instance) {
	s, _, a := withAlpha(t, in)
	for i := range domain.MaxClaimBatch + 10 {
		push(t, s, newTodo(a.ID, "build", at(time.Duration(i)*time.Second)))
	}
	now := at(time.Hour)
	for _, n := range []int{0, -3, 1} {
		if got := claimN(t, s, a.ID, []string{"build"}, n, now); len(got) != 1 {
			t.Errorf("ClaimNextN(N=%d) claimed %d, want 1", n, len(got))
		}
	}
	if _, err := s.ClaimNext(t.Context(), store.ClaimNextParams{AgentID: a.ID, Queues: []string{"build"}, Lease: time.Minute, Now: now, N: 5}); err != nil {
		t.Fatalf("ClaimNext(N=5): %v", err)
	}
	got := claimN(t, s, a.ID, []string{"build"}, 1000, now)
	if len(got) != domain.MaxClaimBatch {
		t.Errorf("ClaimNextN(N=1000) claimed %d, want %d", len(got), domain.MaxClaimBatch)
	}
	if rest := claimN(t, s, a.ID, []string{"build"}, 1000, now); len(rest) != 6 {
		t.Errorf("ClaimNextN afterwards claimed %d, want the last 6", len(rest))
	}
}

// batchRace runs workers goroutines (on Store and, when the adapter has
// one, on its Twin: two instances) that each call claim(store, worker)
// until it returns none, and checks that every one of want was claimed
// exactly once and that each batch came oldest first.
func batchRace(t *testing.T, in Instance, workers int, want []string, claim func(s store.Store, worker int, prev []domain.Todo) ([]domain.Todo, error)) {
	t.Helper()
	stores := []store.Store{in.Store}
	if in.Twin != nil {
		stores = append(stores, in.Twin(t))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	errs := parallel(workers, func(w int) error {
		s := stores[w%len(stores)]
		var prev []domain.Todo
		for {
			ts, err := claim(s, w, prev)
			if err != nil {
				return err
			}
			if len(ts) == 0 {
				return nil
			}
			if !slices.IsSortedFunc(ts, func(a, b domain.Todo) int { return a.CreatedAt.Compare(b.CreatedAt) }) {
				t.Errorf("worker %d: a batch not oldest first: %v", w, idsInOrder(ts))
			}
			mu.Lock()
			for _, td := range ts {
				seen[td.ID]++
			}
			mu.Unlock()
			prev = ts
		}
	})
	for w, err := range errs {
		must(t, "worker "+strconv.Itoa(w), err)
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("todo %s claimed %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct todos claimed, want %d", len(seen), len(want))
	}
}

// testClaimNextNRace: concurrent batched claimers, on two store handles
// where the adapter has them, members of one pool with own todos too,
// never claim a todo twice and claim them all.
func testClaimNextNRace(t *testing.T, in Instance) {
	s := in.Store
	const workers = 6
	var members []vended
	for i := range workers / 2 {
		members = append(members, vend(t, s, newAgent("worker-"+strconv.Itoa(i), ownerID, "build")))
	}
	p := createPool(t, s, newPool("crowd", []string{"build"}, members...))
	var want []string
	for i := range 60 {
		want = append(want, push(t, s, pooledTodo(p.ID, "build", at(time.Duration(i)*time.Second))).ID)
	}
	for i := range 30 { // own todos of the members, two workers each
		want = append(want, push(t, s, newTodo(members[i%len(members)].ID, "build", at(time.Duration(i)*time.Second+time.Millisecond))).ID)
	}
	batchRace(t, in, workers, want, func(s store.Store, w int, _ []domain.Todo) ([]domain.Todo, error) {
		return s.ClaimNextN(context.Background(), store.ClaimNextParams{AgentID: members[w%len(members)].ID,
			Queues: []string{"build"}, Lease: time.Minute, Now: at(time.Hour), N: 1 + w%4})
	})
}

// testCompleteAndClaimRace: workers looping complete-with-next of what
// they hold claim every todo once.
func testCompleteAndClaimRace(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	var want []string
	for i := range 80 {
		want = append(want, push(t, s, newTodo(a.ID, "build", at(time.Duration(i)*time.Second))).ID)
	}
	next := store.ClaimNextParams{AgentID: a.ID, Queues: []string{"build"}, Lease: time.Minute, Now: at(time.Hour), N: 2}
	batchRace(t, in, 4, want, func(s store.Store, _ int, prev []domain.Todo) ([]domain.Todo, error) {
		ctx := context.Background()
		if len(prev) == 0 {
			return s.ClaimNextN(ctx, next)
		}
		for _, td := range prev[1:] {
			if _, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: td.ID, Now: at(time.Hour)}); err != nil {
				return nil, err
			}
		}
		_, claimed, err := s.CompleteAndClaim(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: prev[0].ID, Now: at(time.Hour)}, next)
		return claimed, err
	})
	done, err := s.ListTodos(t.Context(), store.ListTodosParams{AgentID: a.ID, State: domain.TodoDone})
	must(t, "ListTodos(done)", err)
	if len(done) != len(want) {
		t.Errorf("%d todos done, want %d", len(done), len(want))
	}
}

// testCompleteAndClaim: the todo is done exactly as CompleteTodo leaves
// it, and the next oldest claimable todos are claimed with it.
func testCompleteAndClaim(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	t1 := push(t, s, newTodo(a.ID, "build", at(time.Second)))
	t2 := push(t, s, newTodo(a.ID, "build", at(2*time.Second)))
	t3 := push(t, s, newTodo(a.ID, "build", at(3*time.Second)))
	t4 := push(t, s, newTodo(a.ID, "build", at(4*time.Second)))
	held := claimN(t, s, a.ID, []string{"build"}, 1, at(time.Minute))
	wantIDs(t, "first claim", idsInOrder(held), t1.ID)

	now := at(time.Minute + 30*time.Second)
	result := []byte(`{"ok":true}`)
	done, claimed, err := s.CompleteAndClaim(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: t1.ID, Result: result, Now: now},
		store.ClaimNextParams{AgentID: a.ID, Queues: []string{"build"}, Lease: 5 * time.Minute, Now: now, N: 2})
	must(t, "CompleteAndClaim", err)
	if done.ID != t1.ID || done.State != domain.TodoDone || done.FinishedAt == nil || !done.FinishedAt.Equal(now) {
		t.Errorf("completed %s state %s finished %v, want %s done at %v", done.ID, done.State, done.FinishedAt, t1.ID, now)
	}
	sameJSON(t, "result", done.Result, result)
	diff(t, "stored done todo", done, getTodo(t, s, t1.ID))
	wantIDs(t, "claimed with the complete", idsInOrder(claimed), t2.ID, t3.ID)
	for _, td := range claimed {
		if td.State != domain.TodoClaimed || td.LeaseExpiresAt == nil || !td.LeaseExpiresAt.Equal(now.Add(5*time.Minute)) {
			t.Errorf("claimed %s: state %s lease %v, want claimed until %v", td.ID, td.State, td.LeaseExpiresAt, now.Add(5*time.Minute))
		}
	}
	// Nothing claimable left but t4 after one more.
	_, claimed, err = s.CompleteAndClaim(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: t2.ID, Now: now},
		store.ClaimNextParams{AgentID: a.ID, Queues: []string{"build"}, Lease: time.Minute, Now: now, N: 5})
	must(t, "CompleteAndClaim(t2)", err)
	wantIDs(t, "claimed after t2", idsInOrder(claimed), t4.ID)
	_, claimed, err = s.CompleteAndClaim(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: t3.ID, Now: now},
		store.ClaimNextParams{AgentID: a.ID, Queues: []string{"build"}, Lease: time.Minute, Now: now})
	must(t, "CompleteAndClaim(t3)", err)
	if claimed == nil || len(claimed) != 0 {
		t.Errorf("CompleteAndClaim with nothing claimable claimed %v, want an empty slice", claimed)
	}
	if st := getTodo(t, s, t3.ID).State; st != domain.TodoDone {
		t.Errorf("t3 is %s, want done", st)
	}
}

// testCompleteAndClaimRefused: a complete that is refused (not held, lease
// expired, another agent's, unknown) claims nothing: the next todo stays
// pending.
func testCompleteAndClaimRefused(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	b := vend(t, s, newAgent("bravo", ownerID, "build"))
	held := push(t, s, newTodo(a.ID, "build", at(time.Second)))
	pending := push(t, s, newTodo(a.ID, "build", at(2*time.Second)))
	bTodo := push(t, s, newTodo(b.ID, "build", at(0)))
	_, err := s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: a.ID, TodoID: held.ID, Queues: []string{"build"}, Lease: time.Minute, Now: at(time.Minute)})
	must(t, "ClaimTodo", err)
	next := func(now time.Time) store.ClaimNextParams {
		return store.ClaimNextParams{AgentID: a.ID, Queues: []string{"build"}, Lease: time.Minute, Now: now, N: 3}
	}
	for _, c := range []struct {
		what string
		id   string
		now  time.Time
		want error
	}{
		{"lease expired", held.ID, at(2 * time.Minute), domain.ErrConflict},
		{"not claimed", pending.ID, at(time.Minute), domain.ErrConflict},
		{"another agent's", bTodo.ID, at(time.Minute), domain.ErrNotFound},
		{"unknown", "00000000-0000-4000-8000-00000000dead", at(time.Minute), domain.ErrNotFound},
	} {
		done, claimed, err := s.CompleteAndClaim(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: c.id, Now: c.now}, next(c.now))
		wantErr(t, "CompleteAndClaim("+c.what+")", err, c.want)
		if done.ID != "" || claimed != nil {
			t.Errorf("CompleteAndClaim(%s) = %s, %v; want nothing", c.what, done.ID, idsInOrder(claimed))
		}
		_, claimed, err = s.FailAndClaim(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: c.id, Reason: "x", Now: c.now}, next(c.now))
		wantErr(t, "FailAndClaim("+c.what+")", err, c.want)
		if claimed != nil {
			t.Errorf("FailAndClaim(%s) claimed %v, want nothing", c.what, idsInOrder(claimed))
		}
		if st := getTodo(t, s, pending.ID).State; st != domain.TodoPending {
			t.Fatalf("after the refused %s the next todo is %s, want pending", c.what, st)
		}
	}
	if st := getTodo(t, s, held.ID).State; st != domain.TodoClaimed {
		t.Errorf("the todo whose lease expired is %s, want still claimed (the reaper returns it)", st)
	}
}

// testFailAndClaim: the failed todo waits for its retry (not among the
// claims), the next one is claimed; a pooled todo goes back to its pool.
func testFailAndClaim(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a, _, p := pairPool(t, s, "team")
	first := push(t, s, pooledTodo(p.ID, "build", at(time.Second)))
	second := push(t, s, newTodo(a.ID, "build", at(2*time.Second)))
	wantIDs(t, "first claim", idsInOrder(claimN(t, s, a.ID, []string{"build"}, 1, at(time.Minute))), first.ID)
	now := at(time.Minute + 30*time.Second)
	failed, claimed, err := s.FailAndClaim(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: first.ID, Reason: "flaky", Now: now},
		store.ClaimNextParams{AgentID: a.ID, Queues: []string{"build"}, Lease: time.Minute, Now: now, N: 4})
	must(t, "FailAndClaim", err)
	wantRetry := domain.NextAfterFailure(1, domain.DefaultMaxAttempts, now)
	if failed.State != domain.TodoFailed || failed.LastError != "flaky" || failed.RetryAt == nil || !failed.RetryAt.Equal(*wantRetry) || failed.AgentID != "" {
		t.Errorf("failed: state %s error %q retry %v agent %q, want failed, flaky, retry %v, back in its pool", failed.State, failed.LastError, failed.RetryAt, failed.AgentID, *wantRetry)
	}
	diff(t, "stored failed todo", failed, getTodo(t, s, first.ID))
	wantIDs(t, "claimed with the fail", idsInOrder(claimed), second.ID)
}
