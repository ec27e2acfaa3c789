package fault

import (
	"database/sql"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// Pools across instances and faults (design: Pools, Pool routing): two
// `rollcall serve` processes on one PostgreSQL database push, ring and
// claim one pool's todos with no in-memory coordination; a member killed
// holding a todo gives it back at lease expiry and the next member is
// rung; a lost listener loses no pooled ring (design: Catch-up after a lost
// listener). Every member is a working agent (it claims what it is rung
// for), and doorbell.failover_after is its default 30 s, so a second ring of
// a todo is a ring made twice, not a failover.

// (i) Members spread over both instances (two streaming on A, two on B),
// todos pushed to the pool alternately on A and B: each rings exactly one
// member, one streaming on the instance that took the push, the members
// of an instance in turn (least recently rung first), and is claimed once,
// by that member. Then A's members go out: the todos pushed on A are held
// there and rung on B (the todo-ready signal carrying the pool), again
// each exactly once and claimed once.
func TestFaultPoolTwoInstances(t *testing.T) {
	c := sharedCluster(t)
	a, b, db := startPair(t, c, nil)
	waitListening(t, c, a, b)
	tdb := c.openDatabase(t, db)
	ms := createPool(t, a, "spread", 4)
	hosts := []*server{a, a, b, b}
	ss := make([]*session, len(ms))
	for i, m := range ms {
		ss[i] = openClaimingSession(t, hosts[i], m)
	}
	evA := subscribe(t, a)

	const perPhase = 12 // 6 per instance, 3 per member
	pushAlternately := func(phase string) []string {
		var ids []string
		for i := range perPhase {
			ids = append(ids, pushTo(t, []*server{a, b}[i%2], "/v1/pools/spread/todos", fmt.Sprintf("%s %d", phase, i)))
		}
		return ids
	}
	first := pushAlternately("both in")
	rung := rungOnce(t, tdb, ms, ss, hosts, first)
	perMember := make([]int, len(ms))
	for i, id := range first {
		m := rung[id]
		if want := []*server{a, b}[i%2]; hosts[m] != want {
			t.Errorf("todo %d pushed on %s rang %s, streaming on %s", i, want.Name, ms[m].Handle, hosts[m].Name)
		}
		perMember[m]++
	}
	for i, n := range perMember {
		if n != perPhase/len(ms) {
			t.Errorf("%s was rung for %d of the %d todos, want %d (least recently rung first): %v", ms[i].Handle, n, perPhase, perPhase/len(ms), perMember)
		}
	}

	fence(t, a, evA, ms[0].Handle, "out")
	fence(t, a, evA, ms[1].Handle, "out")
	second := pushAlternately("A's members out")
	for id, m := range rungOnce(t, tdb, ms, ss, hosts, second, 0, 1) {
		if hosts[m] != b {
			t.Errorf("todo %s rang %s, out", id, ms[m].Handle)
		}
	}
}

// (j) A member's client, a separate process on A, claims the pooled todo
// it is rung for with an 8 s lease and is killed (SIGKILL) in the middle
// of it: the todo stays claimed until the lease ends, is back in the pool
// within one reaper pass after, rings the other member (streaming on B)
// and is claimed by it; the killed member was rung once.
func TestFaultPoolMemberKilled(t *testing.T) {
	const lease = 8 // seconds: the kill comes well within it on a busy machine
	c := sharedCluster(t)
	a, b, db := startPair(t, c, nil)
	waitListening(t, c, a, b)
	tdb := c.openDatabase(t, db)
	ms := createPool(t, a, "lease", 2)
	dying := startClaimingChild(t, a, ms[0], lease)
	heir := openClaimingSession(t, b, ms[1])

	id := pushTo(t, a, "/v1/pools/lease/todos", "held by a member that dies")
	waitFor(t, "the member on A claims the todo", func() bool {
		dying.mu.Lock()
		defer dying.mu.Unlock()
		return slices.Contains(dying.claimed, id)
	})
	var holder string
	var end time.Time
	if err := tdb.QueryRow(`SELECT coalesce(agent_id, ''), lease_expires_at FROM todos WHERE id = $1`, id).Scan(&holder, &end); err != nil {
		t.Fatal(err)
	}
	if holder != ms[0].ID {
		t.Fatalf("the todo is held by %q, want %s (%s)", holder, ms[0].ID, ms[0].Handle)
	}
	dying.signal(t, syscall.SIGKILL)
	<-dying.done
	if now := dbNow(t, c); !now.Before(end) {
		t.Fatalf("the member was killed %s after its lease ended, not in the middle of it", now.Sub(end))
	}

	bell, ok := heir.bellWithin(wait, id)
	if !ok {
		t.Fatalf("the member on B was never rung for the todo the killed member held")
	}
	if bell.Read.Before(end) {
		t.Errorf("the member on B was rung %s before the killed member's lease ended", end.Sub(bell.Read))
	}
	if lag := bell.Read.Sub(end); lag > reapEvery+catchUp {
		t.Errorf("the member on B was rung %s after the lease ended, want ≤ %s (reaper every %s)", lag, reapEvery+catchUp, reapEvery)
	}
	claimedBy(t, tdb, id, ms[1], 2)
	fenceSessions(t, []*session{heir}, []*server{b}, ms[1:])
	if n := bellsOf(heir, id); n != 1 {
		t.Errorf("the member on B was rung %d times for the todo, want 1", n)
	}
	dying.mu.Lock()
	defer dying.mu.Unlock()
	if n := countOf(dying.seen, id); n != 1 {
		t.Errorf("the killed member was rung %d times for the todo, want 1", n)
	}
}

// (k) B's LISTEN connection killed with pg_terminate_backend (and kept down
// by refusing B's logins) while todos are pushed to the pool on A, whose
// one member is out: A holds them, and its signal is lost to B. Once B's
// listener is back, B's members are rung for every one within 2 s (design:
// Catch-up after a lost listener), each todo exactly once, claimed once.
func TestFaultPoolListenerKilled(t *testing.T) {
	c := sharedCluster(t)
	a, b, db := startPair(t, c, nil)
	tdb := c.openDatabase(t, db)
	ms := createPool(t, a, "catchup", 3)
	hosts := []*server{a, b, b}
	ss := make([]*session, len(ms))
	for i, m := range ms {
		ss[i] = openClaimingSession(t, hosts[i], m)
	}
	evA := subscribe(t, a)
	fence(t, a, evA, ms[0].Handle, "out")
	waitListening(t, c, a, b)

	c.setLogin(t, b.Role, false)
	t.Cleanup(func() { c.setLogin(t, b.Role, true) })
	if n := c.terminateListeners(t, b.Role, b.DB); n != 1 {
		t.Fatalf("terminated %d listeners of B, want 1", n)
	}
	var ids []string
	for i := range 6 {
		ids = append(ids, pushTo(t, a, "/v1/pools/catchup/todos", fmt.Sprintf("pushed while B's listener is down %d", i)))
	}
	if n := len(c.listeners(t, b.Role, b.DB)); n != 0 {
		t.Fatalf("B has %d listeners although its logins are refused", n)
	}

	c.setLogin(t, b.Role, true)
	back := waitFor(t, "B's listener back", func() bool { return len(c.listeners(t, b.Role, b.DB)) == 1 })
	rung := rungOnce(t, tdb, ms, ss, hosts, ids, 0)
	for _, id := range ids {
		m := rung[id]
		if hosts[m] != b {
			t.Errorf("todo %s rang %s, out", id, ms[m].Handle)
			continue
		}
		bell, _ := ss[m].bellWithin(0, id)
		if lag := bell.Read.Sub(back); lag > catchUp {
			t.Errorf("todo %s rang %s %s after B's listener returned, want ≤ %s", id, ms[m].Handle, lag, catchUp)
		}
	}
}

// createPool vends n agents "<name>0"… through srv and creates pool name of
// them on queue "q".
func createPool(t *testing.T, srv *server, name string, n int) []vended {
	t.Helper()
	ms := make([]vended, n)
	handles := make([]string, n)
	for i := range ms {
		ms[i] = vend(t, srv, fmt.Sprintf("%s%d", name, i))
		handles[i] = ms[i].Handle
	}
	if code := do(srv, adminToken, "POST", "/v1/pools", map[string]any{"name": name, "queues": []string{"q"}, "members": handles}, nil); code != 201 {
		t.Fatalf("create pool %s: HTTP %d", name, code)
	}
	return ms
}

// rungOnce waits until every todo of ids has rung a member (ss[i] is the
// session of ms[i], streaming on hosts[i]; the members of out are out) and
// is claimed by it; then, every member's earlier doorbells read
// (fenceSessions; a member that is out is never rung, so it has no fence),
// it checks that each todo rang exactly one member exactly once. It
// returns the index of the member each todo rang.
func rungOnce(t *testing.T, db *sql.DB, ms []vended, ss []*session, hosts []*server, ids []string, out ...int) map[string]int {
	t.Helper()
	rung := map[string]int{}
	for _, id := range ids {
		waitFor(t, "todo "+id+" rings a member", func() bool {
			for i, s := range ss {
				if bellsOf(s, id) > 0 {
					rung[id] = i
					return true
				}
			}
			return false
		})
		claimedBy(t, db, id, ms[rung[id]], 1)
	}
	var fs []*session
	var fh []*server
	var fm []vended
	for i := range ss {
		if !slices.Contains(out, i) {
			fs, fh, fm = append(fs, ss[i]), append(fh, hosts[i]), append(fm, ms[i])
		}
	}
	fenceSessions(t, fs, fh, fm)
	for _, id := range ids {
		for i, s := range ss {
			want := 0
			if i == rung[id] {
				want = 1
			}
			if n := bellsOf(s, id); n != want {
				t.Errorf("todo %s rang %s %d times, want %d (it rang %s)", id, ms[i].Handle, n, want, ms[rung[id]].Handle)
			}
		}
	}
	return rung
}

// claimedBy waits until todo id is claimed by member m on its attempt-th
// claim (the attempt counts claims: a second claim would have counted).
func claimedBy(t *testing.T, db *sql.DB, id string, m vended, attempt int) {
	t.Helper()
	var state, holder string
	var got int
	waitFor(t, "todo "+id+" claimed by "+m.Handle, func() bool {
		err := db.QueryRow(`SELECT state, coalesce(agent_id, ''), attempt FROM todos WHERE id = $1`, id).Scan(&state, &holder, &got)
		return err == nil && state == "claimed"
	})
	if holder != m.ID || got != attempt {
		t.Errorf("todo %s claimed by %s on attempt %d, want %s (%s) on attempt %d", id, holder, got, m.ID, m.Handle, attempt)
	}
}

// fenceSessions pushes a todo to each member itself on the instance its
// session streams on and waits for its doorbell: every doorbell that
// session was sent before has then been read.
func fenceSessions(t *testing.T, ss []*session, hosts []*server, ms []vended) {
	t.Helper()
	for i, s := range ss {
		id := push(t, hosts[i], ms[i].Handle, "fence")
		if _, ok := s.bellWithin(wait, id); !ok {
			t.Fatalf("fence: %s's session on %s never got its doorbell", ms[i].Handle, hosts[i].Name)
		}
	}
}

// bellsOf counts the doorbells of todo id the session got.
func bellsOf(s *session, id string) int {
	n := 0
	for _, b := range s.Bells() {
		if b.TodoID() == id {
			n++
		}
	}
	return n
}

func countOf(ids []string, id string) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}
