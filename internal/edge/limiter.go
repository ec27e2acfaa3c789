package edge

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Limiter counts failed authentications per key (a client IP, a credential
// prefix) in fixed windows: the first failure of a key opens a window of
// Window; once a key has max failures in its window, Blocked reports it
// until the window ends. Counts are per process (each instance behind a
// load balancer counts its own). It is safe for concurrent use.
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

// Fail counts one failure of the client ip and, when cred != "", of the
// credential prefix cred.
func (l *Limiter) Fail(ip, cred string) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) >= min(max(l.sweepAt, sweepAt), hardCap-2) { // a failure adds up to 2 keys
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
	for _, k := range []string{"ip:" + ipKey(ip), "cred:" + cred} {
		if k == "cred:" {
			continue
		}
		w := l.keys[k]
		if w == nil || !now.Before(w.start.Add(l.window)) {
			w = &failWindow{start: now}
			l.keys[k] = w
		}
		w.n++
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
	for _, k := range []string{"ip:" + ipKey(ip), "cred:" + cred} {
		if k == "cred:" {
			continue
		}
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
