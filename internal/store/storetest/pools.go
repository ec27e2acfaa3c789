package storetest

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The pool part of the contract (design: Pools, Pool routing).
var poolTests = []contractTest{
	{"Pools/CreateGetListDelete", testPoolCRUD},
	{"Pools/Idempotency", testPoolIdempotency},
	{"Pools/ClaimAndList", testPoolClaimAndList},
	{"Pools/ClaimRace", testPoolClaimRace},
	{"Pools/ClaimNextRace", testPoolClaimNextRace},
	{"Pools/ReturnToPool", testPoolReturn},
	{"Pools/RouteRing", testPoolRouteRing},
	{"Pools/RouteRingRace", testPoolRouteRingRace},
	{"Pools/DigestCountsRung", testPoolDigestCountsRung},
	{"Pools/ListLive", testPoolListLive},
	{"Pools/SetMembers", testPoolSetMembers},
}

func newPool(name string, queues []string, members ...vended) domain.Pool {
	p := domain.Pool{ID: uuid.NewString(), OwnerID: ownerID, Name: name, Queues: queues, CreatedAt: Base}
	for _, m := range members {
		p.Members = append(p.Members, domain.PoolMember{AgentID: m.ID})
	}
	return p
}

func createPool(t *testing.T, s store.Store, p domain.Pool) domain.Pool {
	t.Helper()
	must(t, "CreatePool "+p.Name, s.CreatePool(t.Context(), store.CreatePoolParams{Pool: p,
		Audit: domain.AuditRecord{Actor: "operator:" + ownerID, Action: "pool.create"}}))
	return p
}

// wantIDs fails t unless got is want, in order (none: empty).
func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// pairPool is a pool name on queue build with members alpha and bravo.
func pairPool(t *testing.T, s store.Store, name string) (a, b vended, p domain.Pool) {
	t.Helper()
	a = vend(t, s, newAgent("alpha", ownerID, "build"))
	b = vend(t, s, newAgent("bravo", ownerID, "build"))
	return a, b, createPool(t, s, newPool(name, []string{"build"}, a, b))
}

func pooledTodo(poolID, queue string, created time.Time) domain.Todo {
	td := newTodo("", queue, created)
	td.PoolID = poolID
	return td
}

