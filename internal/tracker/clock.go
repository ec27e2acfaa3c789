package tracker

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/stall"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// The database's clock (design: Database clock: cross-instance time
// comparisons use the database's clock or owner leases, never one
// instance's wall clock). Every time the tracker stores (last_heartbeat_at),
// broadcasts (claims) or compares with what another instance stored is on
// the database's clock: this process's clock plus the measured offset of the
// database's clock from it. Deadlines still run on this process's timers
// (durations do not depend on any wall clock), so a clock that is 20 s
// ahead or behind on one instance moves nothing.

// maxClockRTT is the longest round trip a measurement of the offset may
// take to be used: the midpoint estimate is off by at most half of it.
const maxClockRTT = time.Second

// dbClock is the tracker's clock: the process's clock plus the measured
// offset of the database's. Safe for concurrent use.
type dbClock struct {
	clock  clockwork.Clock
	read   func(context.Context) (time.Time, error) // Config.DBClock; nil = no offset
	every  time.Duration                            // Config.ClockSyncInterval
	stalls *stall.Detector
	log    *slog.Logger
	off    atomic.Int64 // database clock − this process's clock, ns
}

// now is the database's clock as estimated from this process's clock (this
// process's clock without Config.DBClock), in µs like every stored time.
func (c *dbClock) now() time.Time {
	n := c.clock.Now().UTC().Truncate(time.Microsecond)
	if off := c.off.Load(); off != 0 {
		n = n.Add(time.Duration(off)).Truncate(time.Microsecond)
	}
	return n
}

// offset returns the measured offset of the database's clock from this
// process's (0 without Config.DBClock).
func (c *dbClock) offset() time.Duration { return time.Duration(c.off.Load()) }

// sync measures the offset of the database's clock once: the database's
// time against the midpoint of this process's clock around the read.
// Errors: the read failed, or took longer than maxClockRTT (the previous
// offset is kept).
func (c *dbClock) sync(ctx context.Context) error {
	if c.read == nil {
		return nil
	}
	before := c.clock.Now()
	db, err := c.read(ctx)
	after := c.clock.Now()
	if err != nil {
		return fmt.Errorf("reading the database's clock: %w", err)
	}
	rtt := after.Sub(before)
	if rtt > maxClockRTT {
		return fmt.Errorf("reading the database's clock took %s (more than %s); offset kept", rtt, maxClockRTT)
	}
	off := db.Sub(before.Add(rtt / 2))
	if old := time.Duration(c.off.Swap(int64(off))); old-off > time.Second || off-old > time.Second {
		c.log.Info("liveness: offset of the database's clock", "offset", off.Round(time.Millisecond), "previous", old.Round(time.Millisecond))
	}
	return nil
}

// loop measures the offset every Config.ClockSyncInterval until ctx ends.
func (c *dbClock) loop(ctx context.Context) {
	timer := c.clock.NewTimer(c.every)
	defer timer.Stop()
	workgroup.After(ctx.Done(), timer, c.every, func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := c.sync(sctx); err != nil && ctx.Err() == nil {
			c.log.Warn("liveness: database clock not measured", "err", err)
		}
		cancel()
	})
}

// extend is stall.Detector.Extend for times on this clock: the deadline of
// a wait of d from base, restarted by a stall that ended after base.
func (c *dbClock) extend(base time.Time, d time.Duration) time.Time {
	if c.stalls == nil {
		return base.Add(d)
	}
	off := c.offset()
	return c.stalls.Extend(base.Add(-off), d).Add(off)
}
