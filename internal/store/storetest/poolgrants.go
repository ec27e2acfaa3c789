package storetest

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The pool grant part of the contract (design: Pool grants).
var poolGrantTests = []contractTest{
	{"PoolGrants/GrantListIdempotent", testPoolGrantCRUD},
	{"PoolGrants/MemberNeedsGrant", testPoolGrantMember},
	{"PoolGrants/RevokeLeavesPools", testPoolGrantRevoke},
	{"PoolGrants/RevokeJoinRace", testPoolGrantRevokeJoinRace},
	{"PoolGrants/HandOver", testPoolGrantHandOver},
}

// granteeID is the person the pool grant tests grant ownerID's agents to.
const granteeID = "0b6f7a44-0000-4000-8000-0000000000a2"

func grantPool(t *testing.T, s store.Store, agentID, personID string, when time.Time) (domain.PoolGrant, bool) {
	t.Helper()
	g, created, err := s.GrantPool(t.Context(), store.GrantPoolParams{
		Grant: domain.PoolGrant{AgentID: agentID, PersonID: personID, GrantedBy: ownerID, CreatedAt: when},
		Audit: domain.AuditRecord{Actor: "operator:" + ownerID, Action: "pool.grant", AgentID: agentID}})
	must(t, "GrantPool", err)
	return g, created
}

func revokeGrant(s store.Store, t *testing.T, agentID, personID string) (store.RevokedPoolGrant, error) {
	return s.RevokePoolGrant(ctxOf(t), store.RevokePoolGrantParams{AgentID: agentID, PersonID: personID, Now: at(time.Hour),
		Audit: func(r store.RevokedPoolGrant) domain.AuditRecord {
			return domain.AuditRecord{Actor: "operator:" + ownerID, Action: "pool.revoke_grant", AgentID: agentID,
				Data: map[string]any{"pools": r.Pools, "unrung": r.Unrung}}
		}})
}

// granteePool is a pool of granteeID on queue build with the members.
func granteePool(name string, members ...vended) domain.Pool {
	p := newPool(name, []string{"build"}, members...)
	p.OwnerID = granteeID
	return p
}

func testPoolGrantCRUD(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	b := vend(t, s, newAgent("bravo", ownerID, "build"))
	before := auditCount(t, s)
	g, created := grantPool(t, s, a.ID, granteeID, at(time.Second))
	want := domain.PoolGrant{AgentID: a.ID, PersonID: granteeID, GrantedBy: ownerID, CreatedAt: at(time.Second)}
	if !created {
		t.Error("first GrantPool reported an existing grant")
	}
	diff(t, "GrantPool", want, g)
	again, created := grantPool(t, s, a.ID, granteeID, at(time.Minute))
	if created {
		t.Error("second GrantPool created a grant")
	}
	diff(t, "GrantPool again (the stored grant)", want, again)
	if n := auditCount(t, s) - before; n != 1 {
		t.Errorf("two GrantPool calls appended %d audit entries, want 1", n)
	}
	grantPool(t, s, b.ID, granteeID, at(2*time.Second))
	grantPool(t, s, a.ID, "someone-else", at(3*time.Second))
	_, _, err := s.GrantPool(ctx, store.GrantPoolParams{Grant: domain.PoolGrant{AgentID: "no-such-agent", PersonID: granteeID, GrantedBy: ownerID, CreatedAt: Base}})
	wantErr(t, "GrantPool(unknown agent)", err, domain.ErrNotFound)

	list := func(p store.ListPoolGrantsParams) []string {
		gs, err := s.ListPoolGrants(ctx, p)
		must(t, "ListPoolGrants", err)
		return idsOf(gs, func(g domain.PoolGrant) string { return g.AgentID + ">" + g.PersonID })
	}
	wantIDs(t, "ListPoolGrants(agent a)", list(store.ListPoolGrantsParams{AgentID: a.ID}), a.ID+">"+granteeID, a.ID+">someone-else")
	byPerson := list(store.ListPoolGrantsParams{PersonID: granteeID})
	if len(byPerson) != 2 || !slices.Contains(byPerson, a.ID+">"+granteeID) || !slices.Contains(byPerson, b.ID+">"+granteeID) {
		t.Errorf("ListPoolGrants(grantee) = %v", byPerson)
	}
	wantIDs(t, "ListPoolGrants(agent a, grantee)", list(store.ListPoolGrantsParams{AgentID: a.ID, PersonID: "someone-else"}), a.ID+">someone-else")
	if all := list(store.ListPoolGrantsParams{}); len(all) != 3 {
		t.Errorf("ListPoolGrants() = %v, want 3", all)
	}

	_, err = revokeGrant(s, t, b.ID, "nobody")
	wantErr(t, "RevokePoolGrant(no grant)", err, domain.ErrNotFound)
	before = auditCount(t, s)
	res, err := revokeGrant(s, t, b.ID, granteeID)
	must(t, "RevokePoolGrant", err)
	if res.Grant.AgentID != b.ID || res.Grant.PersonID != granteeID || res.Pools == nil || len(res.Pools) != 0 || res.Unrung == nil || len(res.Unrung) != 0 {
		t.Errorf("RevokePoolGrant = %+v, want the grant, no pools, nothing unrung (empty, not nil)", res)
	}
	if n := auditCount(t, s) - before; n != 1 {
		t.Errorf("RevokePoolGrant appended %d audit entries, want 1", n)
	}
	_, err = revokeGrant(s, t, b.ID, granteeID)
	wantErr(t, "RevokePoolGrant(again)", err, domain.ErrNotFound)
	wantIDs(t, "ListPoolGrants(grantee) after revoke", list(store.ListPoolGrantsParams{PersonID: granteeID}), a.ID+">"+granteeID)
}

