package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/storetest"
)

// The tests need a PostgreSQL server reachable at ROLLCALL_TEST_POSTGRES (a
// URL whose user may CREATE DATABASE). Each test gets a fresh database,
// dropped afterwards; the contract suite's subtests each get a fresh schema
// in it (CREATE DATABASE costs ~0.5 s here, a schema ~10 ms). Unreachable →
// skipped, unless ROLLCALL_REQUIRE_POSTGRES=1.
const defaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func adminURL() string {
	if u := os.Getenv("ROLLCALL_TEST_POSTGRES"); u != "" {
		return u
	}
	return defaultURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requirePostgres skips (or, with ROLLCALL_REQUIRE_POSTGRES=1, fails) tb
// when the server cannot be reached.
func requirePostgres(tb testing.TB) {
	tb.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, adminURL())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Close(ctx)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("ROLLCALL_REQUIRE_POSTGRES") == "1" {
		tb.Fatalf("PostgreSQL at ROLLCALL_TEST_POSTGRES is required but unreachable: %v", reachErr)
	}
	tb.Skipf("PostgreSQL unreachable (set ROLLCALL_TEST_POSTGRES; ROLLCALL_REQUIRE_POSTGRES=1 fails instead): %v", reachErr)
}

func adminExec(tb testing.TB, url, sql string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatalf("connect admin: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// freshDatabase creates an empty, uniquely named database, drops it in
// tb.Cleanup, and returns its URL.
func freshDatabase(tb testing.TB) string {
	tb.Helper()
	requirePostgres(tb)
	u, err := url.Parse(adminURL())
	if err != nil {
		tb.Fatalf("ROLLCALL_TEST_POSTGRES must be a postgres:// URL: %v", err)
	}
	name := uniqueName()
	adminExec(tb, adminURL(), `CREATE DATABASE `+name)
	tb.Cleanup(func() { adminExec(tb, adminURL(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`) })
	u.Path = "/" + name
	return u.String()
}

// freshSchema creates an empty schema in the database at dbURL, drops it in
// tb.Cleanup, and returns a URL whose connections use it (search_path).
func freshSchema(tb testing.TB, dbURL string) string {
	tb.Helper()
	name := uniqueName()
	adminExec(tb, dbURL, `CREATE SCHEMA `+name)
	tb.Cleanup(func() { adminExec(tb, dbURL, `DROP SCHEMA IF EXISTS `+name+` CASCADE`) })
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

func uniqueName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "rollcall_test_" + hex.EncodeToString(b)
}

func openT(tb testing.TB, url string) *Store {
	tb.Helper()
	s, err := Open(tb.Context(), url)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	dbURL := freshDatabase(t)
	storetest.Run(t, storetest.Harness{Parallel: true, New: func(t *testing.T) storetest.Instance {
		s := openT(t, freshSchema(t, dbURL))
		return storetest.Instance{Store: s, Tamper: func(t *testing.T, seq int64) {
			t.Helper()
			tag, err := s.pool.Exec(t.Context(), `UPDATE audit SET data = '{"tampered":true}' WHERE seq = $1`, seq)
			if err != nil {
				t.Fatalf("tamper: %v", err)
			}
			if tag.RowsAffected() != 1 {
				t.Fatalf("tamper: no audit entry %d", seq)
			}
		}}
	}})
}

// TestTwoInstances runs two adapters (two pools, as two servers would) on
// one database: claims and audit appends stay exclusive across them.
func TestTwoInstances(t *testing.T) {
	dbURL := freshDatabase(t)
	var stores [2]*Store
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range stores {
		wg.Go(func() { // both migrate at once: goose's session lock serialises them
			stores[i], errs[i] = Open(t.Context(), dbURL)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open #%d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	ctx := t.Context()
	a := domain.Agent{ID: "a1", Handle: "alpha", OwnerID: "p1", Active: true,
		Scope: domain.Scope{Queues: []string{"q"}, Verbs: domain.ScopeVerbs}, CreatedAt: storetest.Base, UpdatedAt: storetest.Base}
	if err := stores[0].CreateAgent(ctx, store.CreateAgentParams{Agent: a, CredentialID: "c1", CredentialHash: "h1",
		Audit: domain.AuditRecord{Actor: "system", Action: "agent.vend", AgentID: "a1"}}); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		td := domain.Todo{ID: "t" + string(rune('a'+round)), AgentID: "a1", Queue: "q", Title: "x", State: domain.TodoPending,
			MaxAttempts: 5, CreatedAt: storetest.Base, UpdatedAt: storetest.Base}
		if _, _, err := stores[round%2].CreateTodo(ctx, store.CreateTodoParams{Todo: td}); err != nil {
			t.Fatal(err)
		}
		var wins, conflicts int
		var mu sync.Mutex
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				_, err := stores[i].ClaimTodo(ctx, store.ClaimTodoParams{AgentID: "a1", TodoID: td.ID, Queues: []string{"q"},
					Lease: time.Minute, Now: storetest.Base})
				if _, aerr := stores[i].AppendAudit(ctx, storetest.Base, domain.AuditRecord{Actor: "system", Action: "x"}); aerr != nil {
					t.Error(aerr)
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, domain.ErrConflict):
					conflicts++
				default:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d wins, %d conflicts across instances", round, wins, conflicts)
		}
	}
	res, err := stores[1].VerifyAudit(ctx, store.VerifyAuditParams{})
	if err != nil || !res.OK || res.Checked != 41 {
		t.Fatalf("VerifyAudit = %+v, %v; want ok with 41 entries", res, err)
	}
}

func TestMigrateAndDialect(t *testing.T) {
	dbURL := freshDatabase(t)
	if err := Migrate(t.Context(), dbURL); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if err := Migrate(t.Context(), dbURL); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	s := openT(t, dbURL)
	if s.Dialect() != "postgres" {
		t.Errorf("Dialect() = %q", s.Dialect())
	}
	if err := Migrate(t.Context(), "postgres://nobody@127.0.0.1:1/x?sslmode=disable&connect_timeout=2"); err == nil {
		t.Error("Migrate against a closed port succeeded")
	}
}

func BenchmarkPushClaimComplete(b *testing.B) {
	s := openT(b, freshDatabase(b))
	b.Run("serial", func(b *testing.B) { storetest.BenchPushClaimComplete(b, s) })
	b.Run("parallel", func(b *testing.B) { storetest.BenchPushClaimCompleteParallel(b, s) })
}
