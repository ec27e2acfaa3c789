package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Shared counts failures of keys in fixed windows in a store every
// instance uses (design: Limits shared by instances): one call counts one
// failure of each of keys at now and returns each key's window after the
// count, in the order of keys. The PostgreSQL store implements it in one
// statement; nil (SQLite, one instance) counts in process.
type Shared interface {
	CountFailures(ctx context.Context, keys []string, now time.Time, window time.Duration) ([]Window, error)
}

// SharedFunc adapts a function to Shared.
type SharedFunc func(ctx context.Context, keys []string, now time.Time, window time.Duration) ([]Window, error)

// CountFailures calls f.
func (f SharedFunc) CountFailures(ctx context.Context, keys []string, now time.Time, window time.Duration) ([]Window, error) {
	return f(ctx, keys, now, window)
}

// Window is one key's fixed window: when it started and the failures
// counted in it.
type Window struct {
	Start time.Time
	Count int
}

// SharedTimeout bounds one shared count; past it (or on any error) the
// failure is counted in process only, so a slow database never holds a
// refusal up for long.
const SharedTimeout = 2 * time.Second

// Failures counts failures per key in fixed windows: the first failure of
// a key opens a window of the given length; once a key has max failures in
// its window, further failures in it are over the limit. With a Shared
// store the count is the database's, for every instance together; the
// process keeps a mirror of each key's last known window, so Blocked never
// does I/O and a failure of a key already known to be over the limit is
// refused without a statement (its count could only grow; the window does
// not move). Safe for concurrent use.
type Failures struct {
	max    int
	window time.Duration
	shared Shared
	onErr  func(error)

	mu   sync.Mutex
	keys map[string]Window
}

// NewFailures returns a limiter of max failures per window per key,
// counted in shared when it is not nil; onErr (nil = ignore) hears of a
// shared count that failed and was counted in process instead.
func NewFailures(max int, window time.Duration, shared Shared, onErr func(error)) *Failures {
	if onErr == nil {
		onErr = func(error) {}
	}
	return &Failures{max: max, window: window, shared: shared, onErr: onErr, keys: map[string]Window{}}
}

// Blocked reports whether key has, as far as this process knows, used up
// its failures at now, and how long until its window ends. No I/O.
func (f *Failures) Blocked(key string, now time.Time) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.keys[key]
	if !ok || w.Count < f.max {
		return 0, false
	}
	left := w.Start.Add(f.window).Sub(now)
	return left, left > 0
}

// Fail counts one failure of key at now and reports whether it is over the
// limit (the key had max failures in its window before this one) and how
// long until the window ends. ctx bounds the shared count (at most
// SharedTimeout).
func (f *Failures) Fail(ctx context.Context, key string, now time.Time) (time.Duration, bool) {
	if wait, blocked := f.Blocked(key, now); blocked {
		return wait, true // over the limit already: no statement (the window does not move)
	}
	if f.shared != nil {
		cctx, cancel := context.WithTimeout(ctx, SharedTimeout)
		ws, err := f.shared.CountFailures(cctx, []string{key}, now, f.window)
		cancel()
		if err == nil && len(ws) == 1 {
			f.mu.Lock()
			f.keys[key] = ws[0]
			f.mu.Unlock()
			return f.over(ws[0], now)
		}
		f.onErr(err)
	}
	f.mu.Lock()
	w, ok := f.keys[key]
	if !ok || !now.Before(w.Start.Add(f.window)) {
		w = Window{Start: now}
	}
	w.Count++
	f.keys[key] = w
	f.mu.Unlock()
	return f.over(w, now)
}

// over reports whether w, a window just counted, went past max.
func (f *Failures) over(w Window, now time.Time) (time.Duration, bool) {
	if w.Count <= f.max {
		return 0, false
	}
	left := w.Start.Add(f.window).Sub(now)
	return max(left, time.Second), true
}

// Prune drops the windows that have ended at now.
func (f *Failures) Prune(now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, w := range f.keys {
		if !now.Before(w.Start.Add(f.window)) {
			delete(f.keys, k)
		}
	}
}