func testPoolGrantMember(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	theirs := vend(t, s, newAgent("theirs", granteeID, "build"))
	refused := granteePool("refused", theirs, a)
	wantErr(t, "CreatePool(another person's agent, no grant)", s.CreatePool(ctx, store.CreatePoolParams{Pool: refused}), domain.ErrNotFound)
	if _, err := s.GetPool(ctx, store.GetPoolParams{ID: refused.ID}); err == nil {
		t.Error("a refused CreatePool left its pool behind")
	}
	grantPool(t, s, a.ID, "someone-else", at(time.Second))
	wantErr(t, "CreatePool(grant to another person)", s.CreatePool(ctx, store.CreatePoolParams{Pool: granteePool("refused", theirs, a)}), domain.ErrNotFound)

	grantPool(t, s, a.ID, granteeID, at(time.Second))
	p := createPool(t, s, granteePool("mixed", theirs, a))
	got, err := s.GetPool(ctx, store.GetPoolParams{ID: p.ID})
	if err != nil || !got.HasMember(a.ID) || !got.HasMember(theirs.ID) {
		t.Fatalf("GetPool(mixed) = %+v, %v; want both members", got, err)
	}
	td := push(t, s, pooledTodo(p.ID, "build", at(2*time.Second)))
	if c := claim(t, s, a, td.ID, time.Minute, at(3*time.Second)); c.AgentID != a.ID {
		t.Errorf("granted member's claim = %+v", c)
	}
}