func testPoolCRUD(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	b := vend(t, s, newAgent("bravo", ownerID, "build", "review"))
	before := auditCount(t, s)
	p := createPool(t, s, newPool("reviewers", []string{"review", "build"}, b, a))
	if auditCount(t, s) != before+1 {
		t.Errorf("CreatePool appended %d audit entries, want 1", auditCount(t, s)-before)
	}
	dup := newPool("reviewers", []string{"build"}, a)
	wantErr(t, "CreatePool(taken name)", s.CreatePool(ctx, store.CreatePoolParams{Pool: dup}), domain.ErrConflict)
	other := newPool("reviewers", []string{"build"}, a)
	other.OwnerID = "someone-else"
	grantPool(t, s, a.ID, other.OwnerID, Base) // a joins another person's pool through a grant (design: Pool grants)
	createPool(t, s, other)                    // names are per owner
	ghost := newPool("ghosts", []string{"build"}, vended{Agent: domain.Agent{ID: uuid.NewString()}})
	wantErr(t, "CreatePool(unknown member)", s.CreatePool(ctx, store.CreatePoolParams{Pool: ghost}), domain.ErrNotFound)
	if _, err := s.GetPool(ctx, store.GetPoolParams{ID: ghost.ID}); err == nil {
		t.Error("a refused CreatePool left its pool behind")
	}

	got, err := s.GetPool(ctx, store.GetPoolParams{OwnerID: ownerID, Name: "reviewers"})
	must(t, "GetPool by name", err)
	if got.ID != p.ID || !slices.Equal(got.Queues, []string{"build", "review"}) || len(got.Members) != 2 || !got.HasMember(a.ID) || !got.HasMember(b.ID) {
		t.Errorf("GetPool = %+v", got)
	}
	if !got.CreatedAt.Equal(Base) {
		t.Errorf("created_at = %v, want %v", got.CreatedAt, Base)
	}
	byID, err := s.GetPool(ctx, store.GetPoolParams{ID: p.ID})
	must(t, "GetPool by id", err)
	diff(t, "GetPool by id", got, byID)
	_, err = s.GetPool(ctx, store.GetPoolParams{OwnerID: ownerID, Name: "nope"})
	wantErr(t, "GetPool(unknown)", err, domain.ErrNotFound)

	mine, err := s.ListPools(ctx, store.ListPoolsParams{OwnerID: ownerID})
	must(t, "ListPools", err)
	if len(mine) != 1 || mine[0].ID != p.ID {
		t.Errorf("ListPools(owner) = %v", idsOf(mine, func(p domain.Pool) string { return p.ID }))
	}
	all, err := s.ListPools(ctx, store.ListPoolsParams{MemberID: a.ID})
	must(t, "ListPools(member)", err)
	if len(all) != 2 {
		t.Errorf("ListPools(member a) = %d pools, want 2", len(all))
	}
	none, err := s.ListPools(ctx, store.ListPoolsParams{MemberID: uuid.NewString()})
	if err != nil || len(none) != 0 {
		t.Errorf("ListPools(no member) = %v, %v", none, err)
	}
	// MemberIDs: the pools of any of the agents, each once, members in full.
	for _, c := range []struct {
		ids  []string
		want []string
	}{
		{[]string{a.ID, b.ID}, []string{p.ID, other.ID}},
		{[]string{b.ID, uuid.NewString()}, []string{p.ID}},
		{[]string{uuid.NewString()}, nil},
		{[]string{}, nil},
	} {
		got, err := s.ListPools(ctx, store.ListPoolsParams{MemberIDs: c.ids, OwnerID: "ignored"})
		must(t, "ListPools(member ids)", err)
		ids := idsOf(got, func(p domain.Pool) string { return p.ID })
		slices.Sort(ids)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(ids, want) {
			t.Errorf("ListPools(MemberIDs %d ids) = %v, want %v", len(c.ids), ids, want)
		}
		for _, g := range got {
			if g.ID == p.ID && len(g.Members) != 2 {
				t.Errorf("ListPools(MemberIDs) pool %s has %d members, want 2", g.ID, len(g.Members))
			}
		}
	}

	td := push(t, s, pooledTodo(p.ID, "review", at(time.Second)))
	del := store.DeletePoolParams{ID: p.ID, Now: at(time.Minute), Audit: domain.AuditRecord{Actor: "operator:" + ownerID, Action: "pool.delete"}}
	wantErr(t, "DeletePool(live todo)", s.DeletePool(ctx, del), domain.ErrConflict)
	claim(t, s, b, td.ID, time.Minute, at(2*time.Second))
	wantErr(t, "DeletePool(claimed todo)", s.DeletePool(ctx, del), domain.ErrConflict)
	_, err = s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: b.ID, TodoID: td.ID, Now: at(3 * time.Second)})
	must(t, "complete", err)
	before = auditCount(t, s)
	must(t, "DeletePool", s.DeletePool(ctx, del))
	if auditCount(t, s) != before+1 {
		t.Errorf("DeletePool appended %d audit entries, want 1", auditCount(t, s)-before)
	}
	_, err = s.GetPool(ctx, store.GetPoolParams{ID: p.ID})
	wantErr(t, "GetPool(deleted)", err, domain.ErrNotFound)
	wantErr(t, "DeletePool(again)", s.DeletePool(ctx, del), domain.ErrNotFound)
	if done := getTodo(t, s, td.ID); done.State != domain.TodoDone || done.AgentID != b.ID {
		t.Errorf("finished todo of a deleted pool = %+v", done)
	}
	_, _, err = s.CreateTodo(ctx, store.CreateTodoParams{Todo: pooledTodo(p.ID, "review", at(time.Hour))})
	wantErr(t, "CreateTodo(deleted pool)", err, domain.ErrNotFound)
}

