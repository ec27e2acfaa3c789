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

	"github.com/rollcall/rollcall/internal/workgroup"
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
//
// The extension is bounded (design: Stall extension). Stalls less than the
// bound (agent.presence_timeout) of normal running apart form one stall
// window. Under sustained overload the ticker misses its period again and
// again, and without a bound every such gap would restart every deadline,
// so an agent that stopped heartbeating could stay online for as long as
// the overload lasts. So a window extends a deadline by at most the bound
// (or the wait, when shorter) beyond where it stood before the window,
// except that the window's first stall after the wait began always
// restarts the wait in full (a single SIGSTOP of any length extends as it
// always did). A detector that fires continuously — its window lasts a
// bound past its first stall — says so in the log once, then every
// ContinuousLogEvery, and once more when the process has run a bound
// without a stall.

// DefaultThreshold is the gap of the ticker that counts as a stall (the
// server's setting; a threshold of 0 keeps the detector off, as in tests
// whose fake clock jumps on purpose).
const DefaultThreshold = 500 * time.Millisecond

// DefaultBound is the bound of a detector built with none: the default
// agent.presence_timeout.
const DefaultBound = 45 * time.Second

// ContinuousLogEvery is how often a detector that fires continuously logs
// again, after its first line.
const ContinuousLogEvery = time.Minute

// stallMemory is how long a stall is remembered: far beyond any deadline
// it could extend.
const stallMemory = 30 * time.Minute

// Detector records when the process could not run. Safe for
// concurrent use. A nil *Detector records nothing and extends
// nothing.
type Detector struct {
	clock     clockwork.Clock
	threshold time.Duration
	bound     time.Duration
	period    time.Duration
	log       *slog.Logger

	mu     sync.Mutex
	last   time.Time // the last check (a monotonic reading of clock)
	stalls []stall   // recorded, oldest first, within stallMemory
	// The current stall window: its number, when its first stall began,
	// when its first stall ended, and the end of its last stall (recorded
	// or not).
	win                     int
	winFrom, winFirst, tail time.Time
	// continuous: the window has lasted a bound past its first stall;
	// loggedAt, missed and missedFor are for its periodic log line.
	continuous bool
	loggedAt   time.Time
	missed     int
	missedFor  time.Duration
}

// stall is one recorded gap, in stall window win.
type stall struct {
	from, to time.Time
	win      int
}

// New returns a detector that counts a gap of at least threshold as a
// stall and extends a deadline by at most bound per stall window
// (agent.presence_timeout; <= 0 = DefaultBound), or nil (the detector that
// records nothing) when threshold <= 0.
func New(clock clockwork.Clock, threshold, bound time.Duration, log *slog.Logger) *Detector {
	if threshold <= 0 {
		return nil
	}
	if bound <= 0 {
		bound = DefaultBound
	}
	return &Detector{clock: clock, threshold: threshold, bound: bound, period: min(threshold/5, 250*time.Millisecond), log: log, last: clock.Now()}
}

// Run ticks until ctx ends (the liveness tracker's Start runs it).
func (d *Detector) Run(ctx context.Context) {
	if d == nil {
		return
	}
	d.Check()
	t := d.clock.NewTimer(d.period)
	defer t.Stop()
	workgroup.After(ctx.Done(), t, d.period, func() { d.Check() })
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
		if d.continuous && now.Sub(d.tail) >= d.bound {
			d.continuous = false
			d.log.Info("the server runs without stalls again", "quiet", now.Sub(d.tail).Round(time.Millisecond))
		}
		return 0
	}
	first := d.tail.IsZero() || from.Sub(d.tail) >= d.bound
	d.tail = now
	if first {
		d.win++
		d.winFrom, d.winFirst, d.continuous = from, now, false
	}
	switch {
	case first:
		d.log.Warn("the server could not run (stall); deadlines are extended by it", "stall", gap.Round(time.Millisecond))
	case !d.continuous && now.Sub(d.winFirst) >= d.bound:
		d.continuous, d.loggedAt, d.missed, d.missedFor = true, now, 0, 0
		d.log.Warn("the server stalls continuously; each deadline is extended by at most one bound until it runs that long without a stall",
			"window", now.Sub(d.winFrom).Round(time.Millisecond), "bound", d.bound)
	case d.continuous:
		d.missed++
		d.missedFor += gap
		if now.Sub(d.loggedAt) >= ContinuousLogEvery {
			d.log.Warn("the server still stalls continuously; each deadline is extended by at most one bound",
				"window", now.Sub(d.winFrom).Round(time.Millisecond), "stalls", d.missed, "stalled", d.missedFor.Round(time.Millisecond), "bound", d.bound)
			d.loggedAt, d.missed, d.missedFor = now, 0, 0
		}
	default:
		d.log.Debug("the server could not run (stall) again in the same stall window", "stall", gap.Round(time.Millisecond),
			"window", now.Sub(d.winFrom).Round(time.Millisecond))
	}
	d.stalls = append(d.stalls, stall{from: from, to: now, win: d.win})
	for len(d.stalls) > 0 && now.Sub(d.stalls[0].to) > stallMemory {
		d.stalls = d.stalls[1:]
	}
	if len(d.stalls) > 256 {
		d.stalls = d.stalls[len(d.stalls)-256:]
	}
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
// extended by each stall window with a stall that ended after base. A
// window moves the deadline to the end of its last stall + wait (never
// earlier than the deadline plus its stalled time after base), but by at
// most min(wait, bound) beyond where the deadline stood before the window
// — or to the end of its first stall + wait, when that is later: a single
// stall always restarts the wait in full.
func (d *Detector) Extend(base time.Time, wait time.Duration) time.Time {
	dl := base.Add(wait)
	if d == nil {
		return dl
	}
	ext := min(wait, d.bound)
	d.mu.Lock()
	defer d.mu.Unlock()
	i := len(d.stalls)
	for i > 0 && d.stalls[i-1].to.After(base) {
		i--
	}
	for i < len(d.stalls) {
		win, first := d.stalls[i].win, d.stalls[i].to
		var stalled time.Duration
		j := i
		for ; j < len(d.stalls) && d.stalls[j].win == win; j++ {
			from := d.stalls[j].from
			if from.Before(base) {
				from = base
			}
			stalled += d.stalls[j].to.Sub(from)
		}
		next := dl.Add(stalled)
		if e := d.stalls[j-1].to.Add(wait); e.After(next) {
			next = e
		}
		bound := dl.Add(ext)
		if e := first.Add(wait); e.After(bound) {
			bound = e
		}
		if next.After(bound) {
			next = bound
		}
		if next.After(dl) {
			dl = next
		}
		i = j
	}
	return dl
}