func testPoolGrantRevoke(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	theirs := vend(t, s, newAgent("theirs", granteeID, "build"))
	grantPool(t, s, a.ID, granteeID, at(time.Second))
	grantPool(t, s, a.ID, "someone-else", at(time.Second))
	p := createPool(t, s, granteePool("first", theirs, a))
	q := createPool(t, s, granteePool("second", a))
	own := createPool(t, s, newPool("own", []string{"build"}, a)) // ownerID's own pool: no grant involved
	other := newPool("other", []string{"build"}, a)
	other.OwnerID = "someone-else"
	createPool(t, s, other)

	rung := push(t, s, pooledTodo(p.ID, "build", at(2*time.Second)))
	held := push(t, s, pooledTodo(p.ID, "build", at(3*time.Second)))
	rungElsewhere := push(t, s, pooledTodo(p.ID, "build", at(4*time.Second)))
	ownRung := push(t, s, pooledTodo(own.ID, "build", at(5*time.Second)))
	for _, r := range []struct{ todo, agent string }{{rung.ID, a.ID}, {rungElsewhere.ID, theirs.ID}, {ownRung.ID, a.ID}} {
		if !route(t, s, r.todo, r.agent, "", at(6*time.Second)) {
			t.Fatalf("RouteRing(%s at %s) did not ring", r.todo, r.agent)
		}
	}
	claim(t, s, a, held.ID, time.Hour, at(7*time.Second))

	res, err := revokeGrant(s, t, a.ID, granteeID)
	must(t, "RevokePoolGrant", err)
	wantPools := []string{p.ID, q.ID}
	slices.Sort(wantPools)
	wantIDs(t, "pools left", res.Pools, wantPools...)
	wantIDs(t, "todos unrung", res.Unrung, rung.ID)

	for _, c := range []struct {
		pool   domain.Pool
		member bool
	}{{p, false}, {q, false}, {own, true}, {other, true}} {
		got, err := s.GetPool(ctx, store.GetPoolParams{ID: c.pool.ID})
		must(t, "GetPool", err)
		if got.HasMember(a.ID) != c.member {
			t.Errorf("pool %s has a as member: %v, want %v", got.Name, got.HasMember(a.ID), c.member)
		}
	}
	if got := getTodo(t, s, rung.ID); got.RingAgentID != "" || got.State != domain.TodoPending {
		t.Errorf("todo rung at the revoked member = ring %q state %s, want held and pending", got.RingAgentID, got.State)
	}
	if got := getTodo(t, s, rungElsewhere.ID); got.RingAgentID != theirs.ID {
		t.Errorf("todo rung at another member = ring %q, want %s", got.RingAgentID, theirs.ID)
	}
	if got := getTodo(t, s, ownRung.ID); got.RingAgentID != a.ID {
		t.Errorf("todo of a's owner's pool = ring %q, want still a", got.RingAgentID)
	}
	// The held todo keeps its lease and may be completed; the others are out of reach.
	if _, err := s.RenewLease(ctx, store.RenewLeaseParams{AgentID: a.ID, TodoID: held.ID, Lease: time.Hour, Now: at(8 * time.Second)}); err != nil {
		t.Errorf("RenewLease of a todo held through a revoked grant: %v", err)
	}
	if _, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: held.ID, Now: at(9 * time.Second)}); err != nil {
		t.Errorf("CompleteTodo of a todo held through a revoked grant: %v", err)
	}
	_, err = s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: a.ID, TodoID: rung.ID, Queues: a.Scope.Queues, Lease: time.Minute, Now: at(10 * time.Second)})
	wantErr(t, "ClaimTodo after the grant is revoked", err, domain.ErrNotFound)
	if route(t, s, rung.ID, a.ID, "", at(11*time.Second)) {
		t.Error("RouteRing rang a member whose grant is revoked")
	}
	ts, err := s.ListTodos(ctx, store.ListTodosParams{AgentID: a.ID, WithPools: true})
	must(t, "ListTodos", err)
	wantIDs(t, "ListTodos(a, with pools) after revoke", idsOf(ts, func(t domain.Todo) string { return t.ID }), held.ID, ownRung.ID)
	if gs, err := s.ListPoolGrants(ctx, store.ListPoolGrantsParams{AgentID: a.ID}); err != nil || len(gs) != 1 || gs[0].PersonID != "someone-else" {
		t.Errorf("grants after revoke = %+v, %v; want only someone-else's", gs, err)
	}
}

