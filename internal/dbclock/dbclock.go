// Package dbclock is the process's estimate of the database's clock
// (design: Database clock): every time an instance stamps or compares with
// what another instance stamps — leases (claim, renew, complete, reap),
// sweep, ring and failover due times, override until, token, refresh and
// console-session expiry, hook delivery windows, last heartbeats — is read
// from one Clock per process, never from the instance's own wall clock.
//
// A Clock is the process's clock plus the offset of the database's clock
// from it, measured by reading the database's time (the store's DBNow)
// once before serving and then every Interval. Only Now, Since and Until
// see the offset: timers, tickers and sleeps run on the process's clock,
// since durations do not depend on any wall clock.
package dbclock

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/workgroup"
)

// MaxRTT is the longest round trip a measurement may take to be used: the
// midpoint estimate is then off by at most half of it (0.5 s).
const MaxRTT = time.Second

// DefaultInterval is how often Run measures the offset again.
const DefaultInterval = 5 * time.Second

// syncTimeout bounds one measurement (a read that hangs keeps the offset).
const syncTimeout = 5 * time.Second

// Reader reads the database's clock (PostgreSQL clock_timestamp(); SQLite
// runs in this process and answers its clock).
type Reader func(context.Context) (time.Time, error)

// Clock is a clockwork.Clock whose wall time is the database's as
// estimated from the embedded process clock. Safe for concurrent use.
type Clock struct {
	clockwork.Clock // the process's clock: timers, tickers, sleeps

	read  Reader // nil = no offset (one instance, tests on a fake clock)
	every time.Duration
	log   *slog.Logger
	off   atomic.Int64 // database clock − process clock, ns
}

// New returns the database clock over base (nil = the real clock) measured
// with read (nil = never measured: Now is base's Now) every interval
// (≤ 0 = DefaultInterval); log (nil = slog.Default()) gets offset changes
// of more than a second and failed measurements.
func New(base clockwork.Clock, read Reader, interval time.Duration, log *slog.Logger) *Clock {
	if base == nil {
		base = clockwork.NewRealClock()
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	if log == nil {
		log = slog.Default()
	}
	return &Clock{Clock: base, read: read, every: interval, log: log}
}

// Of returns c itself when it is a *Clock, else a Clock over c that is
// never measured (no offset). Engines built on a plain clock in tests use
// it unchanged.
func Of(c clockwork.Clock) *Clock {
	if dc, ok := c.(*Clock); ok {
		return dc
	}
	return New(c, nil, 0, nil)
}

// Now is the process clock's now plus the measured offset (the monotonic
// reading is kept, so differences of two readings stay exact while the
// offset does not change).
func (c *Clock) Now() time.Time {
	n := c.Clock.Now()
	if off := c.off.Load(); off != 0 {
		n = n.Add(time.Duration(off))
	}
	return n
}

// Since is Now() − t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is t − Now().
func (c *Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// Base returns the process's clock (stall detection and other measures of
// this process's own run use it).
func (c *Clock) Base() clockwork.Clock { return c.Clock }

// Offset returns the measured offset of the database's clock from the
// process's (0 before the first measurement or without a Reader).
func (c *Clock) Offset() time.Duration { return time.Duration(c.off.Load()) }

// Measured reports whether the clock has a Reader (several instances may
// share the database, so the offset matters).
func (c *Clock) Measured() bool { return c.read != nil }

// Sync measures the offset once: the database's time against the midpoint
// of the process's clock around the read, bounded by 5 s and ctx. Without
// a Reader it does nothing. Errors (the previous offset is kept): the read
// failed, or its round trip took longer than MaxRTT.
func (c *Clock) Sync(ctx context.Context) error {
	if c.read == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	before := c.Clock.Now()
	db, err := c.read(ctx)
	after := c.Clock.Now()
	if err != nil {
		return fmt.Errorf("reading the database's clock: %w", err)
	}
	rtt := after.Sub(before)
	if rtt > MaxRTT {
		return fmt.Errorf("reading the database's clock took %s (more than %s); offset kept", rtt, MaxRTT)
	}
	off := db.Sub(before.Add(rtt / 2))
	if old := time.Duration(c.off.Swap(int64(off))); old-off > time.Second || off-old > time.Second {
		c.log.Info("offset of the database's clock", "offset", off.Round(time.Millisecond), "previous", old.Round(time.Millisecond))
	}
	return nil
}

// Run measures the offset every interval until ctx ends (returns at once
// without a Reader). A failed measurement is logged and keeps the offset.
func (c *Clock) Run(ctx context.Context) {
	if c.read == nil {
		return
	}
	timer := c.Clock.NewTimer(c.every)
	defer timer.Stop()
	workgroup.After(ctx.Done(), timer, c.every, func() {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("database clock not measured", "err", err)
		}
	})
}
