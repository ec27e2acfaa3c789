// Package pgtest gives tests a PostgreSQL database of their own: the one
// harness every package's PostgreSQL tests use.
//
//	func TestSomething(t *testing.T) {
//		url := pgtest.FreshDatabase(t) // empty; dropped at cleanup
//		s, err := postgres.Open(t.Context(), url)
//		…
//	}
//
// The server is the one at ROLLCALL_TEST_POSTGRES (a postgres:// URL whose
// user may CREATE DATABASE), or DefaultURL when that is unset. When it does
// not answer the test is skipped, unless ROLLCALL_REQUIRE_POSTGRES=1, which
// fails it instead (scripts/test.sh and .ci/run set it).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the server tried when ROLLCALL_TEST_POSTGRES is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// The environment variables the harness reads.
const (
	URLEnv     = "ROLLCALL_TEST_POSTGRES"
	RequireEnv = "ROLLCALL_REQUIRE_POSTGRES"
)

// timeout bounds each administrative statement and the reachability probe.
const timeout = 30 * time.Second

var (
	reachOnce sync.Once
	reachErr  error
)

// AdminURL returns the URL of the test server's maintenance database
// (ROLLCALL_TEST_POSTGRES, else DefaultURL) once it answers. Unreachable:
// tb is skipped, or failed when ROLLCALL_REQUIRE_POSTGRES=1. The probe runs
// once per test binary.
func AdminURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(URLEnv)
	if u == "" {
		u = DefaultURL
	}
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Close(ctx)
	})
	if reachErr != nil {
		Unavailable(tb, reachErr)
	}
	return u
}

// Unavailable skips tb because PostgreSQL cannot serve it (err says why),
// or fails it when ROLLCALL_REQUIRE_POSTGRES=1.
func Unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("PostgreSQL is required (%s=1) but unavailable: %v", RequireEnv, err)
	}
	tb.Skipf("PostgreSQL unavailable (set %s; %s=1 fails instead): %v", URLEnv, RequireEnv, err)
}

// FreshDatabase creates an empty, uniquely named database on the test
// server, drops it at cleanup, and returns its URL.
func FreshDatabase(tb testing.TB) string {
	tb.Helper()
	admin := AdminURL(tb)
	return WithDatabase(tb, admin, CreateDatabase(tb, admin))
}

// CreateDatabase creates an empty, uniquely named database on the server at
// adminURL (any server: the fault suite passes its own cluster's), drops it
// at cleanup (WITH (FORCE), so open connections do not hold it; a failed
// drop is logged, not failed: the server may be down by then), and returns
// its name.
func CreateDatabase(tb testing.TB, adminURL string) string {
	tb.Helper()
	name := UniqueName()
	Exec(tb, adminURL, `CREATE DATABASE `+name)
	tb.Cleanup(func() {
		if err := exec(adminURL, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			tb.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return name
}

// FreshSchema creates an empty schema in the database at dbURL, drops it at
// cleanup, and returns a URL whose connections use it (search_path). A
// schema costs ~10 ms where a database costs ~0.5 s.
func FreshSchema(tb testing.TB, dbURL string) string {
	tb.Helper()
	name := UniqueName()
	Exec(tb, dbURL, `CREATE SCHEMA `+name)
	tb.Cleanup(func() {
		if err := exec(dbURL, `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

// WithDatabase returns serverURL with its database replaced by name.
func WithDatabase(tb testing.TB, serverURL, name string) string {
	tb.Helper()
	u, err := url.Parse(serverURL)
	if err != nil {
		tb.Fatalf("pgtest: %s must be a postgres:// URL: %v", URLEnv, err)
	}
	u.Path = "/" + name
	return u.String()
}

// Exec runs one statement on its own connection to dbURL; an error fails tb.
func Exec(tb testing.TB, dbURL, sql string, args ...any) {
	tb.Helper()
	if err := exec(dbURL, sql, args...); err != nil {
		tb.Fatalf("pgtest: %s: %v", sql, err)
	}
}

func exec(dbURL, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// UniqueName returns a fresh lower-case identifier, "rollcall_test_" and 16
// hex digits, safe to splice into DDL.
func UniqueName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "rollcall_test_" + hex.EncodeToString(b)
}