func testPoolIdempotency(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	p := createPool(t, s, newPool("builders", []string{"build"}, a))
	q := createPool(t, s, newPool("others", []string{"build"}, a))
	keyedPool := func(pool, key string) domain.Todo {
		td := pooledTodo(pool, "build", at(time.Second))
		td.IdempotencyKey = key
		return td
	}
	first, created, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: keyedPool(p.ID, "k")})
	if err != nil || !created || first.AgentID != "" || first.PoolID != p.ID {
		t.Fatalf("pooled push = %+v created %v, %v", first, created, err)
	}
	again, created, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: keyedPool(p.ID, "k")})
	if err != nil || created || again.ID != first.ID {
		t.Errorf("pooled push again = %s created %v, %v; want %s, not created", again.ID, created, err, first.ID)
	}
	if _, created, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: keyedPool(q.ID, "k")}); err != nil || !created {
		t.Errorf("same key in another pool: created %v, %v; want created", created, err)
	}
	own, created, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: keyed(a.ID, "k", at(time.Second))})
	if err != nil || !created {
		t.Fatalf("same key pushed to a member: created %v, %v; want created", created, err)
	}
	// A member holding the pooled todo and its own todo with one key: both live.
	claim(t, s, a, first.ID, time.Minute, at(2*time.Second))
	again, created, err = s.CreateTodo(ctx, store.CreateTodoParams{Todo: keyedPool(p.ID, "k")})
	if err != nil || created || again.ID != first.ID || again.AgentID != a.ID {
		t.Errorf("pooled push of a claimed key = %+v created %v, %v; want the claimed todo", again, created, err)
	}
	again, created, err = s.CreateTodo(ctx, store.CreateTodoParams{Todo: keyed(a.ID, "k", at(time.Second))})
	if err != nil || created || again.ID != own.ID {
		t.Errorf("agent push of its key = %s created %v, %v; want %s", again.ID, created, err, own.ID)
	}
}

