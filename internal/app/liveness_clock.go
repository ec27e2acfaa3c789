package app

import (
	"context"
	"fmt"
	"time"
)

// The database's clock (DESIGN.md §4: cross-instance time comparisons use
// the database's clock or owner leases, never one instance's wall clock).
// Every time the tracker stores (last_heartbeat_at), broadcasts (claims) or
// compares with what another instance stored is on the database's clock:
// t.now() is this process's clock plus the measured offset of the
// database's clock from it. Deadlines still run on this process's timers
// (durations do not depend on any wall clock), so a clock that is 20 s
// ahead or behind on one instance moves nothing (issue 8 item 1).

// maxClockRTT is the longest round trip a measurement of the offset may
// take to be used: the midpoint estimate is off by at most half of it.
const maxClockRTT = time.Second

// now is the tracker's time: the database's clock as estimated from this
// process's clock (this process's clock without LivenessConfig.DBClock), in
// µs like every stored time.
func (t *Tracker) now() time.Time {
	n := t.s.now()
	if off := t.dbOff.Load(); off != 0 {
		n = n.Add(time.Duration(off)).Truncate(time.Microsecond)
	}
	return n
}

// ClockOffset returns the measured offset of the database's clock from this
// process's (0 without LivenessConfig.DBClock).
func (t *Tracker) ClockOffset() time.Duration { return time.Duration(t.dbOff.Load()) }

// SyncClock measures the offset of the database's clock once: the
// database's time against the midpoint of this process's clock around the
// read. Errors: the read failed, or took longer than maxClockRTT (the
// previous offset is kept).
func (t *Tracker) SyncClock(ctx context.Context) error {
	if t.cfg.DBClock == nil {
		return nil
	}
	before := t.s.clock.Now()
	db, err := t.cfg.DBClock(ctx)
	after := t.s.clock.Now()
	if err != nil {
		return fmt.Errorf("reading the database's clock: %w", err)
	}
	rtt := after.Sub(before)
	if rtt > maxClockRTT {
		return fmt.Errorf("reading the database's clock took %s (more than %s); offset kept", rtt, maxClockRTT)
	}
	off := db.Sub(before.Add(rtt / 2))
	if old := time.Duration(t.dbOff.Swap(int64(off))); old-off > time.Second || off-old > time.Second {
		t.s.log.Info("liveness: offset of the database's clock", "offset", off.Round(time.Millisecond), "previous", old.Round(time.Millisecond))
	}
	return nil
}

// clockLoop measures the offset every ClockSyncInterval until ctx ends.
func (t *Tracker) clockLoop(ctx context.Context) {
	timer := t.s.clock.NewTimer(t.cfg.ClockSyncInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.Chan():
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := t.SyncClock(sctx); err != nil && ctx.Err() == nil {
			t.s.log.Warn("liveness: database clock not measured", "err", err)
		}
		cancel()
		timer.Reset(t.cfg.ClockSyncInterval)
	}
}

// extend is StallDetector.Extend for times on the tracker's clock: the
// deadline of a wait of d from base, restarted by a stall that ended after
// base.
func (t *Tracker) extend(base time.Time, d time.Duration) time.Time {
	if t.stalls == nil {
		return base.Add(d)
	}
	off := t.ClockOffset()
	return t.stalls.Extend(base.Add(-off), d).Add(off)
}
