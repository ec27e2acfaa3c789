package tracker

import (
	"context"
	"fmt"
	"time"
)

// The database's clock (design: Storage and instances: cross-instance time comparisons use
// the database's clock or owner leases, never one instance's wall clock).
// Every time the tracker stores (last_heartbeat_at), broadcasts (claims) or
// compares with what another instance stored is on the database's clock:
// t.now() is this process's clock plus the measured offset of the
// database's clock from it. Deadlines still run on this process's timers
// (durations do not depend on any wall clock), so a clock that is 20 s
// ahead or behind on one instance moves nothing.

// maxClockRTT is the longest round trip a measurement of the offset may
// take to be used: the midpoint estimate is off by at most half of it.
const maxClockRTT = time.Second

// now is the tracker's time: the database's clock as estimated from this
// process's clock (this process's clock without Config.DBClock), in
// µs like every stored time.
func (t *Tracker) now() time.Time {
	n := t.clock.Now().UTC().Truncate(time.Microsecond)
	if off := t.dbOff.Load(); off != 0 {
		n = n.Add(time.Duration(off)).Truncate(time.Microsecond)
	}
	return n
}

// clockOffset returns the measured offset of the database's clock from this
// process's (0 without Config.DBClock).
func (t *Tracker) clockOffset() time.Duration { return time.Duration(t.dbOff.Load()) }

// syncClock measures the offset of the database's clock once: the
// database's time against the midpoint of this process's clock around the
// read. Errors: the read failed, or took longer than maxClockRTT (the
// previous offset is kept).
func (t *Tracker) syncClock(ctx context.Context) error {
	if t.cfg.DBClock == nil {
		return nil
	}
	before := t.clock.Now()
	db, err := t.cfg.DBClock(ctx)
	after := t.clock.Now()
	if err != nil {
		return fmt.Errorf("reading the database's clock: %w", err)
	}
	rtt := after.Sub(before)
	if rtt > maxClockRTT {
		return fmt.Errorf("reading the database's clock took %s (more than %s); offset kept", rtt, maxClockRTT)
	}
	off := db.Sub(before.Add(rtt / 2))
	if old := time.Duration(t.dbOff.Swap(int64(off))); old-off > time.Second || off-old > time.Second {
		t.log.Info("liveness: offset of the database's clock", "offset", off.Round(time.Millisecond), "previous", old.Round(time.Millisecond))
	}
	return nil
}

// clockLoop measures the offset every ClockSyncInterval until ctx ends.
func (t *Tracker) clockLoop(ctx context.Context) {
	timer := t.clock.NewTimer(t.cfg.ClockSyncInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.Chan():
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := t.syncClock(sctx); err != nil && ctx.Err() == nil {
			t.log.Warn("liveness: database clock not measured", "err", err)
		}
		cancel()
		timer.Reset(t.cfg.ClockSyncInterval)
	}
}

// extend is stall.Detector.Extend for times on the tracker's clock: the
// deadline of a wait of d from base, restarted by a stall that ended after
// base.
func (t *Tracker) extend(base time.Time, d time.Duration) time.Time {
	if t.stalls == nil {
		return base.Add(d)
	}
	off := t.clockOffset()
	return t.stalls.Extend(base.Add(-off), d).Add(off)
}
