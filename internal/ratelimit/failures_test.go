package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestFailuresInProcess: max failures of a key in its window are under
// the limit, the next is over it until the window ends (the wait says
// when); keys are independent; Blocked agrees; Prune drops ended windows.
func TestFailuresInProcess(t *testing.T) {
	f := NewFailures(3, time.Minute, nil, nil)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	for i := range 3 {
		if _, over := f.Fail(ctx, "hook:a", t0.Add(time.Duration(i)*time.Second)); over {
			t.Fatalf("failure %d over the limit", i+1)
		}
	}
	if _, blocked := f.Blocked("hook:a", t0.Add(3*time.Second)); !blocked {
		t.Fatal("Blocked after max failures: false")
	}
	wait, over := f.Fail(ctx, "hook:a", t0.Add(20*time.Second))
	if !over || wait != 40*time.Second {
		t.Fatalf("failure 4 = %v, wait %s; want over, 40s", over, wait)
	}
	if _, over := f.Fail(ctx, "hook:b", t0.Add(20*time.Second)); over {
		t.Fatal("another key shares the window")
	}
	if _, over := f.Fail(ctx, "hook:a", t0.Add(time.Minute)); over {
		t.Fatal("a new window is still over the limit")
	}
	f.Prune(t0.Add(2 * time.Minute))
	if n := len(f.keys); n != 0 {
		t.Fatalf("%d windows after Prune, want 0", n)
	}
}

// TestFailuresShared: with a shared counter the count is the counter's (a
// failure on another instance counts); a key known over the limit costs no
// call; a failing counter falls back to counting in process and reports
// the error.
func TestFailuresShared(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	ctx := context.Background()
	calls, others := 0, 2 // two failures already counted by another instance
	var fail error
	shared := SharedFunc(func(_ context.Context, keys []string, now time.Time, window time.Duration) ([]Window, error) {
		calls++
		if fail != nil {
			return nil, fail
		}
		others++
		return []Window{{Start: t0, Count: others}}, nil
	})
	var reported []error
	f := NewFailures(3, time.Minute, shared, func(err error) { reported = append(reported, err) })
	if _, over := f.Fail(ctx, "k", t0); over || calls != 1 {
		t.Fatal("failure 3 of 3 (two on the other instance) over the limit")
	}
	if _, over := f.Fail(ctx, "k", t0.Add(time.Second)); !over || calls != 1 {
		t.Fatalf("failure 4, the key known over the limit: over %v after %d calls; want over without a call", over, calls)
	}
	// The other instance spent the budget of "j": this instance's first
	// failure of it is over the limit.
	others = 3
	if wait, over := f.Fail(ctx, "j", t0.Add(10*time.Second)); !over || calls != 2 || wait != 50*time.Second {
		t.Fatalf("first failure here of a key spent elsewhere: over %v, wait %s, %d calls", over, wait, calls)
	}
	fail = errors.New("database down")
	if _, over := f.Fail(ctx, "other", t0); over || len(reported) != 1 || calls != 3 {
		t.Fatalf("counter down: over %v, reported %v, calls %d", over, reported, calls)
	}
	if w := f.keys["other"]; w.Count != 1 {
		t.Fatalf("counted in process: %+v", w)
	}
}
