package fault

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/testkit"
)

// startPair starts A (role rollcall_a) and B (role rollcall_b) on one fresh
// database of c; envB adds to B's environment only.
func startPair(t *testing.T, c *cluster, envB []string, args ...string) (*server, *server, string) {
	t.Helper()
	db := c.newDatabase(t)
	a := startServer(t, "A", c, "rollcall_a", db, nil, args...)
	b := startServer(t, "B", c, "rollcall_b", db, envB, args...)
	return a, b, db
}

// waitListening waits until srv's bus listener is connected and LISTENing
// and srv answers /readyz 200.
func waitListening(t *testing.T, c *cluster, srvs ...*server) {
	t.Helper()
	for _, s := range srvs {
		waitFor(t, s.Name+"'s listener connected", func() bool { return len(c.listeners(t, s.Role, s.DB)) == 1 })
		waitFor(t, s.Name+" ready", func() bool { return ready(s) == 200 })
	}
}

// readyWatch samples /readyz of srv and then whether its listener exists;
// a 200 followed by "no listener" is a /readyz that said ready while the
// listener was down (the listener does not drop again by itself).
type readyWatch struct {
	mu         sync.Mutex
	violations int
	saw503     int
	stop       func()
	done       chan struct{}
}

func watchReady(t *testing.T, c *cluster, srv *server) *readyWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &readyWatch{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			code := ready(srv)
			pids, err := c.listenersErr(srv.Role, srv.DB)
			w.mu.Lock()
			if code == 503 {
				w.saw503++
			}
			if code == 200 && err == nil && len(pids) == 0 {
				w.violations++
			}
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(30 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(cancel)
	return w
}

func (w *readyWatch) result() (violations, saw503 int) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.violations, w.saw503
}

// (a) B's listener killed with pg_terminate_backend (and kept down by
// refusing B's logins), then at once a presence change and a todo push
// through A: B's /readyz is 503 while its listener is down; once it is
// back, B's /v1/events shows the transition and B's MCP session gets the
// doorbell within 2 s (design: Catch-up after a lost listener).
func TestFaultListenerKilled(t *testing.T) {
	c := sharedCluster(t)
	a, b, _ := startPair(t, c, nil)
	vend(t, a, "flip")
	bell := vend(t, a, "bell")
	sB := openSession(t, b, bell) // bell's only session: on B
	evA, evB := subscribe(t, a), subscribe(t, b)
	waitListening(t, c, a, b)

	c.setLogin(t, b.Role, false)
	t.Cleanup(func() { c.setLogin(t, b.Role, true) })
	if n := c.terminateListeners(t, b.Role, b.DB); n != 1 {
		t.Fatalf("terminated %d listeners of B, want 1", n)
	}
	setPresence(t, a, "flip", "out")
	todo := push(t, a, "bell", "rung across a listener reconnect")
	if _, ok := evA.Within(wait, transition("flip", "out")); !ok {
		t.Fatal("A never published the transition")
	}
	// B's listener is down (its logins are refused): /readyz must say so.
	got := 0
	deadline := time.Now().Add(5 * time.Second)
	for got != 503 && time.Now().Before(deadline) {
		got = ready(b)
		time.Sleep(50 * time.Millisecond)
	}
	if got != 503 {
		t.Errorf("B's /readyz answers %d while its bus listener is down, want 503", got)
	}
	if n := len(c.listeners(t, b.Role, b.DB)); n != 0 {
		t.Fatalf("B has %d listeners although its logins are refused", n)
	}

	c.setLogin(t, b.Role, true)
	allowed := time.Now()
	back := waitFor(t, "B's listener back", func() bool { return len(c.listeners(t, b.Role, b.DB)) == 1 })
	t.Logf("B's listener is back %s after its logins were allowed again", back.Sub(allowed).Round(time.Millisecond))
	if ev, ok := evB.Within(wait, transition("flip", "out")); !ok {
		t.Errorf("B's /v1/events never showed the transition published while its listener was down (lost transition)")
	} else if lag := ev.Read.Sub(back); lag > catchUp {
		t.Errorf("B's /v1/events showed the missed transition %s after its listener returned, want ≤ %s", lag, catchUp)
	}
	if d, ok := sB.bellWithin(wait, todo); !ok {
		t.Errorf("B's session never got the doorbell of the todo pushed while B's listener was down (lost doorbell)")
	} else if lag := d.Read.Sub(back); lag > catchUp {
		t.Errorf("B's session got the missed doorbell %s after its listener returned, want ≤ %s", lag, catchUp)
	}
	waitFor(t, "B ready again", func() bool { return ready(b) == 200 })
}