func testPoolClaimAndList(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build", "review"))
	b := vend(t, s, newAgent("bravo", ownerID, "build"))
	outsider := vend(t, s, newAgent("charlie", ownerID, "build", "review"))
	p := createPool(t, s, newPool("team", []string{"build", "review"}, a, b))
	own := push(t, s, newTodo(a.ID, "build", at(2*time.Second)))
	older := push(t, s, pooledTodo(p.ID, "build", at(time.Second)))
	review := push(t, s, pooledTodo(p.ID, "review", at(3*time.Second)))

	list := func(agent vended, withPools bool) []string {
		ts, err := s.ListTodos(ctx, store.ListTodosParams{AgentID: agent.ID, WithPools: withPools})
		must(t, "ListTodos", err)
		return idsOf(ts, func(t domain.Todo) string { return t.ID })
	}
	wantIDs(t, "ListTodos(a, with pools)", list(a, true), older.ID, own.ID, review.ID)
	wantIDs(t, "ListTodos(a)", list(a, false), own.ID)
	wantIDs(t, "ListTodos(outsider, with pools)", list(outsider, true))
	byPool, err := s.ListTodos(ctx, store.ListTodosParams{PoolID: p.ID})
	if err != nil || len(byPool) != 2 {
		t.Errorf("ListTodos(pool) = %d, %v; want 2", len(byPool), err)
	}

	_, err = s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: outsider.ID, TodoID: older.ID, Queues: outsider.Scope.Queues, Lease: time.Minute, Now: at(time.Minute)})
	wantErr(t, "ClaimTodo(outsider)", err, domain.ErrNotFound)
	_, err = s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: b.ID, TodoID: review.ID, Queues: b.Scope.Queues, Lease: time.Minute, Now: at(time.Minute)})
	wantErr(t, "ClaimTodo(queue not in the member's scope)", err, domain.ErrNotFound)

	next, err := s.ClaimNext(ctx, store.ClaimNextParams{AgentID: a.ID, Queues: a.Scope.Queues, Lease: time.Minute, Now: at(time.Minute)})
	must(t, "ClaimNext", err)
	if next.ID != older.ID || next.AgentID != a.ID || next.State != domain.TodoClaimed || next.PoolID != p.ID || next.RingAgentID != "" {
		t.Errorf("ClaimNext = %+v, want the older pooled todo, now a's", next)
	}
	next, err = s.ClaimNext(ctx, store.ClaimNextParams{AgentID: a.ID, Queues: a.Scope.Queues, Lease: time.Minute, Now: at(time.Minute)})
	if err != nil || next.ID != own.ID {
		t.Errorf("second ClaimNext = %s, %v; want a's own %s", next.ID, err, own.ID)
	}
	_, err = s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: b.ID, TodoID: older.ID, Queues: b.Scope.Queues, Lease: time.Minute, Now: at(time.Minute)})
	wantErr(t, "ClaimTodo(held by another member)", err, domain.ErrConflict)
	wantIDs(t, "ListTodos(b, with pools) after a's claim (only the unclaimed)", list(b, true), review.ID)
	_, err = s.ClaimNext(ctx, store.ClaimNextParams{AgentID: b.ID, Queues: b.Scope.Queues, Lease: time.Minute, Now: at(time.Minute)})
	wantErr(t, "ClaimNext(b, nothing in its queues)", err, domain.ErrNotFound)
	got := claim(t, s, a, review.ID, time.Minute, at(time.Minute))
	if got.AgentID != a.ID {
		t.Errorf("claimed pooled todo has agent %q", got.AgentID)
	}
	_, err = s.RenewLease(ctx, store.RenewLeaseParams{AgentID: a.ID, TodoID: review.ID, Lease: time.Minute, Now: at(90 * time.Second)})
	must(t, "RenewLease(pooled)", err)
	_, err = s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: b.ID, TodoID: review.ID, Now: at(91 * time.Second)})
	wantErr(t, "CompleteTodo(another member's)", err, domain.ErrConflict)
	_, err = s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: review.ID, Now: at(91 * time.Second)})
	must(t, "CompleteTodo(pooled)", err)
}

// poolRace pushes rounds pooled todos to a fresh pair pool name and, for
// each, runs race of both members at once, then check of the round.
func poolRace(t *testing.T, s store.Store, name string, rounds int, race func(td domain.Todo, m vended, i int) error,
	check func(round int, td domain.Todo, members []vended, errs []error)) {
	a, b, p := pairPool(t, s, name)
	members := []vended{a, b}
	for round := range rounds {
		td := push(t, s, pooledTodo(p.ID, "build", at(time.Duration(round)*time.Second)))
		check(round, td, members, parallel(2, func(i int) error { return race(td, members[i], i) }))
	}
}

func testPoolClaimRace(t *testing.T, in Instance) {
	s := in.Store
	poolRace(t, s, "racers", 20, func(td domain.Todo, m vended, _ int) error {
		_, err := s.ClaimTodo(ctxOf(t), store.ClaimTodoParams{AgentID: m.ID, TodoID: td.ID,
			Queues: []string{"build"}, Lease: time.Minute, Now: at(time.Hour)})
		return err
	}, func(round int, td domain.Todo, members []vended, errs []error) {
		wins, conflicts, err := Outcome(errs)
		if err != nil || wins != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d won, %d conflict, err %v; want 1 and 1", round, wins, conflicts, err)
		}
		got := getTodo(t, s, td.ID)
		winner := members[0].ID
		if errs[0] != nil {
			winner = members[1].ID
		}
		if got.Attempt != 1 || got.AgentID != winner {
			t.Fatalf("round %d: attempt %d agent %s, want 1 and the winner %s", round, got.Attempt, got.AgentID, winner)
		}
	})
}

