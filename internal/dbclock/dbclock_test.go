package dbclock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

var quiet = slog.New(slog.DiscardHandler)

// db is a database whose clock is the process's plus skew, and whose read
// takes rtt of the process's clock (the answer is taken at the midpoint).
type db struct {
	clock *clockwork.FakeClock
	skew  time.Duration
	rtt   time.Duration
	err   error
	reads int
}

func (d *db) read(context.Context) (time.Time, error) {
	d.reads++
	d.clock.Advance(d.rtt / 2)
	at := d.clock.Now().Add(d.skew)
	d.clock.Advance(d.rtt - d.rtt/2)
	return at, d.err
}

func TestOffsetApplied(t *testing.T) {
	for _, skew := range []time.Duration{25 * time.Second, -25 * time.Second} {
		base := clockwork.NewFakeClockAt(t0)
		d := &db{clock: base, skew: skew, rtt: 200 * time.Millisecond}
		c := New(base, d.read, 0, quiet)
		if got := c.Now(); !got.Equal(base.Now()) {
			t.Fatalf("before the first measurement Now is %s, want the process's %s", got, base.Now())
		}
		if err := c.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		if c.Offset() != skew {
			t.Fatalf("offset %s, want %s", c.Offset(), skew)
		}
		if got, want := c.Now(), base.Now().Add(skew); !got.Equal(want) {
			t.Fatalf("Now %s, want the database's %s", got, want)
		}
		future := base.Now().Add(skew + 40*time.Second)
		if got := c.Until(future); got != 40*time.Second {
			t.Fatalf("Until a lease end 40 s after the database's now: %s", got)
		}
		if got := c.Since(base.Now().Add(skew - 3*time.Second)); got != 3*time.Second {
			t.Fatalf("Since: %s, want 3s", got)
		}
		// Timers run on the process's durations: the offset moves none.
		fired := make(chan struct{})
		c.AfterFunc(time.Second, func() { close(fired) })
		base.Advance(time.Second)
		<-fired
	}
}

func TestRTTBound(t *testing.T) {
	base := clockwork.NewFakeClockAt(t0)
	d := &db{clock: base, skew: 10 * time.Second, rtt: 100 * time.Millisecond}
	c := New(base, d.read, 0, quiet)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.skew, d.rtt = 30*time.Second, MaxRTT+time.Millisecond
	if err := c.Sync(t.Context()); err == nil {
		t.Fatal("a read slower than MaxRTT must be refused")
	}
	if c.Offset() != 10*time.Second {
		t.Fatalf("offset %s after a slow read, want the previous 10s", c.Offset())
	}
	d.rtt = MaxRTT // the bound itself is used: off by at most 0.5 s
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.Offset() != 30*time.Second {
		t.Fatalf("offset %s, want 30s", c.Offset())
	}
}

func TestKeptOnError(t *testing.T) {
	base := clockwork.NewFakeClockAt(t0)
	d := &db{clock: base, skew: -7 * time.Second}
	c := New(base, d.read, 0, quiet)
	if err := c.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.skew, d.err = 20*time.Second, errors.New("connection refused")
	if err := c.Sync(t.Context()); err == nil {
		t.Fatal("a failed read must be an error")
	}
	if c.Offset() != -7*time.Second {
		t.Fatalf("offset %s after a failed read, want the previous -7s", c.Offset())
	}
}

func TestRunMeasuresEveryInterval(t *testing.T) {
	base := clockwork.NewFakeClockAt(t0)
	measured := make(chan time.Duration, 1)
	skew := 5 * time.Second
	read := func(context.Context) (time.Time, error) {
		now := base.Now().Add(skew)
		select {
		case measured <- skew:
		default:
		}
		return now, nil
	}
	c := New(base, read, 2*time.Second, quiet)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	if err := base.BlockUntilContext(t.Context(), 1); err != nil { // Run's timer
		t.Fatal(err)
	}
	base.Advance(2 * time.Second)
	<-measured
	deadline := time.Now().Add(10 * time.Second)
	for c.Offset() != skew {
		if time.Now().After(deadline) {
			t.Fatalf("offset %s after one interval, want %s", c.Offset(), skew)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

func TestWithoutReader(t *testing.T) {
	base := clockwork.NewFakeClockAt(t0)
	c := Of(base)
	if c.Measured() || c.Sync(t.Context()) != nil || !c.Now().Equal(t0) || c.Base() != clockwork.Clock(base) {
		t.Fatal("a clock without a reader is the process's clock")
	}
	if Of(c) != c {
		t.Fatal("Of must return a *Clock unchanged")
	}
	c.Run(t.Context()) // returns at once
}
