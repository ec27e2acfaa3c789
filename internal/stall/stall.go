// Package stall detects when the process could not run — SIGSTOP, a long
// scheduling or GC pause, a suspended VM — so that waits spanning such a gap
// (the liveness tracker's offline deadlines, the gateway's 4009 deadlines)
// start again when it runs again (design: Stall extension).
package stall

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// A stall of the server is not the agents' fault. While the process could
// not run, the heartbeats of its agents wait on their sockets, and a deadline that passed meanwhile says nothing about the
// agents. The Detector notices such gaps with a monotonic ticker: a
// tick that comes far later than its period (at least the threshold) is a
// stall from the previous tick to this one. Every wait that spanned a
// stall starts again when the process runs again (Extend): the tracker's
// offline deadlines and the gateway's 4009 deadlines get their full period
// from the end of the stall, so the heartbeats that queued on the sockets
// meanwhile — thousands of frames the server then reads as fast as it can
// — are read before any deadline is judged.
//
// A deadline's callback may run before the ticker's after the process
// resumes (both were due); it calls Check first, so the stall is always
// recorded before any deadline is judged.

// DefaultThreshold is the gap of the ticker that counts as a stall (the
// server's setting; a threshold of 0 keeps the detector off, as in tests
// whose fake clock jumps on purpose).
const DefaultThreshold = 500 * time.Millisecond

// stallMemory is how long a stall is remembered: far beyond any deadline
// it could extend.
const stallMemory = 30 * time.Minute

// Detector records when the process could not run. Safe for
// concurrent use. A nil *Detector records nothing and extends
// nothing.
type Detector struct {
	clock     clockwork.Clock
	threshold time.Duration
	period    time.Duration
	log       *slog.Logger

	mu     sync.Mutex
	last   time.Time // the last check (a monotonic reading of clock)
	stalls []stall   // oldest first, within stallMemory
}

type stall struct{ from, to time.Time }

// New returns a detector that counts a gap of at least threshold as a
// stall, or nil (the detector that records nothing) when threshold <= 0.
func New(clock clockwork.Clock, threshold time.Duration, log *slog.Logger) *Detector {
	if threshold <= 0 {
		return nil
	}
	return &Detector{clock: clock, threshold: threshold, period: min(threshold/5, 250*time.Millisecond), log: log, last: clock.Now()}
}

// Run ticks until ctx ends (the liveness tracker's Start runs it).
func (d *Detector) Run(ctx context.Context) {
	if d == nil {
		return
	}
	d.Check()
	t := d.clock.NewTimer(d.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		d.Check()
		t.Reset(d.period)
	}
}

// Check notes that the process runs now; a gap since the previous check of
// at least the threshold is recorded as a stall. It returns the stall it
// recorded (zero when none).
func (d *Detector) Check() time.Duration {
	if d == nil {
		return 0
	}
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	gap := now.Sub(d.last)
	if gap <= 0 {
		return 0
	}
	from := d.last
	d.last = now
	if gap < d.threshold {
		return 0
	}
	d.stalls = append(d.stalls, stall{from: from, to: now})
	for len(d.stalls) > 0 && now.Sub(d.stalls[0].to) > stallMemory {
		d.stalls = d.stalls[1:]
	}
	if len(d.stalls) > 256 {
		d.stalls = d.stalls[len(d.stalls)-256:]
	}
	d.log.Warn("the server could not run (stall); deadlines are extended by it", "stall", gap.Round(time.Millisecond))
	return gap
}

// Since returns how long the process was stalled after t: the deadlines of
// waits that began at t move by this much.
func (d *Detector) Since(t time.Time) time.Duration {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var sum time.Duration
	for i := len(d.stalls) - 1; i >= 0; i-- {
		s := d.stalls[i]
		if !s.to.After(t) {
			break
		}
		from := s.from
		if from.Before(t) {
			from = t
		}
		sum += s.to.Sub(from)
	}
	return sum
}

// Extend returns the deadline of a wait of d that began at base: base + d,
// or, when a stall ended after base, the end of the last such stall + d
// (never earlier than base + d + the stalled time).
func (d *Detector) Extend(base time.Time, wait time.Duration) time.Time {
	dl := base.Add(wait)
	if d == nil {
		return dl
	}
	since := d.Since(base)
	if since == 0 {
		return dl
	}
	dl = dl.Add(since)
	d.mu.Lock()
	end := d.stalls[len(d.stalls)-1].to
	d.mu.Unlock()
	if e := end.Add(wait); e.After(dl) {
		dl = e
	}
	return dl
}