func testPoolClaimNextRace(t *testing.T, in Instance) {
	s := in.Store
	const todos, workers = 20, 4
	var members []vended
	for i := range workers {
		members = append(members, vend(t, s, newAgent("worker-"+strconv.Itoa(i), ownerID, "build")))
	}
	p := createPool(t, s, newPool("crowd", []string{"build"}, members...))
	for i := range todos {
		push(t, s, pooledTodo(p.ID, "build", at(time.Duration(i)*time.Second)))
	}
	claimed := make([][]string, workers)
	errs := parallel(workers, func(i int) error {
		for {
			td, err := s.ClaimNext(ctxOf(t), store.ClaimNextParams{AgentID: members[i].ID, Queues: []string{"build"},
				Lease: time.Minute, Now: at(time.Hour)})
			if err != nil {
				return err
			}
			claimed[i] = append(claimed[i], td.ID)
		}
	})
	seen := map[string]bool{}
	for i, err := range errs {
		wantErr(t, "worker "+strconv.Itoa(i)+"'s last ClaimNext", err, domain.ErrNotFound)
		for _, id := range claimed[i] {
			if seen[id] {
				t.Errorf("todo %s claimed twice", id)
			}
			seen[id] = true
		}
	}
	if len(seen) != todos {
		t.Errorf("%d todos claimed, want %d", len(seen), todos)
	}
}

func testPoolReturn(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a, b, p := pairPool(t, s, "team")
	td := push(t, s, pooledTodo(p.ID, "build", at(time.Second)))
	claim(t, s, a, td.ID, time.Minute, at(time.Minute))
	reaped, err := s.ReapExpiredLeases(ctx, store.ReapParams{Now: at(3 * time.Minute)})
	must(t, "reap", err)
	if len(reaped) != 1 || reaped[0] != (store.Reaped{ID: td.ID, PoolID: p.ID}) {
		t.Errorf("reaped = %+v, want the todo back in pool %s", reaped, p.ID)
	}
	back := getTodo(t, s, td.ID)
	if back.State != domain.TodoPending || back.AgentID != "" || back.PoolID != p.ID {
		t.Errorf("after lease expiry = %+v, want pending in its pool", back)
	}
	claim(t, s, b, td.ID, time.Minute, at(4*time.Minute))
	failed, err := s.FailTodo(ctx, store.FailTodoParams{AgentID: b.ID, TodoID: td.ID, Reason: "flaky", Now: at(4 * time.Minute)})
	must(t, "fail", err)
	if failed.RetryAt == nil || failed.AgentID != "" {
		t.Errorf("failed pooled todo = agent %q retry %v, want back in its pool with a retry", failed.AgentID, failed.RetryAt)
	}
	got := claim(t, s, a, td.ID, time.Minute, *failed.RetryAt)
	if got.Attempt != 3 || got.AgentID != a.ID {
		t.Errorf("retry claimed = attempt %d agent %s", got.Attempt, got.AgentID)
	}
	// An agent's own todo keeps its agent through the same paths.
	mine := push(t, s, newTodo(b.ID, "build", at(time.Second)))
	claim(t, s, b, mine.ID, time.Minute, at(10*time.Minute))
	reaped, err = s.ReapExpiredLeases(ctx, store.ReapParams{Now: at(20 * time.Minute)})
	must(t, "reap", err)
	for _, r := range reaped {
		if r.ID == mine.ID && (r.AgentID != b.ID || r.PoolID != "") {
			t.Errorf("reaped own todo = %+v", r)
		}
	}
	if got := getTodo(t, s, mine.ID); got.AgentID != b.ID {
		t.Errorf("own todo after reap has agent %q", got.AgentID)
	}
}

