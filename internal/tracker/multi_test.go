package tracker_test

import (
	"context"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/testkit"
)

// settle waits (bounded) until the fake clock has n timers again: a timer
// callback runs on its own goroutine, and the tracker re-arms the timer
// (deadline or watch) when the callback is done.
func (e *lvEnv) settle(n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	if err := e.clock.BlockUntilContext(ctx, n); err != nil {
		e.t.Fatalf("the fake clock did not get back to %d timers: %v", n, err)
	}
}

func waitOwns(t *testing.T, svc *app.Service, id string, want bool) {
	t.Helper()
	deadline := time.Now().Add(testkit.Wait)
	for {
		if owned, _ := trk(svc).Owns(id); owned == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s owns %s = %v, want %v within %s", trk(svc).Instance(), id, !want, want, testkit.Wait)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOwnershipHandover: two instances (two trackers on one store and one
// bus). An agent's heartbeats move from A to B: A, whose own last heartbeat
// gets older than the timeout, never reports it offline, because B holds a
// fresher one (design: Billing-mode audit). When the agent stops, exactly one offline
// is published, by the owner, and A's watch follows silently.
func TestOwnershipHandover(t *testing.T) {
	e := newLvEnv(t)
	a := e.svc
	b := e.instance("b", lvCfg)
	// The flush loops' work is done by explicit Flush calls once per
	// simulated persist interval, so the rows the watch reads are
	// deterministic (the loops run on goroutines of their own).
	flush := func() {
		for _, svc := range []*app.Service{a, b} {
			if _, err := trk(svc).Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := e.vend("mover")
	rec := e.record(a, e.admin) // every hub gets every instance's events
	for i := range 10 {
		e.beat(a, p, body("api"))
		if i == 0 {
			rec.expect("mover", "online", ptr("api"))
		}
		e.clock.Advance(time.Second)
	}
	lastOnA := e.clock.Now().Add(-time.Second)
	// The load balancer moves the agent to B.
	e.beat(b, p, body("api"))
	waitOwns(t, a, p.Agent.ID, false)
	if owned, _ := trk(b).Owns(p.Agent.ID); !owned {
		t.Fatal("B does not own the agent after its heartbeat")
	}
	for e.clock.Now().Before(lastOnA.Add(4 * time.Minute)) { // far past A's own deadline and its watch's
		e.clock.Advance(time.Second)
		e.settle(2) // A's watch and B's deadline
		e.beat(b, p, body("api"))
		if e.clock.Now().Sub(t0)%time.Minute == 0 {
			flush()
		}
	}
	rec.none("heartbeats moved to B") // neither A's deadline nor B's first heartbeat published
	if st := state(t, a, p.Agent.ID); st != "online" {
		owned, _ := trk(a).Owns(p.Agent.ID)
		t.Errorf("A's view: %s, want online (it knows B's heartbeat from the claim); owned %v, now %s, stored %+v", st, owned, e.clock.Now(), e.agent(p.Agent.ID).Liveness)
	}
	// The agent stops: B reports offline once, at its last heartbeat + timeout.
	last := e.clock.Now()
	e.clock.Advance(45*time.Second - time.Microsecond)
	rec.none("1 µs before B's deadline")
	e.clock.Advance(time.Microsecond)
	rec.expect("mover", "offline", ptr("api"))
	flush()
	// Long after: A's watch reads the row B flushed and follows silently.
	for range 10 {
		e.clock.Advance(time.Minute)
	}
	waitState(t, a, p.Agent.ID, "offline")
	if owned, _ := trk(a).Owns(p.Agent.ID); owned {
		t.Error("A took the agent over although B reported it offline")
	}
	if got := e.agent(p.Agent.ID).Liveness; got.State != "offline" || !got.LastHeartbeatAt.Equal(last) {
		t.Errorf("stored %s at %s, want offline at B's last heartbeat %s", got.State, fmtTime(got.LastHeartbeatAt), last)
	}
	rec.none("after the watch")
}

// TestHandoverBothWays: heartbeats alternating between instances (a
// round-robin load balancer) never produce an offline, and no duplicate
// online.
func TestHandoverBothWays(t *testing.T) {
	e := newLvEnv(t)
	a, b := e.svc, e.instance("b", lvCfg)
	p := e.vend("pingpong")
	rec := e.record(b, e.admin)
	for i := range 300 { // 5 minutes, one heartbeat per second, alternating
		svc := a
		if i%2 == 1 {
			svc = b
		}
		e.beat(svc, p, online)
		if i == 0 {
			rec.expect("pingpong", "online", nil)
		}
		e.clock.Advance(time.Second)
	}
	rec.none("alternating heartbeats")
	e.clock.Advance(45 * time.Second)
	rec.expect("pingpong", "offline", nil)
	rec.none("after the offline")
}

// TestStartSyncClaims: an instance that starts while another holds fresh
// heartbeats of an agent stored online hands the agent over at once (the
// claim request), so its start-rule deadline never reports it offline.
func TestStartSyncClaims(t *testing.T) {
	e := newLvEnv(t)
	a := e.svc
	p := e.vend("steady")
	rec := e.record(a, e.admin)
	e.beat(a, p, online)
	rec.expect("steady", "online", nil)
	if _, err := trk(a).Flush(t.Context()); err != nil { // stored online
		t.Fatal(err)
	}
	c := e.instance("c", lvCfg)
	if err := trk(c).Start(t.Context()); err != nil { // loads "steady" stored online
		t.Fatal(err)
	}
	waitOwns(t, c, p.Agent.ID, false) // A answered the claim request
	for i := range 300 {
		e.clock.Advance(time.Second)
		e.settle(3) // A's deadline, C's watch and C's flush ticker
		e.beat(a, p, online)
		if i%60 == 59 { // A's flush loop, once per persist interval
			if _, err := trk(a).Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec.none("five minutes after C started (C's watch reads A's flushes)")
	wantState(t, c, p.Agent.ID, "online", "C's view")
}

// TestOwnerGoneTakeover: when the owning instance disappears (stopped, no
// restart) while the agent is stored online, another instance that tracked
// it takes over at last heartbeat + timeout + 2 × persist interval and
// reports it offline once: no ghost.
func TestOwnerGoneTakeover(t *testing.T) {
	e := newLvEnv(t)
	a, b := e.svc, e.instance("b", lvCfg)
	p := e.vend("orphan")
	rec := e.record(a, e.admin)
	e.beat(a, p, online)
	rec.expect("orphan", "online", nil)
	e.clock.Advance(time.Second)
	e.beat(b, p, online) // B owns it now
	waitOwns(t, a, p.Agent.ID, false)
	last := e.clock.Now()
	if _, err := trk(b).Flush(t.Context()); err != nil { // stored online
		t.Fatal(err)
	}
	if err := trk(b).Stop(t.Context()); err != nil { // B is gone: no offline from it
		t.Fatal(err)
	}
	e.clock.Advance(45*time.Second + 2*time.Minute - time.Microsecond)
	rec.none("before the watch is due")
	e.clock.Advance(time.Microsecond)
	rec.expect("orphan", "offline", nil)
	waitOwns(t, a, p.Agent.ID, true)
	if _, err := trk(a).Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := e.agent(p.Agent.ID).Liveness; got.State != "offline" || !got.LastHeartbeatAt.Equal(last) {
		t.Errorf("stored %s at %s, want offline at %s", got.State, fmtTime(got.LastHeartbeatAt), last)
	}
}
