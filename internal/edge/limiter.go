package edge

import (
	"cmp"
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/ratelimit"
)

// Limiter counts failed authentications per key (a client IP, a credential
// prefix) in fixed windows: the first failure of a key opens a window of
// Window; once a key has max failures in its window, Blocked reports it
// until the window ends. Counts are per process unless the limiter has a
// shared counter (SetShared; PostgreSQL): then every counted failure is one
// statement in the database and all instances together allow max (design:
// Limits shared by instances), while the table here mirrors each key's last
// known window, so Blocked never does I/O (a request under the limit costs
// nothing extra) and a failure of a key already known to be over the limit
// costs no statement. A shared count that fails is counted here instead.
// It is safe for concurrent use.
//
// Memory is bounded without forgetting who is blocked: expired windows are
// swept when the table reaches sweepAt keys (then each time it has doubled
// since the last sweep, so the cost per failure stays amortized O(1)); a
// table still at hardCap after the sweep evicts a quarter of its keys,
// those with the fewest failures first (oldest first among equals), so a
// flood of one-off failures from fresh addresses pushes out other one-off
// failures and never a blocked client.
type Limiter struct {
	max    int
	window time.Duration
	clock  clockwork.Clock
	shared ratelimit.Shared // nil = count in process
	log    *slog.Logger

	mu      sync.Mutex
	keys    map[string]*failWindow
	sweepAt int // table size of the next sweep (at least the constant sweepAt)
}

type failWindow struct {
	start time.Time
	n     int
}

const (
	sweepAt = 10_000
	hardCap = 100_000
)

// NewLimiter returns a limiter allowing max failures per window.
func NewLimiter(max int, window time.Duration, clock clockwork.Clock) *Limiter {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Limiter{max: max, window: window, clock: clock, keys: map[string]*failWindow{}}
}

// SetShared makes the limiter count in shared (nil = in process) and log a
// failed shared count to log. Call it before the limiter is used.
func (l *Limiter) SetShared(shared ratelimit.Shared, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	l.shared, l.log = shared, log
}

// Fail counts one failure of the client ip and, when cred != "", of the
// credential prefix cred.
func (l *Limiter) Fail(ip, cred string) { l.count(ip, cred) }

// FailBlocked counts one failure like Fail and reports whether ip or cred
// had used up its failures before it (so this one is refused with 429), and
// how long until the longer of their windows ends. With a shared counter
// the answer is the database's: failures on other instances count.
func (l *Limiter) FailBlocked(ip, cred string) (time.Duration, bool) { return l.count(ip, cred) }

func limiterKeys(ip, cred string) []string {
	if cred == "" {
		return []string{"ip:" + ipKey(ip)}
	}
	return []string{"ip:" + ipKey(ip), "cred:" + cred}
}

func (l *Limiter) count(ip, cred string) (time.Duration, bool) {
	now := l.clock.Now()
	keys := limiterKeys(ip, cred)
	if l.shared != nil {
		if wait, blocked, ok := l.countShared(keys, now); ok {
			return wait, blocked
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now)
	var wait time.Duration
	for _, k := range keys {
		w := l.keys[k]
		if w == nil || !now.Before(w.start.Add(l.window)) {
			w = &failWindow{start: now}
			l.keys[k] = w
		}
		if w.n >= l.max {
			wait = max(wait, w.start.Add(l.window).Sub(now))
		}
		w.n++
	}
	return wait, wait > 0
}

// countShared counts the failure in the shared counter, one statement for
// the keys not already known to be over the limit (their count could only
// grow; the window does not move), and mirrors the windows it returns. ok
// is false when the statement failed: the caller counts in process.
func (l *Limiter) countShared(keys []string, now time.Time) (wait time.Duration, blocked, ok bool) {
	l.mu.Lock()
	var todo []string
	for _, k := range keys {
		if w := l.keys[k]; w != nil && w.n >= l.max && now.Before(w.start.Add(l.window)) {
			wait = max(wait, w.start.Add(l.window).Sub(now))
			continue
		}
		todo = append(todo, k)
	}
	l.mu.Unlock()
	if len(todo) == 0 {
		return wait, true, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), ratelimit.SharedTimeout)
	ws, err := l.shared.CountFailures(ctx, todo, now, l.window)
	cancel()
	if err != nil || len(ws) != len(todo) {
		l.log.Warn("counting a failed authentication in the database failed; counted on this instance", "err", err)
		return 0, false, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweepLocked(now)
	for i, k := range todo {
		l.keys[k] = &failWindow{start: ws[i].Start, n: ws[i].Count}
		if ws[i].Count > l.max {
			wait = max(wait, ws[i].Start.Add(l.window).Sub(now))
		}
	}
	return wait, wait > 0, true
}

// sweepLocked bounds the table before a failure adds up to 2 keys (see
// Limiter). Callers hold l.mu.
func (l *Limiter) sweepLocked(now time.Time) {
	if len(l.keys) >= min(max(l.sweepAt, sweepAt), hardCap-2) {
		for k, w := range l.keys {
			if !now.Before(w.start.Add(l.window)) {
				delete(l.keys, k)
			}
		}
		if len(l.keys) >= hardCap-2 {
			l.evictLocked()
		}
		// Amortized: the next sweep waits until the table has doubled, so
		// many live keys do not make every failure walk them all.
		l.sweepAt = 2 * len(l.keys)
	}
}

// evictLocked drops a quarter of the (live) keys, fewest failures first and
// oldest first among equals: blocked keys have the most failures and go
// last. It runs once per hardCap/4 new keys, so its sort is amortized
// O(log n) per failure. Callers hold l.mu.
func (l *Limiter) evictLocked() {
	type entry struct {
		k string
		w *failWindow
	}
	all := make([]entry, 0, len(l.keys))
	for k, w := range l.keys {
		all = append(all, entry{k, w})
	}
	slices.SortFunc(all, func(a, b entry) int {
		if c := cmp.Compare(a.w.n, b.w.n); c != 0 {
			return c
		}
		if c := a.w.start.Compare(b.w.start); c != 0 {
			return c
		}
		return cmp.Compare(a.k, b.k)
	})
	for _, e := range all[:len(all)/4] {
		delete(l.keys, e.k)
	}
}

// Blocked reports whether ip or cred has used up its failures, and how long
// until the longer of the two windows ends.
func (l *Limiter) Blocked(ip, cred string) (time.Duration, bool) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	var wait time.Duration
	for _, k := range limiterKeys(ip, cred) {
		if w := l.keys[k]; w != nil && w.n >= l.max {
			if left := w.start.Add(l.window).Sub(now); left > wait {
				wait = left
			}
		}
	}
	return wait, wait > 0
}

// ipKey is the limiter key of a client address: an IPv4 address itself, an
// IPv6 address its /64 (one host usually holds a whole /64).
func ipKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Is4() || a.Is4In6() {
		return ip
	}
	p, _ := a.Prefix(64)
	return p.String()
}