func route(t *testing.T, s store.Store, todoID, agentID, prev string, when time.Time) bool {
	t.Helper()
	ok, err := s.RouteRing(t.Context(), store.RouteRingParams{TodoID: todoID, AgentID: agentID, Prev: prev, At: when})
	must(t, "RouteRing", err)
	return ok
}

func testPoolRouteRing(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a, b, p := pairPool(t, s, "team")
	outsider := vend(t, s, newAgent("charlie", ownerID, "build"))
	td := push(t, s, pooledTodo(p.ID, "build", at(time.Second)))

	if route(t, s, td.ID, outsider.ID, "", at(time.Minute)) {
		t.Error("RouteRing to a non-member succeeded")
	}
	if !route(t, s, td.ID, a.ID, "", at(time.Minute)) {
		t.Fatal("first RouteRing failed")
	}
	got := getTodo(t, s, td.ID)
	if got.RingAgentID != a.ID || got.RingAttempts != 1 {
		t.Errorf("after route: ring agent %q attempts %d", got.RingAgentID, got.RingAttempts)
	}
	sameTime(t, "last_ringed_at", got.LastRingedAt, at(time.Minute))
	pool, err := s.GetPool(ctx, store.GetPoolParams{ID: p.ID})
	must(t, "GetPool", err)
	for _, m := range pool.Members {
		if m.AgentID == a.ID {
			sameTime(t, "a's last_rung_at", m.LastRungAt, at(time.Minute))
		} else {
			isNil(t, "b's last_rung_at", m.LastRungAt)
		}
	}
	if route(t, s, td.ID, b.ID, "", at(2*time.Minute)) {
		t.Error("RouteRing with a stale previous member (none) succeeded")
	}
	if !route(t, s, td.ID, b.ID, a.ID, at(2*time.Minute)) {
		t.Fatal("RouteRing a → b failed")
	}
	if ok, err := s.ReleaseRing(ctx, store.ReleaseRingParams{TodoID: td.ID, AgentID: a.ID}); err != nil || ok {
		t.Errorf("ReleaseRing by a former member = %v, %v; want false", ok, err)
	}
	if ok, err := s.ReleaseRing(ctx, store.ReleaseRingParams{TodoID: td.ID, AgentID: b.ID}); err != nil || !ok {
		t.Errorf("ReleaseRing by the rung member = %v, %v; want true", ok, err)
	}
	if got := getTodo(t, s, td.ID); got.RingAgentID != "" || got.RingAttempts != 2 {
		t.Errorf("after release: ring agent %q attempts %d, want none and 2", got.RingAgentID, got.RingAttempts)
	}
	// The budget is the todo's, across members (design: Pool routing).
	prev := ""
	for i := 2; i < domain.MaxRings; i++ {
		next := []string{a.ID, b.ID}[i%2]
		if !route(t, s, td.ID, next, prev, at(time.Duration(i)*time.Hour)) {
			t.Fatalf("ring %d refused", i+1)
		}
		prev = next
	}
	if route(t, s, td.ID, a.ID, prev, at(10*time.Hour)) || route(t, s, td.ID, b.ID, prev, at(10*time.Hour)) {
		t.Error("RouteRing past the ring budget succeeded")
	}
	// A claimed todo rings nobody; an agent's own todo is not routed.
	other := push(t, s, pooledTodo(p.ID, "build", at(time.Second)))
	claim(t, s, a, other.ID, time.Minute, at(time.Minute))
	if route(t, s, other.ID, b.ID, "", at(2*time.Minute)) {
		t.Error("RouteRing of a claimed todo succeeded")
	}
	own := push(t, s, newTodo(a.ID, "build", at(time.Second)))
	if route(t, s, own.ID, a.ID, "", at(2*time.Minute)) {
		t.Error("RouteRing of an agent's own todo succeeded")
	}
}