// testPoolGrantRevokeJoinRace races a pool joining through a grant with
// the grant's revocation: either the pool is created and the revocation
// takes the member out of it, or the revocation comes first and the pool
// is refused. Never does a member outlive its grant.
func testPoolGrantRevokeJoinRace(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	for round := range 20 {
		grantPool(t, s, a.ID, granteeID, at(time.Duration(round)*time.Second))
		p := granteePool("race-"+strconv.Itoa(round), a)
		var res store.RevokedPoolGrant
		errs := parallel(2, func(i int) (err error) {
			if i == 0 {
				return s.CreatePool(ctxOf(t), store.CreatePoolParams{Pool: p, Audit: domain.AuditRecord{Actor: "operator:" + granteeID, Action: "pool.create"}})
			}
			res, err = revokeGrant(s, t, a.ID, granteeID)
			return err
		})
		if errs[1] != nil {
			t.Fatalf("round %d: revoke: %v", round, errs[1])
		}
		got, err := s.GetPool(ctx, store.GetPoolParams{ID: p.ID})
		switch {
		case errs[0] == nil:
			if err != nil || got.HasMember(a.ID) {
				t.Fatalf("round %d: pool created, then %+v, %v: the member outlived its grant", round, got, err)
			}
			if !slices.Equal(res.Pools, []string{p.ID}) {
				t.Fatalf("round %d: pool created first, but the revocation left %v", round, res.Pools)
			}
		case errors.Is(errs[0], domain.ErrNotFound):
			if err == nil {
				t.Fatalf("round %d: a refused CreatePool left its pool", round)
			}
		default:
			t.Fatalf("round %d: CreatePool: %v", round, errs[0])
		}
	}
}

// testPoolGrantHandOver: ownerID's agent a is in ownerID's pool (its own),
// in granteeID's pool (granted) and granted to "third" too; handed to
// granteeID by an admin, it stays in ownerID's pool through a grant to
// ownerID the hand-over made (granted_by the admin), is granteeID's own in
// granteeID's pool (that grant is gone), and keeps the grant to third. A
// revocation of the new grant then takes it out of ownerID's pool.
func testPoolGrantHandOver(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	mine := createPool(t, s, newPool("mine", []string{"build"}, a))
	grantPool(t, s, a.ID, granteeID, at(time.Second))
	grantPool(t, s, a.ID, "third", at(time.Second))
	theirs := createPool(t, s, granteePool("theirs", a))

	to := granteeID
	_, err := s.UpdateAgent(ctx, store.UpdateAgentParams{ID: a.ID, OwnerID: &to, By: "the-admin", Now: at(time.Minute),
		Audit: &domain.AuditRecord{Actor: "operator:the-admin", Action: "agent.hand_over", AgentID: a.ID}})
	must(t, "UpdateAgent(owner)", err)
	gs, err := s.ListPoolGrants(ctx, store.ListPoolGrantsParams{AgentID: a.ID})
	must(t, "ListPoolGrants", err)
	byPerson := map[string]domain.PoolGrant{}
	for _, g := range gs {
		byPerson[g.PersonID] = g
	}
	if len(gs) != 2 || byPerson[ownerID].GrantedBy != "the-admin" || !byPerson[ownerID].CreatedAt.Equal(at(time.Minute)) || byPerson["third"].GrantedBy != ownerID {
		t.Fatalf("grants after the hand-over = %+v; want one to the previous owner by the admin, and third's", gs)
	}
	for _, p := range []domain.Pool{mine, theirs} {
		got, err := s.GetPool(ctx, store.GetPoolParams{ID: p.ID})
		if err != nil || !got.HasMember(a.ID) {
			t.Errorf("pool %s after the hand-over: %+v, %v; want a still a member", p.Name, got, err)
		}
	}
	res, err := revokeGrant(s, t, a.ID, ownerID)
	must(t, "RevokePoolGrant(previous owner)", err)
	wantIDs(t, "pools left", res.Pools, mine.ID)
	if got, _ := s.GetPool(ctx, store.GetPoolParams{ID: theirs.ID}); !got.HasMember(a.ID) {
		t.Error("revoking the previous owner's grant took a out of its new owner's pool")
	}
}
