package stall

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestGapIsAStall: a gap of at least the threshold between two checks is a
// stall; a wait that spanned it runs its full length again from its end; a
// shorter gap is none; the nil detector extends nothing.
func TestGapIsAStall(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	d := New(clock, time.Second, 0, slog.New(slog.DiscardHandler))
	clock.Advance(200 * time.Millisecond)
	if got := d.Check(); got != 0 {
		t.Fatalf("a 200 ms gap recorded %s", got)
	}
	clock.Advance(5 * time.Second) // SIGSTOP
	if got := d.Check(); got != 5*time.Second {
		t.Fatalf("the 5 s gap recorded %s", got)
	}
	end := t0.Add(5200 * time.Millisecond)
	if got := d.Extend(t0, 3*time.Second); !got.Equal(end.Add(3 * time.Second)) {
		t.Errorf("a 3 s wait from before the stall ends %s, want its full length after the stall (%s)", got, end.Add(3*time.Second))
	}
	if got := d.Extend(end, 3*time.Second); !got.Equal(end.Add(3 * time.Second)) {
		t.Errorf("a wait begun after the stall ends %s, want %s", got, end.Add(3*time.Second))
	}
	var none *Detector
	if got := none.Extend(t0, time.Second); !got.Equal(t0.Add(time.Second)) || none.Check() != 0 || New(clock, 0, 0, nil) != nil {
		t.Error("the nil detector extends or records")
	}
}

// lines counts the log lines whose message contains a text.
type lines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }
func (l *lines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Message)
	l.mu.Unlock()
	return nil
}
func (l *lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lines) WithGroup(string) slog.Handler      { return l }
func (l *lines) count(text string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, text) {
			n++
		}
	}
	return n
}

// TestContinuousStallBounded (design: Stall extension): under sustained
// overload the ticker misses its period by 600 ms again and again for 10 ×
// the timeout (3 s). An agent whose last heartbeat came as it began goes
// offline within timeout + one timeout of extension (6 s), not never; the
// detector says once that it stalls continuously, then once a minute; a
// wait that begins while it does is bounded alike; after a bound of running
// without a stall a single stall extends as before. On the old code every
// gap restarted the wait and the agent stayed online throughout.
func TestContinuousStallBounded(t *testing.T) {
	const timeout = 3 * time.Second
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	log := &lines{}
	d := New(clock, 500*time.Millisecond, timeout, slog.New(log))
	base := t0 // the agent's last heartbeat
	var offlineAt time.Time
	for clock.Since(t0) < 10*timeout {
		clock.Advance(600 * time.Millisecond)
		d.Check()
		if now := clock.Now(); offlineAt.IsZero() && !now.Before(d.Extend(base, timeout)) {
			offlineAt = now
		}
	}
	if offlineAt.IsZero() || offlineAt.Sub(base) > 2*timeout || offlineAt.Sub(base) < timeout {
		t.Fatalf("offline %v after the last heartbeat (zero: never), want within [%s, %s]", offlineAt.Sub(base), timeout, 2*timeout)
	}
	if n := log.count("stalls continuously"); n != 1 {
		t.Fatalf("%d lines say the server stalls continuously, want 1 (once)", n)
	}
	// A heartbeat while it goes on: its deadline too is extended by at
	// most one timeout.
	base, offlineAt = clock.Now(), time.Time{}
	for clock.Since(t0) < 10*timeout+2*ContinuousLogEvery {
		clock.Advance(600 * time.Millisecond)
		d.Check()
		if now := clock.Now(); offlineAt.IsZero() && !now.Before(d.Extend(base, timeout)) {
			offlineAt = now
		}
	}
	if offlineAt.IsZero() || offlineAt.Sub(base) > 2*timeout {
		t.Fatalf("a wait begun during the continuous stall ended %v after it began (zero: never), want within %s", offlineAt.Sub(base), 2*timeout)
	}
	if n := log.count("still stalls continuously"); n != 2 {
		t.Fatalf("%d periodic lines over two minutes, want 2 (one a minute)", n)
	}
	// A bound of running without a stall ends the window.
	for range int(timeout / (100 * time.Millisecond)) {
		clock.Advance(100 * time.Millisecond)
		d.Check()
	}
	if n := log.count("without stalls again"); n != 1 {
		t.Fatalf("%d lines say the stalls ended, want 1", n)
	}
	base = clock.Now()
	clock.Advance(5 * time.Second) // a single SIGSTOP, longer than the timeout
	d.Check()
	if got, want := d.Extend(base, timeout), clock.Now().Add(timeout); !got.Equal(want) {
		t.Fatalf("after the overload a single stall extends to %s, want its full wait again (%s)", got, want)
	}
}

// TestWindowsExtendOnceEach: a stall window extends a deadline by at most
// one bound beyond where it stood (its first stall's restart aside), and a
// stall after a bound of normal running is a new window that restarts the
// wait in full, as a single stall always did.
func TestWindowsExtendOnceEach(t *testing.T) {
	const timeout = 3 * time.Second
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	d := New(clock, 500*time.Millisecond, timeout, slog.New(slog.DiscardHandler))
	step := func(gap time.Duration) { clock.Advance(gap); d.Check() }
	// The last heartbeat at t0; quiet until 2.5 s, then three 700 ms stalls
	// 100 ms apart: one window, which began at 2.5 s.
	for range 25 {
		step(100 * time.Millisecond)
	}
	for range 3 {
		step(700 * time.Millisecond)
		step(100 * time.Millisecond)
	}
	// Unbounded: the last stall's end (4.8 s) + 3 s = 7.8 s. Bounded: the
	// deadline (3 s) + one timeout = 6 s; the first stall's restart would
	// be 3.2 + 3 = 6.2 s, which is later and so stands.
	if got, want := d.Extend(t0, timeout), t0.Add(6200*time.Millisecond); !got.Equal(want) {
		t.Fatalf("deadline after the window = %s, want %s", got.Sub(t0), want.Sub(t0))
	}
	// 3 s without a stall, then a 2 s stall: a new window, a full restart.
	for range 30 {
		step(100 * time.Millisecond)
	}
	step(2 * time.Second)
	if got, want := d.Extend(t0, timeout), clock.Now().Add(timeout); !got.Equal(want) {
		t.Fatalf("deadline after a second window = %s, want its end + the timeout (%s)", got.Sub(t0), want.Sub(t0))
	}
}
