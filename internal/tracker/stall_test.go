package tracker_test

import (
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/stall"
)

// TestStallExtendsDeadlines (design: Stall extension): the process could not run for
// 5 s (SIGSTOP, a long pause) — simulated by the fake clock jumping 5 s at
// once while the detector's ticks and the agent's deadline (3 s) are due.
// The heartbeat that waited on the socket meanwhile arrives just after:
// the agent is never published offline. A deadline that passes without a
// stall still makes it offline. On the old code the jump
// published offline.
func TestStallExtendsDeadlines(t *testing.T) {
	forStores(t, func(t *testing.T, opts ...envOpt) {
		e, p, rec := stallEnv(t, opts, "patient") // the detector ticks every 200 ms
		a := e.svc
		const timers = 3 // the flush loop, the stall detector, the agent's deadline
		step := func(n int, beat bool) {
			for i := range n {
				e.clock.Advance(250 * time.Millisecond)
				e.settle(timers)
				if beat && i%4 == 3 {
					e.beat(a, p, online)
				}
			}
		}
		step(20, true) // 5 s of heartbeats every second, the detector keeping up

		e.clock.Advance(5 * time.Second) // the stall: every timer was due meanwhile
		e.settle(timers)
		e.beat(a, p, online) // queued on the socket during the stall
		if st, _ := trk(a).LivenessState(p.Agent.ID); st != "online" {
			t.Fatalf("after the stall and the queued heartbeat: %s, want online", st)
		}
		step(20, true)
		rec.none("a stall of the server is not the agent's fault")

		// Silent without a stall: offline at the deadline as always.
		step(11, false)
		e.clock.Advance(250 * time.Millisecond) // 3 s after the last heartbeat
		rec.expect("patient", "offline", nil)
		if got := trk(a).Stalls().Since(t0); got < 5*time.Second || got > 6*time.Second {
			t.Errorf("stalled time recorded = %s, want the 5 s jump", got)
		}
	})
}

// TestContinuousStallBounded (design: Stall extension): under sustained
// overload the stall detector's ticks come 1.2 s apart (threshold 1 s) for
// 10 × the timeout (3 s) — simulated by the fake clock moving 1.2 s at a
// time — and the agent sends no heartbeat after the first: it is published
// offline within timeout + one timeout of extension of its last
// heartbeat, once. On the old code every gap restarted its deadline and it
// stayed online throughout.
func TestContinuousStallBounded(t *testing.T) {
	forStores(t, func(t *testing.T, opts ...envOpt) {
		e, p, rec := stallEnv(t, opts, "silent")
		a := e.svc
		cfg := crossCfg
		last := e.clock.Now()
		const timers = 3 // the flush loop, the stall detector, the agent's deadline
		e.settle(timers)
		var offlineAfter time.Duration
		for e.clock.Since(last) < 10*cfg.PresenceTimeout {
			e.clock.Advance(1200 * time.Millisecond)
			if offlineAfter == 0 && e.clock.Since(last) >= 2*cfg.PresenceTimeout {
				// The deadline is due by now at the latest.
				rec.expect("silent", "offline", nil)
				offlineAfter = e.clock.Since(last)
			}
			if offlineAfter == 0 {
				e.settle(timers)
			} else {
				e.settle(timers - 1) // offline: no deadline any more
			}
		}
		rec.none("offline once, then nothing")
		if st, _ := trk(a).LivenessState(p.Agent.ID); st != "offline" {
			t.Fatalf("after 10 × the timeout of stalls: %s, want offline", st)
		}
	})
}

// stallEnv starts a tracker on crossCfg with a stall threshold of 1 s and
// an agent handle that sent one heartbeat (online, recorded by rec).
func stallEnv(t *testing.T, opts []envOpt, handle string) (*lvEnv, domain.Principal, *recorder) {
	t.Helper()
	cfg := crossCfg
	cfg.StallThreshold = time.Second
	e := newLvEnv(t, append(opts, withConfig(cfg))...)
	if err := trk(e.svc).Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := e.vend(handle)
	rec := e.record(e.svc, e.admin)
	e.beat(e.svc, p, online)
	rec.expect(handle, "online", nil)
	return e, p, rec
}

// TestStallDetectorOff: without StallThreshold (tests on a fake clock that
// jumps on purpose) a jump is a jump: the deadline passes.
func TestStallDetectorOff(t *testing.T) {
	e := newLvEnv(t, withConfig(crossCfg))
	p := e.vend("jumper")
	rec := e.record(e.svc, e.admin)
	e.beat(e.svc, p, online)
	rec.expect("jumper", "online", nil)
	e.clock.Advance(5 * time.Second)
	rec.expect("jumper", "offline", nil)
	if trk(e.svc).Stalls() != nil {
		t.Fatal("a detector without StallThreshold")
	}
	var _ = stall.DefaultThreshold
}
