package tracker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/testkit"
	"github.com/rollcall/rollcall/internal/tracker"
)

// Owner leases (design: Owner lease): instance A dies (its fake clock
// stops: no timer, no renewal, no flush runs there again), instance B
// takes its agents over when A's lease expires on the database's clock and
// publishes each offline once, one timeout after the take-over. The
// persist interval (60 s) is far longer than any wait, so without the lease
// B's watch would take over only at timeout + 2 × 60 s.

// leaseCfg: presence timeout 3 s, lease 1.5 s renewed every 0.5 s.
var leaseCfg = tracker.Config{PresenceTimeout: 3 * time.Second, PersistInterval: 60 * time.Second, HeartbeatInterval: time.Second,
	OwnerLease: 1500 * time.Millisecond, OwnerLeaseRenew: 500 * time.Millisecond}

// leasePair starts A on its own fake clock and B on the environment's,
// both at t0.
func leasePair(t *testing.T, e *lvEnv) (a, b *app.Service, clockA *clockwork.FakeClock) {
	t.Helper()
	clockA = clockwork.NewFakeClockAt(t0)
	a = e.instanceOn("lease-a", leaseCfg, clockA)
	b = e.instanceOn("lease-b", leaseCfg, e.clock)
	for _, svc := range []*app.Service{a, b} {
		if err := trk(svc).Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, clockA
}

// advanceTo moves the clocks to t0 + d (only those given).
func advanceTo(d time.Duration, clocks ...*clockwork.FakeClock) {
	for _, c := range clocks {
		c.Advance(t0.Add(d).Sub(c.Now()))
	}
}

// stepAlive moves both clocks to t0 + d with A alive: A renews its lease
// at the new time before B's clock (and lease loop) gets there, whatever
// the order the loops' goroutines run in; so does B.
func stepAlive(t *testing.T, a, b *app.Service, clockA, clockB *clockwork.FakeClock, d time.Duration) {
	t.Helper()
	for c := clockA.Now().Sub(t0) + 250*time.Millisecond; c <= d; c += 250 * time.Millisecond {
		advanceTo(c, clockA)
		checkLeases(t, a)
		advanceTo(c, clockB)
		checkLeases(t, b)
	}
}

// leaseRun is a lease pair (leasePair) on its environment, with a
// recorder of B's published presence changes.
type leaseRun struct {
	e      *lvEnv
	a, b   *app.Service
	clockA *clockwork.FakeClock
	rec    *recorder
}

// startLease builds the environment (leaseCfg and opts), the pair and B's
// recorder at t0, and vends one agent per handle, each heartbeating online
// to A once (its online seen on B); the agents come back in that order.
func startLease(t *testing.T, opts []envOpt, handles ...string) (*leaseRun, []domain.Principal) {
	t.Helper()
	l := &leaseRun{e: newLvEnv(t, append(opts, withConfig(leaseCfg))...)}
	l.a, l.b, l.clockA = leasePair(t, l.e)
	l.rec = l.e.record(l.b, l.e.admin)
	ps := make([]domain.Principal, len(handles))
	for i, h := range handles {
		ps[i] = l.e.vend(h)
	}
	for _, p := range ps {
		l.e.beat(l.a, p, online)
		l.rec.expect(p.Agent.Handle, "online", nil)
	}
	return l, ps
}

// aliveTo steps both clocks to t0 + d with A alive (stepAlive), then each
// of ps heartbeats online to A.
func (l *leaseRun) aliveTo(t *testing.T, d time.Duration, ps ...domain.Principal) {
	t.Helper()
	stepAlive(t, l.a, l.b, l.clockA, l.e.clock, d)
	for _, p := range ps {
		l.e.beat(l.a, p, online)
	}
}

func checkLeases(t *testing.T, svc *app.Service) {
	t.Helper()
	if _, err := trk(svc).CheckLeases(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestOwnerLeaseKilledInstance: two agents heartbeat to A until t0+2 s;
// "steady" was flushed at its last heartbeat, "stale" only at its first
// (t0). A dies at t0+2 s (its lease, renewed then, expires at t0+3.5 s).
// B takes over at t0+3.5 s, not before, and publishes both offline one
// timeout later (t0+6.5 s, within timeout + 2 s of the death) — each once,
// and stale not early although its stored heartbeat is 2 s old.
func TestOwnerLeaseKilledInstance(t *testing.T) {
	forStores(t, func(t *testing.T, opts ...envOpt) {
		l, ps := startLease(t, opts, "steady", "stale")
		e, a, b, rec, steady, stale := l.e, l.a, l.b, l.rec, ps[0], ps[1]
		waitIdle(t, a) // the first heartbeats are stored (t0), the later ones not
		for s := 1; s <= 2; s++ {
			l.aliveTo(t, time.Duration(s)*time.Second, ps...)
		}
		// The last heartbeat of steady is stored (a flush of steady only).
		if _, err := trk(a).FlushAgents(t.Context(), steady.Agent.ID); err != nil {
			t.Fatal(err)
		}
		checkLeases(t, a) // A's last renewal: its lease expires at t0+3.5 s
		// A is dead from here: clockA never moves again.

		advanceTo(3500*time.Millisecond-time.Millisecond, e.clock)
		checkLeases(t, b)
		for _, p := range []domain.Principal{steady, stale} {
			if owned, _ := trk(b).Owns(p.Agent.ID); owned {
				t.Fatalf("B owns %s before A's lease expired", p.Agent.Handle)
			}
		}
		rec.none("before A's lease expired")

		advanceTo(3500*time.Millisecond, e.clock)
		checkLeases(t, b)
		// Taken over at t0+3.5 s: the deadline of both is one timeout from
		// then (t0+6.5 s), whatever their stored heartbeat says — stale's
		// real last heartbeat (t0+2 s) is not in the store, so its stored
		// one (t0) must not make it offline early.
		for _, p := range []domain.Principal{steady, stale} {
			if owned, _ := trk(b).Owns(p.Agent.ID); !owned {
				t.Fatalf("B does not own %s after the take-over", p.Agent.Handle)
			}
			if st := e.statusOn(b, p.Agent.ID); st != "online" {
				t.Fatalf("%s at the take-over on B: %s, want online", p.Agent.Handle, st)
			}
		}
		advanceTo(6500*time.Millisecond-time.Millisecond, e.clock)
		for _, p := range []domain.Principal{steady, stale} {
			if st := e.statusOn(b, p.Agent.ID); st != "online" {
				t.Fatalf("%s 1 ms before its deadline on B: %s, want online", p.Agent.Handle, st)
			}
		}
		rec.none("before the deadline of the take-over")
		advanceTo(6500*time.Millisecond, e.clock)
		got := map[string]bool{}
		for range 2 {
			ev, d := rec.next()
			if ev.Kind != events.KindPresenceChanged || d.State != "offline" {
				t.Fatalf("event = %s %s, want agent.presence_changed offline", ev.Kind, ev.Data)
			}
			got[d.Agent] = true
		}
		if !got["steady"] || !got["stale"] {
			t.Fatalf("offline at t0+6.5 s: %v, want steady and stale", got)
		}
		for _, p := range []domain.Principal{steady, stale} {
			e.waitStatus(b, p.Agent.ID, "offline", p.Agent.Handle+"'s deadline on B")
			waitRow(t, e, p.Agent.ID, "offline") // the transition is written at once
		}
		advanceTo(20*time.Second, e.clock)
		checkLeases(t, b)
		rec.none("after both went offline (published once)")
	})
}

// TestOwnerLeaseReconnectNoFalseOffline: A dies at t0+2 s; one agent
// reconnects to B before the take-over (t0+2.5 s), the other after it but
// before its deadline (t0+4 s): no offline is ever published, and the store
// names B as their owner.
func TestOwnerLeaseReconnectNoFalseOffline(t *testing.T) {
	forStores(t, func(t *testing.T, opts ...envOpt) {
		l, ps := startLease(t, opts, "early", "late")
		e, a, b, rec, early, late := l.e, l.a, l.b, l.rec, ps[0], ps[1]
		l.aliveTo(t, 2*time.Second, ps...)
		if _, err := trk(a).Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkLeases(t, a) // expires at t0+3.5 s; A is dead from here

		advanceTo(2500*time.Millisecond, e.clock)
		e.beat(b, early, online)
		advanceTo(3500*time.Millisecond, e.clock)
		checkLeases(t, b)                   // takes late over: deadline t0+6.5 s
		waitOwns(t, b, late.Agent.ID, true) // B's loop may have won the take-over and still be adopting
		advanceTo(4*time.Second, e.clock)
		e.beat(b, late, online)
		for s := 5; s <= 15; s++ {
			advanceTo(time.Duration(s)*time.Second, e.clock)
			e.beat(b, early, online)
			e.beat(b, late, online)
			checkLeases(t, b)
		}
		rec.none("both reconnected to B within the timeout")
		for _, p := range []domain.Principal{early, late} {
			if st := e.statusOn(b, p.Agent.ID); st != "online" {
				t.Errorf("%s on B: %s, want online", p.Agent.Handle, st)
			}
			if o, err := e.store.AgentOwner(t.Context(), p.Agent.ID); err != nil || o != "lease-b" {
				t.Errorf("stored owner of %s = %q, %v; want lease-b", p.Agent.Handle, o, err)
			}
		}
	})
}

// TestOwnerLeaseCleanShutdown: A stops cleanly at t0+2 s (flush, then its
// lease is released): B takes its agents over at its next check at once,
// deadlines one timeout after the take-over (t0+5 s). The agent that
// reconnects to B at t0+4 s is never offline; the other is offline at
// t0+5 s exactly, once.
func TestOwnerLeaseCleanShutdown(t *testing.T) {
	forStores(t, func(t *testing.T, opts ...envOpt) {
		l, ps := startLease(t, opts, "back", "gone")
		e, a, b, rec, back, gone := l.e, l.a, l.b, l.rec, ps[0], ps[1]
		l.aliveTo(t, 2*time.Second, ps...)
		if err := trk(a).Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkLeases(t, b)
		for _, p := range []domain.Principal{back, gone} {
			waitOwns(t, b, p.Agent.ID, true)
		}
		advanceTo(4*time.Second, e.clock)
		e.beat(b, back, online)
		advanceTo(5*time.Second-time.Millisecond, e.clock)
		rec.none("before the deadline")
		advanceTo(5*time.Second, e.clock)
		rec.expect("gone", "offline", nil)
		advanceTo(6*time.Second, e.clock)
		e.beat(b, back, online)
		advanceTo(7*time.Second, e.clock)
		e.beat(b, back, online)
		rec.none("back kept heartbeating to B")
	})
}

// waitRow waits (bounded) until the stored state of the agent is want.
func waitRow(t *testing.T, e *lvEnv, id, want string) {
	t.Helper()
	deadline := time.Now().Add(testkit.Wait)
	for e.agent(id).Liveness.State != want {
		if time.Now().After(deadline) {
			t.Fatalf("stored state of %s = %s, want %s within %s", id, e.agent(id).Liveness.State, want, testkit.Wait)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitIdle waits (bounded) until svc's transition writer has written
// everything queued.
func waitIdle(t *testing.T, svc *app.Service) {
	t.Helper()
	deadline := time.Now().Add(testkit.Wait)
	for !trk(svc).TransitionsIdle() {
		if time.Now().After(deadline) {
			t.Fatalf("transitions of %s not written within %s", trk(svc).Instance(), testkit.Wait)
		}
		time.Sleep(time.Millisecond)
	}
}

// outageStore fails every lease renewal while down is set (a database
// outage as both instances see it).
type outageStore struct {
	store.Store
	down *atomic.Bool
}

func (s outageStore) RenewOwnerLease(ctx context.Context, p store.RenewOwnerLeaseParams) (bool, error) {
	if s.down.Load() {
		return false, errors.New("database unreachable")
	}
	return s.Store.RenewOwnerLease(ctx, p)
}

// TestOwnerLeaseAfterOutage: neither instance can renew its lease from
// t0+1 s to t0+5 s (a database outage); A keeps receiving heartbeats.
// When the database is back, B's first pass finds A's lease expired but
// takes nothing over: B has not renewed its own for one lease yet. A renews
// meanwhile, and B never publishes A's agent offline.
func TestOwnerLeaseAfterOutage(t *testing.T) {
	var down atomic.Bool
	forStores(t, func(t *testing.T, opts ...envOpt) {
		down.Store(false)
		l, ps := startLease(t, append(opts, wrapStore(func(s store.Store) store.Store { return outageStore{Store: s, down: &down} })), "survivor")
		e, a, b, clockA, rec, p := l.e, l.a, l.b, l.clockA, l.rec, ps[0]
		stepAlive(t, a, b, clockA, e.clock, time.Second)

		down.Store(true)
		for s := 2; s <= 5; s++ {
			advanceTo(time.Duration(s)*time.Second, clockA, e.clock)
			e.beat(a, p, online)
			_, _ = trk(a).CheckLeases(t.Context()) // fails: the database is down
			_, _ = trk(b).CheckLeases(t.Context())
		}
		down.Store(false)
		checkLeases(t, b) // A's lease expired at t0+2.5 s; B renewed just now
		if owned, _ := trk(b).Owns(p.Agent.ID); owned {
			t.Fatal("B took A's agent over on its first renewal after the outage")
		}
		checkLeases(t, a)
		for c := 5250 * time.Millisecond; c <= 9*time.Second; c += 250 * time.Millisecond {
			advanceTo(c, clockA)
			if c%time.Second == 0 {
				e.beat(a, p, online)
			}
			checkLeases(t, a)
			advanceTo(c, e.clock)
			checkLeases(t, b)
		}
		if owned, _ := trk(b).Owns(p.Agent.ID); owned {
			t.Fatal("B took A's agent over though A renewed its lease after the outage")
		}
		rec.none("A kept its agent through the outage")
	})
}
