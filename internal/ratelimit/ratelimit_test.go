package ratelimit

import (
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// TestBucket: burst tokens at once, then one per 1/rate; the wait says
// when the next one comes; keys are independent; Prune drops idle keys.
func TestBucket(t *testing.T) {
	l := New(10, 3) // 10 per second, burst 3
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i := range 3 {
		if ok, _ := l.Allow("a", t0); !ok {
			t.Fatalf("token %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a", t0)
	if ok || wait != 100*time.Millisecond {
		t.Fatalf("after the burst: %v, wait %s; want refused, 100ms", ok, wait)
	}
	if ok, _ := l.Allow("b", t0); !ok {
		t.Fatal("another key shares the bucket")
	}
	if ok, _ := l.Allow("a", t0.Add(100*time.Millisecond)); !ok {
		t.Fatal("no token after 1/rate")
	}
	l.Prune(t0.Add(time.Second)) // 3 tokens refill in 300 ms: both keys idle
	for i := range l.shards {
		if n := len(l.shards[i].m); n != 0 {
			t.Fatalf("shard %d holds %d buckets after Prune", i, n)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {100 * time.Millisecond, 1}, {time.Second, 1}, {1100 * time.Millisecond, 2}} {
		e := &Error{Err: &domain.Error{Code: domain.CodeRateLimited, Detail: "x"}, RetryAfter: tc.d}
		if got := e.RetryAfterSeconds(); got != tc.want {
			t.Errorf("RetryAfterSeconds(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
