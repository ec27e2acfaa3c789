package edge

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/ratelimit"
)

// windows is a shared failure counter in memory with the semantics of the
// PostgreSQL store's CountFailures (whose own test runs on PostgreSQL), so
// two limiters here stand for two instances on one database.
type windows struct {
	mu    sync.Mutex
	m     map[string]ratelimit.Window
	calls int
	err   error
}

func (w *windows) CountFailures(_ context.Context, keys []string, now time.Time, window time.Duration) ([]ratelimit.Window, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.err != nil {
		return nil, w.err
	}
	out := make([]ratelimit.Window, len(keys))
	for i, k := range keys {
		cur, ok := w.m[k]
		if !ok || !cur.Start.After(now.Add(-window)) {
			cur = ratelimit.Window{Start: now}
		}
		cur.Count++
		w.m[k] = cur
		out[i] = cur
	}
	return out, nil
}

// TestLimiterShared (design: Limits shared by instances): two limiters on
// one shared counter allow max failures together; the one that never saw
// the address refuses its first failure there (the count is the
// counter's); Blocked and a key known over the limit cost no call; a
// failing counter falls back to counting in process.
func TestLimiterShared(t *testing.T) {
	clock := clockwork.NewFakeClock()
	shared := &windows{m: map[string]ratelimit.Window{}}
	a, b := NewLimiter(4, time.Minute, clock), NewLimiter(4, time.Minute, clock)
	a.SetShared(shared, slog.New(slog.DiscardHandler))
	b.SetShared(shared, slog.New(slog.DiscardHandler))
	for i := range 4 {
		l := []*Limiter{a, b}[i%2]
		if _, blocked := l.FailBlocked("192.0.2.1", ""); blocked {
			t.Fatalf("failure %d of 4 refused", i+1)
		}
	}
	c := NewLimiter(4, time.Minute, clock)
	c.SetShared(shared, slog.New(slog.DiscardHandler))
	if _, blocked := c.Blocked("192.0.2.1", ""); blocked || shared.calls != 4 {
		t.Fatalf("Blocked on an instance that saw nothing: %v after %d calls; want false without a call", blocked, shared.calls)
	}
	wait, blocked := c.FailBlocked("192.0.2.1", "")
	if !blocked || wait != time.Minute {
		t.Fatalf("first failure on a third instance: %v, %s; want refused for the minute", blocked, wait)
	}
	calls := shared.calls
	if _, blocked := c.FailBlocked("192.0.2.1", ""); !blocked || shared.calls != calls {
		t.Fatalf("a key known over the limit: %v, %d calls (was %d); want refused without a call", blocked, shared.calls, calls)
	}
	clock.Advance(time.Minute)
	if _, blocked := a.FailBlocked("192.0.2.1", ""); blocked {
		t.Fatal("refused in the next minute")
	}
	shared.err = errors.New("database down")
	for range 4 {
		b.Fail("198.51.100.7", "rct_abcdefgh")
	}
	if _, blocked := b.Blocked("198.51.100.7", ""); !blocked {
		t.Fatal("the counter down: failures were not counted in process")
	}
}
