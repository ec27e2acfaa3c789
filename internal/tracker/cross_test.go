package tracker_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/dbclock"
	"github.com/rollcall/rollcall/internal/skewclock"
	"github.com/rollcall/rollcall/internal/testkit"
	"github.com/rollcall/rollcall/internal/tracker"
)

// Cross-instance liveness without lag and without trusting an instance's
// wall clock (design: Database clock, Stall extension, Revocation within 5 s, Billing-mode audit): two trackers on
// one store and one bus, as two `rollcall serve` processes on one
// PostgreSQL are. Every assertion reads the other instance's
// GET /v1/agents/{ref}/status (Service.AgentStatus).

// crossCfg: presence timeout 3 s as in the reproduction, a persist
// interval far longer than any wait of the tests, so a row the other
// instance reads is fresh only if the owner wrote it at once.
var crossCfg = tracker.Config{PresenceTimeout: 3 * time.Second, PersistInterval: 60 * time.Second, HeartbeatInterval: time.Second}

// instanceOn builds another instance on the same store and bus with its
// own clock.
func (e *lvEnv) instanceOn(id string, cfg tracker.Config, clock clockwork.Clock) *app.Service {
	return e.newService(id, cfg, clock)
}

// statusOn is the agent's state as svc's GET …/status answers it.
func (e *lvEnv) statusOn(svc *app.Service, id string) string {
	e.t.Helper()
	st, err := svc.AgentStatus(e.t.Context(), e.admin, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.State
}

// waitStatus waits (bounded; the owner's transition write is asynchronous)
// until svc's status of the agent is want. It reads no clock of the test:
// the fake clock does not move while it waits.
func (e *lvEnv) waitStatus(svc *app.Service, id, want, what string) {
	e.t.Helper()
	deadline := time.Now().Add(testkit.Wait)
	for {
		got := e.statusOn(svc, id)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %s says %s, want %s (waited %s)", what, trk(svc).Instance(), got, want, testkit.Wait)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func forStores(t *testing.T, f func(t *testing.T, opts ...envOpt)) {
	t.Run("sqlite", func(t *testing.T) { f(t) })
	t.Run("postgres", func(t *testing.T) { f(t, onPostgres()) })
}

// TestCrossInstanceNoLag: the reproduction. An agent heartbeats to
// A; B answers online at once (the first heartbeat is written at once, not
// at the flush). It goes silent: A publishes offline and B answers offline
// at once (not ~54 s later). It heartbeats to A again: B answers online at
// once (not ~60 s later, at A's next flush). On the old code,
// B answered unknown, online, offline.
func TestCrossInstanceNoLag(t *testing.T) {
	forStores(t, func(t *testing.T, opts ...envOpt) {
		e := newLvEnv(t, append(opts, withConfig(crossCfg))...)
		a, b := e.svc, e.instance("b", crossCfg)
		for _, svc := range []*app.Service{a, b} {
			if err := trk(svc).Start(t.Context()); err != nil { // the flush loops
				t.Fatal(err)
			}
		}
		p := e.vend("wanderer")
		rec := e.record(b, e.admin)

		e.beat(a, p, online)
		rec.expect("wanderer", "online", nil)
		e.waitStatus(b, p.Agent.ID, "online", "first heartbeat on A")

		// Silent past the timeout: A publishes offline, B follows at once.
		e.clock.Advance(3 * time.Second)
		rec.expect("wanderer", "offline", nil)
		e.waitStatus(b, p.Agent.ID, "offline", "A published offline")

		// Back on A: announced to B at once.
		e.clock.Advance(10 * time.Second)
		e.beat(a, p, online)
		rec.expect("wanderer", "online", nil)
		e.waitStatus(b, p.Agent.ID, "online", "the agent came back on A")

		// While it keeps heartbeating to A, B never says offline — also
		// across A's flush and far past the persist interval.
		for i := range 150 {
			e.clock.Advance(time.Second)
			e.beat(a, p, online)
			if i%30 == 0 {
				// A's flush, once per simulated half persist interval: the
				// loop's own ticks run on a goroutine that may lag the fake
				// clock, and the rows B reads must not depend on that.
				if _, err := trk(a).Flush(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if st := e.statusOn(b, p.Agent.ID); st != "online" {
				row := e.agent(p.Agent.ID)
				t.Fatalf("after %d s of heartbeats to A, B says %s (row %s %s, written %d, now %s)", i+1, st, row.Liveness.State, fmtTime(row.Liveness.LastHeartbeatAt), trk(a).RowsWritten(), e.clock.Now())
			}
		}
		rec.none("steady heartbeats to A")
	})
}

// TestCrossInstanceSkewedClock: B's wall clock is 20 s ahead of (or
// behind) A's and the database's. With the times compared on the
// database's clock, B's status of an agent heartbeating only to A never
// flaps to offline (ahead), and B reports offline once the owner is gone
// and the takeover bound has passed on the database's clock, not 20 s
// later (behind). On the old code, B compared A's stored times
// with its own wall clock.
func TestCrossInstanceSkewedClock(t *testing.T) {
	for _, skew := range []time.Duration{20 * time.Second, -20 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			// A short persist interval, so the takeover bound (timeout + 2 ×
			// persist = 13 s) is smaller than the skew.
			cfg := tracker.Config{PresenceTimeout: 3 * time.Second, PersistInterval: 5 * time.Second, HeartbeatInterval: time.Second}
			e := newLvEnv(t, onPostgres(), withConfig(cfg))
			dbNow := func(context.Context) (time.Time, error) { return e.clock.Now(), nil } // the database's clock
			clockA := dbclock.New(e.clock, dbNow, 0, quietLog(t))
			clockB := dbclock.New(skewclock.New(e.clock, skew), dbNow, 0, quietLog(t))
			a := e.instanceOn("a2", cfg, clockA)
			b := e.instanceOn("b2", cfg, clockB)
			for i, svc := range []*app.Service{a, b} {
				if err := []*dbclock.Clock{clockA, clockB}[i].Sync(t.Context()); err != nil { // as StartLiveness does
					t.Fatal(err)
				}
				if err := trk(svc).Start(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if got := trk(b).ClockOffset(); got != -skew {
				t.Fatalf("B measured the database's clock at %s from its own, want %s", got, -skew)
			}
			p := e.vend("skewed")
			e.beat(a, p, online)
			e.waitStatus(b, p.Agent.ID, "online", "first heartbeat on A")
			for i := range 40 { // across several flushes of A
				e.clock.Advance(time.Second)
				e.beat(a, p, online)
				if i%5 == 0 { // A's flush once per persist interval (see TestCrossInstanceNoLag)
					if _, err := trk(a).Flush(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				if st := e.statusOn(b, p.Agent.ID); st != "online" {
					t.Fatalf("after %d s of heartbeats to A, B (clock %s) says %s", i+1, skew, st)
				}
			}
			last := e.clock.Now()
			// A's process is gone (it stops without publishing, as a killed
			// instance does): B answers from the row alone, on the database's
			// clock: online before the takeover bound, offline after it.
			if err := trk(a).Stop(t.Context()); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(last.Add(12 * time.Second).Sub(e.clock.Now()))
			if st := e.statusOn(b, p.Agent.ID); st != "online" {
				t.Fatalf("12 s after the last heartbeat (bound 13 s), B (clock %s) says %s", skew, st)
			}
			e.clock.Advance(2 * time.Second)
			if st := e.statusOn(b, p.Agent.ID); st != "offline" {
				t.Fatalf("14 s after the last heartbeat, its owner gone (bound 13 s), B (clock %s) says %s", skew, st)
			}
		})
	}
}
