package app

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// Default per-principal heartbeat rate limit (issue 4 item 2): a token
// bucket of DefaultHeartbeatBurst tokens refilled at DefaultHeartbeatRate
// per second. An adapter heartbeating every second (or the load tool's 5/s)
// is never limited; a runaway loop is.
const (
	DefaultHeartbeatRate  = 10.0
	DefaultHeartbeatBurst = 20
)

// RateLimitedError is the error of a heartbeat refused by the rate limit:
// code rate_limited (HTTP 429), with the time after which a retry succeeds
// (REST sends it as Retry-After, rounded up to whole seconds).
type RateLimitedError struct {
	Err        *domain.Error // code rate_limited
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string { return e.Err.Error() }

// Unwrap returns the *domain.Error.
func (e *RateLimitedError) Unwrap() error { return e.Err }

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1
// (the unit of the Retry-After header).
func (e *RateLimitedError) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// rateLimiter holds one token bucket per key, sharded to keep the hot path
// uncontended. Times come from the caller (the injected clock).
type rateLimiter struct {
	rate   float64 // tokens per second
	burst  float64
	seed   maphash.Seed
	shards [32]rlShard
}

type rlShard struct {
	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newRateLimiter(rate float64, burst int) *rateLimiter {
	l := &rateLimiter{rate: rate, burst: float64(burst), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = map[string]*bucket{}
	}
	return l
}

// allow takes one token of key's bucket at now; when there is none it
// returns false and how long until one is available.
func (l *rateLimiter) allow(key string, now time.Time) (bool, time.Duration) {
	sh := &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	b := sh.m[key]
	if b == nil {
		b = &bucket{tokens: l.burst, last: now}
		sh.m[key] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(l.burst, b.tokens+el*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return false, wait
}

// prune drops buckets that would be full at now (idle keys), so the map
// holds only principals that heartbeated recently.
func (l *rateLimiter) prune(now time.Time) {
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, b := range sh.m {
			if now.Sub(b.last) >= full {
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
}