func testPoolRouteRingRace(t *testing.T, in Instance) {
	s := in.Store
	won := make([]bool, 2)
	poolRace(t, s, "team", 10, func(td domain.Todo, m vended, i int) error {
		var err error
		won[i], err = s.RouteRing(ctxOf(t), store.RouteRingParams{TodoID: td.ID, AgentID: m.ID, At: at(time.Hour)})
		return err
	}, func(round int, td domain.Todo, _ []vended, errs []error) {
		for _, err := range errs {
			must(t, "RouteRing", err)
		}
		if won[0] == won[1] {
			t.Fatalf("round %d: routes won %v, want exactly one", round, won)
		}
		if got := getTodo(t, s, td.ID); got.RingAttempts != 1 {
			t.Fatalf("round %d: ring_attempts %d, want 1", round, got.RingAttempts)
		}
	})
}

// testPoolDigestCountsRung: a member's digest counts the pooled todos rung
// at it, and only those (design: Pool routing).
func testPoolDigestCountsRung(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a, b, p := pairPool(t, s, "team")
	rung := push(t, s, pooledTodo(p.ID, "build", at(time.Second)))
	held := push(t, s, pooledTodo(p.ID, "build", at(2*time.Second)))
	own := push(t, s, newTodo(a.ID, "build", at(3*time.Second)))
	if !route(t, s, rung.ID, a.ID, "", at(time.Minute)) {
		t.Fatal("RouteRing failed")
	}
	pending := func(agent vended) []string {
		ts, err := s.PendingDoorbellTodos(ctx, store.PendingParams{AgentID: agent.ID})
		must(t, "PendingDoorbellTodos", err)
		return idsOf(ts, func(t store.PendingTodo) string { return t.ID })
	}
	wantIDs(t, "a's digest todos (not the held "+held.ID+")", pending(a), rung.ID, own.ID)
	wantIDs(t, "b's digest todos", pending(b))
	n, err := s.MarkDigestRung(ctx, store.MarkDigestParams{AgentID: a.ID, IDs: []string{rung.ID, held.ID, own.ID}, At: at(2 * time.Minute)})
	if err != nil || n != 2 {
		t.Errorf("MarkDigestRung(a) = %d, %v; want 2 (the rung pooled todo and its own)", n, err)
	}
}

// testPoolListLive: ListTodos with Live lists a pool's pending, claimed and
// retrying todos, not its done or dead ones — exactly those of the whole
// list for which domain.Todo.Live holds, oldest first (design: Pools).
func testPoolListLive(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a, _, p := pairPool(t, s, "backlog")
	var tds []domain.Todo
	for i := range 5 {
		td := pooledTodo(p.ID, "build", at(time.Duration(i+1)*time.Second))
		if i == 4 {
			td.MaxAttempts = 1
		}
		tds = append(tds, push(t, s, td))
	}
	pending, claimed, done, retrying, dead := tds[0], tds[1], tds[2], tds[3], tds[4]
	for _, td := range tds[1:] {
		claim(t, s, a, td.ID, time.Hour, at(time.Minute))
	}
	_, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: done.ID, Now: at(2 * time.Minute)})
	must(t, "complete", err)
	for _, td := range []domain.Todo{retrying, dead} {
		_, err := s.FailTodo(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: td.ID, Reason: "x", Now: at(2 * time.Minute)})
		must(t, "fail", err)
	}
	ids := func(ts []domain.Todo) []string { return idsOf(ts, func(t domain.Todo) string { return t.ID }) }
	live, err := s.ListTodos(ctx, store.ListTodosParams{PoolID: p.ID, Live: true})
	must(t, "ListTodos(pool, live)", err)
	wantIDs(t, "ListTodos(pool, live)", ids(live), pending.ID, claimed.ID, retrying.ID)
	all, err := s.ListTodos(ctx, store.ListTodosParams{PoolID: p.ID})
	must(t, "ListTodos(pool)", err)
	var byRule []domain.Todo
	for _, td := range all {
		if td.Live() {
			byRule = append(byRule, td)
		}
	}
	wantIDs(t, "domain.Todo.Live over the whole list", ids(byRule), ids(live)...)
	if len(all) != 5 {
		t.Errorf("ListTodos(pool) = %d todos, want all 5", len(all))
	}
}

