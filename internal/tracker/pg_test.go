package tracker_test

import (
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/postgres"
)

// PostgreSQL for the liveness tests: a fresh database per test from
// internal/pgtest (skipped when unreachable, unless
// ROLLCALL_REQUIRE_POSTGRES=1), dropped afterwards.

func newPgEnv(t testing.TB, o envOptions) *lvEnv {
	t.Helper()
	st, err := postgres.Open(t.Context(), pgtest.FreshDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	// Closed after every service's cleanup (cleanups run last-in first-out).
	t.Cleanup(func() { _ = st.Close() })
	var s store.Store = st
	if o.wrap != nil {
		s = o.wrap(st)
	}
	e := &lvEnv{t: t, clock: clockwork.NewFakeClockAt(t0), store: s, bus: bus.NewLocal()}
	e.start(o)
	return e
}
