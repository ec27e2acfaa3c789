package tracker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/postgres"
)

// PostgreSQL for the liveness tests: a fresh database per test on the
// server at ROLLCALL_TEST_POSTGRES (skipped when unreachable, unless
// ROLLCALL_REQUIRE_POSTGRES=1), dropped afterwards.

func pgAdminURL() string {
	if u := os.Getenv("ROLLCALL_TEST_POSTGRES"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func pgExec(tb testing.TB, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgAdminURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// freshPgURL creates a database and returns its URL.
func freshPgURL(tb testing.TB) string {
	tb.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	name := "rollcall_lv_" + hex.EncodeToString(b)
	if err := pgExec(tb, `CREATE DATABASE `+name); err != nil {
		if os.Getenv("ROLLCALL_REQUIRE_POSTGRES") == "1" {
			tb.Fatalf("PostgreSQL required: %v", err)
		}
		tb.Skipf("PostgreSQL unreachable (set ROLLCALL_TEST_POSTGRES): %v", err)
	}
	tb.Cleanup(func() { _ = pgExec(tb, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) })
	u, err := url.Parse(pgAdminURL())
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

func newPgEnv(t testing.TB, o envOptions) *lvEnv {
	t.Helper()
	st, err := postgres.Open(t.Context(), freshPgURL(t))
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
	e.svc = e.instance("a", o.cfg, o.realClock)
	tok, _, err := e.svc.Bootstrap(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if e.admin, err = e.svc.AuthenticatePerson(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	return e
}