// testPoolSetMembers: members are replaced in one audited transaction; a
// member that leaves no longer rings (its rings on the pool's todos end:
// held) while one that stays keeps its last_rung_at; unknown pools and
// agents are refused and change nothing.
func testPoolSetMembers(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a, b, p := pairPool(t, s, "team")
	c := vend(t, s, newAgent("charlie", ownerID, "build"))
	rungA := push(t, s, pooledTodo(p.ID, "build", at(time.Second)))
	rungB := push(t, s, pooledTodo(p.ID, "build", at(2*time.Second)))
	if !route(t, s, rungA.ID, a.ID, "", at(time.Minute)) || !route(t, s, rungB.ID, b.ID, "", at(time.Minute)) {
		t.Fatal("RouteRing failed")
	}
	before := auditCount(t, s)
	var gotBefore []string
	recordOf := func(prev []string) domain.AuditRecord {
		gotBefore = prev
		return domain.AuditRecord{Actor: "operator:" + ownerID, Action: "pool.update"}
	}
	setMembers := func(ids ...string) ([]string, error) {
		return s.SetPoolMembers(ctx, store.SetPoolMembersParams{PoolID: p.ID, Members: ids, Now: at(time.Hour), Audit: recordOf})
	}
	unrungIDs, err := setMembers(b.ID, c.ID)
	must(t, "SetPoolMembers(b, c)", err)
	wantIDs(t, "the todos unrung", unrungIDs, rungA.ID)
	wantBefore := []string{a.ID, b.ID}
	slices.Sort(wantBefore)
	if !slices.Equal(gotBefore, wantBefore) {
		t.Errorf("members before the update, as the store read them: %v, want %v", gotBefore, wantBefore)
	}
	pool, err := s.GetPool(ctx, store.GetPoolParams{ID: p.ID})
	must(t, "GetPool", err)
	var ids []string
	for _, m := range pool.Members {
		ids = append(ids, m.AgentID)
		if m.AgentID == b.ID {
			sameTime(t, "b's last_rung_at (stayed)", m.LastRungAt, at(time.Minute))
		}
	}
	want := []string{b.ID, c.ID}
	slices.Sort(want)
	wantIDs(t, "members after the update", ids, want...)
	if got := getTodo(t, s, rungA.ID); got.RingAgentID != "" || got.RingAttempts != 1 {
		t.Errorf("the todo rung at the member that left: ring agent %q attempts %d, want held (none) and 1", got.RingAgentID, got.RingAttempts)
	}
	if got := getTodo(t, s, rungB.ID); got.RingAgentID != b.ID {
		t.Errorf("the todo rung at the member that stayed: ring agent %q, want %s", got.RingAgentID, b.ID)
	}
	if got := auditCount(t, s) - before; got != 1 {
		t.Errorf("audit entries appended = %d, want 1", got)
	}
	if route(t, s, rungA.ID, a.ID, "", at(2*time.Minute)) {
		t.Error("RouteRing to the member that left succeeded")
	}

	_, err = setMembers(b.ID, uuid.NewString())
	wantErr(t, "SetPoolMembers(unknown agent)", err, domain.ErrNotFound)
	_, err = s.SetPoolMembers(ctx, store.SetPoolMembersParams{PoolID: uuid.NewString(), Members: []string{b.ID}, Now: at(time.Hour), Audit: recordOf})
	wantErr(t, "SetPoolMembers(unknown pool)", err, domain.ErrNotFound)
	pool, err = s.GetPool(ctx, store.GetPoolParams{ID: p.ID})
	must(t, "GetPool", err)
	if len(pool.Members) != 2 || auditCount(t, s)-before != 1 {
		t.Errorf("a refused update changed the pool: %+v, %d audit entries", pool.Members, auditCount(t, s)-before)
	}
}