// (b) The database stopped for 3 s and started again, with one instance
// and with two: a todo pushed and a presence changed through A right after
// the start lose no doorbell (local or on B) and no transition (on every
// instance's /v1/events), each within 2 s of the instance's listener being
// back (local doorbells need no listener), and /readyz never says 200 while
// a listener is down.
func TestFaultDatabaseRestart(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d_instances", n), func(t *testing.T) { databaseRestart(t, n) })
	}
}

func databaseRestart(t *testing.T, n int) {
	c := newCluster(t)
	db := c.newDatabase(t)
	var srvs []*server
	for i, role := range []string{"rollcall_a", "rollcall_b"}[:n] {
		srvs = append(srvs, startServer(t, string(rune('A'+i)), c, role, db, nil))
	}
	a := srvs[0]
	vend(t, a, "flip")
	var bells []vended
	var sessions []*session
	var evs []*events
	for i, s := range srvs {
		bells = append(bells, vend(t, a, fmt.Sprintf("bell%d", i)))
		sessions = append(sessions, openSession(t, s, bells[i]))
		evs = append(evs, subscribe(t, s))
	}
	waitListening(t, c, srvs...)

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	for _, s := range srvs {
		if code := ready(s); code != 503 {
			t.Errorf("%s's /readyz answers %d while the database is stopped, want 503", s.Name, code)
		}
	}
	time.Sleep(3*time.Second - time.Since(stoppedAt)) // the outage itself
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var watches []*readyWatch
	for _, s := range srvs {
		watches = append(watches, watchReady(t, c, s))
	}
	// At once: a push per instance's agent and a presence change through A.
	todos := make([]string, n)
	for i := range srvs {
		todos[i] = push(t, a, bells[i].Handle, "pushed right after the database came back")
	}
	pushedAt := time.Now()
	setPresence(t, a, "flip", "out")
	changedAt := time.Now()
	for i, s := range srvs {
		back := waitFor(t, s.Name+"'s listener back", func() bool { return len(c.listeners(t, s.Role, s.DB)) == 1 })
		t.Logf("%s's listener back %s after the database started", s.Name, back.Sub(stoppedAt)-3*time.Second)
		from := later(back, pushedAt)
		if s == a {
			from = pushedAt // the local doorbell does not wait for the listener
		}
		if d, ok := sessions[i].bellWithin(wait, todos[i]); !ok {
			t.Errorf("%s's session never got the doorbell of the todo pushed after the restart (lost doorbell)", s.Name)
		} else if lag := d.Read.Sub(from); lag > catchUp {
			t.Errorf("%s's session got the doorbell %s late, want ≤ %s", s.Name, lag, catchUp)
		}
		if ev, ok := evs[i].Within(wait, transition("flip", "out")); !ok {
			t.Errorf("%s's /v1/events never showed the transition made after the restart (lost transition)", s.Name)
		} else if lag := ev.Read.Sub(later(back, changedAt)); lag > catchUp {
			t.Errorf("%s's /v1/events showed the transition %s late, want ≤ %s", s.Name, lag, catchUp)
		}
	}
	for i, w := range watches {
		if v, _ := w.result(); v > 0 {
			t.Errorf("%s's /readyz answered 200 %d times while its bus listener was down", srvs[i].Name, v)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// restCounter heartbeats over REST every period and counts the 2xx
// answers, and apart every other answer or failed request (a reset, a
// timeout) with the last one's text.
type restCounter struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	last       string
}

func (r *restCounter) run(ctx context.Context, srv *server, a vended, period time.Duration) {
	for ctx.Err() == nil {
		code, err := restHeartbeat(srv, a)
		switch {
		case code >= 200 && code < 300:
			r.ok.Add(1)
		case ctx.Err() == nil:
			r.failed.Add(1)
			r.mu.Lock()
			r.last = fmt.Sprintf("status %d: %v", code, err)
			r.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(period):
		}
	}
}

// failures is the number of heartbeats not answered 2xx and the last
// one's status and error.
func (r *restCounter) failures() (int64, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed.Load(), r.last
}

// noCloses fails t for every gateway connection of gw that was closed and
// every REST heartbeat of rest that failed: in these scenarios every agent
// keeps sending at half its interval against servers that stay up, so no
// close code is expected at all — neither 4009 (presence timeout: the
// server missed heartbeats it was sent) nor any other code, reset or
// failed dial (design: Stall extension, Liveness first).
func noCloses(t *testing.T, what string, gw []vended, stats []*gatewayStats, rest []vended, counters []*restCounter) {
	t.Helper()
	for i, ag := range gw {
		if n, last := stats[i].unexpected(); n > 0 {
			t.Errorf("gateway of %s closed %d times %s (%d with 4009); last: %s", ag.Handle, n, what, stats[i].closes4009.Load(), last)
		}
	}
	for i, ag := range rest {
		if n, last := counters[i].failures(); n > 0 {
			t.Errorf("REST heartbeat of %s failed %d times %s; last: %s", ag.Handle, n, what, last)
		}
	}
}

// fence changes a fence agent's presence through srv and waits until ev
// shows it: every event published before has then been read.
func fence(t *testing.T, srv *server, ev *events, handle, presence string) {
	t.Helper()
	setPresence(t, srv, handle, presence)
	if _, ok := ev.Within(wait, transition(handle, presence)); !ok {
		t.Fatalf("fence %s %s: no transition on %s", handle, presence, ev.srv.Name)
	}
}

// (c) The server stopped with SIGSTOP for 5 s, then SIGCONT, while its
// agents kept sending (gateway and REST, every 500 ms; interval 1 s,
// timeout 3 s): no agent is published offline, no gateway is closed with
// 4009 (design: Stall extension).
func TestFaultServerStopped(t *testing.T) {
	c := sharedCluster(t)
	db := c.newDatabase(t)
	a := startServer(t, "A", c, "rollcall_a", db, nil)
	vend(t, a, "fence")
	ev := subscribe(t, a)
	var gw []vended
	var rest []vended
	for i := 0; i < 5; i++ {
		gw = append(gw, vend(t, a, fmt.Sprintf("gw%d", i)))
	}
	for i := 0; i < 2; i++ {
		rest = append(rest, vend(t, a, fmt.Sprintf("rest%d", i)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	stats := make([]*gatewayStats, len(gw))
	for i, ag := range gw {
		stats[i] = &gatewayStats{}
		wg.Go(func() { gatewayAgent(ctx, a, ag, 500*time.Millisecond, stats[i]) })
	}
	counters := make([]*restCounter, len(rest))
	for i, ag := range rest {
		counters[i] = &restCounter{}
		wg.Go(func() { counters[i].run(ctx, a, ag, 500*time.Millisecond) })
	}
	for _, ag := range append(append([]vended{}, gw...), rest...) {
		waitFor(t, ag.Handle+" online", func() bool { return state(a, ag.Handle) == "online" })
	}

	a.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	time.Sleep(5 * time.Second) // the stall itself
	a.signal(t, syscall.SIGCONT)
	t.Logf("server stopped for %s", time.Since(stopped).Round(time.Millisecond))
	// Count heartbeats, not seconds: each agent has 8 more answered (≈ 4 s,
	// past the 3 s timeout), so a wrong deadline has had time to fire.
	acks0 := make([]int64, len(gw))
	for i := range gw {
		acks0[i] = stats[i].acks.Load()
	}
	oks0 := make([]int64, len(rest))
	for i := range rest {
		oks0[i] = counters[i].ok.Load()
	}
	waitFor(t, "8 more heartbeats answered for every agent", func() bool {
		for i := range gw {
			if stats[i].acks.Load() < acks0[i]+8 {
				return false
			}
		}
		for i := range rest {
			if counters[i].ok.Load() < oks0[i]+8 {
				return false
			}
		}
		return true
	})
	fence(t, a, ev, "fence", "out")
	noCloses(t, "after the server's own stall", gw, stats, rest, counters)
	if n := ev.Count(anyOffline); n > 0 {
		t.Errorf("%d agents published offline after the server's own stall: %v", n, a.offlineLogged())
	}
}

// (d) One agent, two MCP sessions on one instance; the client of one is a
// separate process, frozen with SIGSTOP, later killed: the live session,
// whose client claims each todo it is rung for, receives the doorbell of
// every todo (design: Doorbell failover; doorbell.failover_after 2 s).
func TestFaultFrozenClient(t *testing.T) {
	c := sharedCluster(t)
	db := c.newDatabase(t)
	a := startServer(t, "A", c, "rollcall_a", db, []string{"ROLLCALL_DOORBELL_FAILOVER_AFTER=2s"})
	duo := vend(t, a, "duo")
	frozen := startChild(t, a, duo)
	live := openClaimingSession(t, a, duo) // a working agent: it claims what it is rung for

	frozen.signal(t, syscall.SIGSTOP)
	var ids []string
	for i := 0; i < 7; i++ {
		ids = append(ids, push(t, a, "duo", fmt.Sprintf("while the other client is frozen %d", i)))
	}
	missing := live.missing(wait, ids)
	if missing > 0 {
		t.Errorf("the live session received %d of %d doorbells while the other client was frozen", len(ids)-missing, len(ids))
	}

	// The frozen client is killed; todos pushed in the same moment.
	frozen.signal(t, syscall.SIGKILL)
	var after []string
	for i := 0; i < 3; i++ {
		after = append(after, push(t, a, "duo", fmt.Sprintf("as the other client dies %d", i)))
	}
	missing = live.missing(wait, after)
	if missing > 0 {
		t.Errorf("the live session received %d of %d doorbells pushed as the other client was killed", len(after)-missing, len(after))
	}
}

// loadAgents is the load scenario's number of gateway agents: 100 under the
// race detector, 300 without; $ROLLCALL_FAULT_LOAD_AGENTS overrides.
func loadAgents() int {
	if n, err := strconv.Atoi(os.Getenv("ROLLCALL_FAULT_LOAD_AGENTS")); err == nil && n > 0 {
		return n
	}
	if raceEnabled {
		return 100
	}
	return 300
}

// (e) Load: N gateway agents (half on A, half on B) heartbeating every
// 500 ms, plus one REST agent every 1 s, interval 1 s, timeout 3 s, until
// every agent had 20 heartbeats answered: zero 4009 closes, zero offline
// events (design: Liveness first; scaled to a busy 2-core machine).
func TestFaultLoad(t *testing.T) {
	n := loadAgents()
	c := sharedCluster(t)
	a, b, _ := startPair(t, c, nil)
	vend(t, a, "fence")
	rest := vend(t, a, "rest")
	agents := make([]vended, n)
	errs := make([]error, n)
	var vwg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range agents {
		vwg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			agents[i], errs[i] = tryVend(a, fmt.Sprintf("load%d", i))
		})
	}
	vwg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	evA, evB := subscribe(t, a), subscribe(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	stats := make([]*gatewayStats, n)
	for i, ag := range agents {
		stats[i] = &gatewayStats{}
		srv := a
		if i%2 == 1 {
			srv = b
		}
		wg.Go(func() { gatewayAgent(ctx, srv, ag, 500*time.Millisecond, stats[i]) })
	}
	rc := &restCounter{}
	wg.Go(func() { rc.run(ctx, a, rest, time.Second) })
	// Bounded by progress, not by a total time: on a loaded machine the
	// answers come slower, but a stall (no answer for `wait`) fails.
	waitProgress(t, "20 heartbeats answered for every agent", func() (bool, int64) {
		done, sum := rc.ok.Load() >= 10, rc.ok.Load()
		for _, st := range stats {
			k := st.acks.Load()
			sum += k
			done = done && k >= 20
		}
		return done, sum
	})
	fence(t, a, evA, "fence", "out")
	fence(t, b, evB, "fence", "in")
	var closes4009, others int64
	for _, st := range stats {
		closes4009 += st.closes4009.Load()
		others += st.closes.Load()
	}
	t.Logf("%d gateway agents: %d 4009 closes, %d other closes/errors", n, closes4009, others)
	noCloses(t, "under load", agents, stats, []vended{rest}, []*restCounter{rc})
	for _, ev := range []*events{evA, evB} {
		if k := ev.Count(anyOffline); k > 0 {
			t.Errorf("%s published %d offline events under load (A logged %v, B logged %v)", ev.srv.Name, k, a.offlineLogged(), b.offlineLogged())
		}
	}
}

// (f) One instance's clock offset by ±20 s (ROLLCALL_TEST_CLOCK_OFFSET,
// test-only): an agent heartbeating only to the other instance never flaps
// offline on the skewed one, and the skewed one says offline within 2 s of
// the other publishing it (design: Database clock).
func TestFaultClockOffset(t *testing.T) { eachOffset(t, clockOffset, "20s", "-20s") }

// eachOffset runs fn as a parallel subtest per clock offset
// (ROLLCALL_TEST_CLOCK_OFFSET, a Go duration).
func eachOffset(t *testing.T, fn func(t *testing.T, off string), offs ...string) {
	for _, off := range offs {
		t.Run(off, func(t *testing.T) {
			t.Parallel()
			fn(t, off)
		})
	}
}

func clockOffset(t *testing.T, off string) {
	c := sharedCluster(t)
	a, b, _ := startPair(t, c, []string{"ROLLCALL_TEST_CLOCK_OFFSET=" + off})
	ag := vend(t, a, "steady")
	evA, evB := subscribe(t, a), subscribe(t, b)

	// The precondition: B, its wall clock off by off, stamps times on the
	// database's clock (leaseclock_test.go).
	stampedOnDBClock(t, c, b, ag.Handle)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	rc := &restCounter{}
	wg.Go(func() { rc.run(ctx, a, ag, 300*time.Millisecond) })
	waitFor(t, "online on A and on B", func() bool { return state(a, "steady") == "online" && state(b, "steady") == "online" })
	// 20 more heartbeats (≈ 6 s, twice the timeout), B read all along.
	n0, reads, flaps := rc.ok.Load(), 0, 0
	for rc.ok.Load() < n0+20 {
		if s := state(b, "steady"); s != "online" && s != "" {
			flaps++
		}
		reads++
		time.Sleep(50 * time.Millisecond)
	}
	if flaps > 0 {
		t.Errorf("B (clock %s) reported the agent not online on %d of %d reads while it heartbeats to A", off, flaps, reads)
	}
	if k := evB.Count(liveness("steady", "offline")); k > 0 {
		t.Errorf("B's /v1/events: the heartbeating agent went offline %d times", k)
	}
	cancel()
	offEv, ok := evA.Within(wait, liveness("steady", "offline"))
	if !ok {
		t.Fatal("the agent never went offline after it stopped")
	}
	offB := waitFor(t, "offline on B", func() bool { return state(b, "steady") == "offline" })
	if lag := offB.Sub(offEv.Read); lag > catchUp {
		t.Errorf("B (clock %s) said offline %s after the offline was published, want ≤ %s", off, lag, catchUp)
	}
}

// (g) Stale cross-instance liveness (persist interval at its default 60 s):
// an agent heartbeats to A, goes silent until offline, heartbeats again —
// B says online within 2 s; after A publishes it offline, B says offline
// within 2 s (design: Transitions written at once).
func TestFaultStaleLiveness(t *testing.T) {
	c := sharedCluster(t)
	a, b, _ := startPair(t, c, nil)
	ag := vend(t, a, "comeback")
	evA := subscribe(t, a)

	beat := func(what string, until func() bool) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rc := &restCounter{}
		done := make(chan struct{})
		go func() { rc.run(ctx, a, ag, 300*time.Millisecond); close(done) }()
		defer func() { cancel(); <-done }()
		waitFor(t, what, until)
	}
	// Online, then silent until offline on both.
	beat("online on A", func() bool { return state(a, "comeback") == "online" })
	if _, ok := evA.Within(wait, liveness("comeback", "offline")); !ok {
		t.Fatal("the agent never went offline on A")
	}
	waitFor(t, "offline on B", func() bool { return state(b, "comeback") == "offline" })

	// It comes back through A.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var first time.Time
	for first.IsZero() {
		if code, _ := restHeartbeat(a, ag); code == 200 {
			first = time.Now()
		} else if ctx.Err() != nil {
			t.Fatal(code)
		}
	}
	rc := &restCounter{}
	done := make(chan struct{})
	go func() { rc.run(ctx, a, ag, 300*time.Millisecond); close(done) }()
	onB := waitFor(t, "online on B again", func() bool { return state(b, "comeback") == "online" })
	if lag := onB.Sub(first); lag > catchUp {
		t.Errorf("B said online %s after the agent came back through A, want ≤ %s", lag, catchUp)
	}
	n0, flaps := rc.ok.Load(), 0
	for rc.ok.Load() < n0+15 {
		if s := state(b, "comeback"); s == "offline" {
			flaps++
		}
		time.Sleep(50 * time.Millisecond)
	}
	if flaps > 0 {
		t.Errorf("B reported the agent offline %d times while it heartbeats to A", flaps)
	}
	offs := evA.Count(liveness("comeback", "offline"))
	cancel()
	<-done
	waitFor(t, "A publishes the second offline", func() bool { return evA.Count(liveness("comeback", "offline")) > offs })
	ev := evA.Last(liveness("comeback", "offline"))
	offB := waitFor(t, "offline on B again", func() bool { return state(b, "comeback") == "offline" })
	if lag := offB.Sub(ev.Read); lag > catchUp {
		t.Errorf("B said offline %s after A published it, want ≤ %s", lag, catchUp)
	}
}

// (h) 40 MCP sessions that never send DELETE (past the 32-per-agent cap):
// every initialize succeeds — no 429 — and the agent's streaming session
// keeps its doorbells (eviction takes sessions without a stream first;
// design: Session cap).
func TestFaultSessionsNeverClosed(t *testing.T) {
	c := sharedCluster(t)
	db := c.newDatabase(t)
	a := startServer(t, "A", c, "rollcall_a", db, nil)
	ag := vend(t, a, "inspected")
	live := openSession(t, a, ag)
	for i := 1; i <= 40; i++ {
		code, retry := initializeOnly(t, a, ag, i%2 == 0)
		if code != 200 {
			t.Fatalf("initialize %d without DELETE answered %d (Retry-After %q), want 200", i, code, retry)
		}
	}
	id := push(t, a, "inspected", "after 40 abandoned sessions")
	if _, ok := live.bellWithin(wait, id); !ok {
		t.Error("the streaming session lost its doorbell to abandoned sessions")
	}
}

// initializeOnly sends an MCP initialize (and, if notify, the initialized
// notification) and never closes the session, as `claude mcp list` does.
func initializeOnly(t *testing.T, srv *server, a vended, notify bool) (int, string) {
	t.Helper()
	post := func(body, sid string) (*http.Response, error) {
		req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+a.Credential)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		return testkit.HTTP.Do(req)
	}
	resp, err := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"health-check","version":"1"}}}`, "")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !notify {
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	r2, err := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, resp.Header.Get("Mcp-Session-Id"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r2.Body)
	r2.Body.Close()
	return resp.StatusCode, ""
}
