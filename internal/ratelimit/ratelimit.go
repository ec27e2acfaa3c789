// Package ratelimit holds the per-key token buckets that bound heartbeats
// per principal and hook deliveries per hook, and the error a refused
// request carries. Times come from the caller (the injected clock), so the
// limiter has no clock of its own.
package ratelimit

import (
	"hash/maphash"
	"math"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// Error is the error of a request refused by a limit: code rate_limited
// (HTTP 429), with the time after which a retry succeeds (REST sends it as
// Retry-After, rounded up to whole seconds).
type Error struct {
	Err        *domain.Error // code rate_limited
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the *domain.Error.
func (e *Error) Unwrap() error { return e.Err }

// RetryAfterSeconds is RetryAfter rounded up to whole seconds, at least 1
// (the unit of the Retry-After header).
func (e *Error) RetryAfterSeconds() int {
	return max(1, int(math.Ceil(e.RetryAfter.Seconds())))
}

// Limiter holds one token bucket per key: burst tokens, refilled at rate
// per second. It is sharded to keep the hot path uncontended and safe for
// concurrent use.
type Limiter struct {
	rate   float64 // tokens per second
	burst  float64
	seed   maphash.Seed
	shards [32]shard
}

type shard struct {
	mu sync.Mutex
	m  map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// New returns a limiter of burst tokens per key refilled at rate tokens per
// second.
func New(rate float64, burst int) *Limiter {
	l := &Limiter{rate: rate, burst: float64(burst), seed: maphash.MakeSeed()}
	for i := range l.shards {
		l.shards[i].m = map[string]*bucket{}
	}
	return l
}

// Allow takes one token of key's bucket at now; when there is none it
// returns false and how long until one is available.
func (l *Limiter) Allow(key string, now time.Time) (bool, time.Duration) {
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

// Prune drops buckets that would be full at now (idle keys), so the map
// holds only keys seen recently.
func (l *Limiter) Prune(now time.Time) {
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
