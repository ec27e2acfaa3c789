// Package skewclock shifts a clock's wall time by a fixed offset, for tests
// that need one process's clock to disagree with another's: cross-instance time
// comparisons must not depend on an instance's wall clock
// (design: Database clock, Test clock offset). Durations, timers and tickers
// are not affected: only Now, Since and Until see the offset.
//
// TEST ONLY: `rollcall serve` reads EnvVar (ROLLCALL_TEST_CLOCK_OFFSET, a Go
// duration such as "20s" or "-20s") and runs on the shifted clock. It is not
// a configuration key and no operator should ever set it.
package skewclock

import (
	"fmt"
	"os"
	"time"

	"github.com/jonboulle/clockwork"
)

// EnvVar names the test-only environment variable `rollcall serve` reads.
const EnvVar = "ROLLCALL_TEST_CLOCK_OFFSET"

// Clock is base with its wall time shifted by Offset.
type Clock struct {
	clockwork.Clock
	Offset time.Duration
}

// New returns base shifted by offset (base itself when offset is 0).
func New(base clockwork.Clock, offset time.Duration) clockwork.Clock {
	if offset == 0 {
		return base
	}
	return Clock{Clock: base, Offset: offset}
}

// Now is the base clock's now plus Offset (the monotonic reading is kept,
// so differences of two readings are unaffected).
func (c Clock) Now() time.Time { return c.Clock.Now().Add(c.Offset) }

// Since is Now() - t.
func (c Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is t - Now().
func (c Clock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// FromEnv returns the offset of EnvVar in env lookups (0 when unset or
// empty). Errors: a value that is not a Go duration.
func FromEnv(lookup func(string) (string, bool)) (time.Duration, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(EnvVar)
	if !ok || v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not a Go duration (e.g. 20s or -20s): %w", EnvVar, v, err)
	}
	return d, nil
}
