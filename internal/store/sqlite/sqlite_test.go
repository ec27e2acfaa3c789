package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
	"github.com/rollcall/rollcall/internal/store/storetest"
)

// openT opens the adapter at path; tb.Cleanup closes it.
func openT(tb testing.TB, path string) *Store { return storetest.OpenT(tb, Open, path) }

func harness(path func(t *testing.T) string) storetest.Harness {
	return storetest.Harness{Empty: emptyDatabase, New: func(t *testing.T) storetest.Instance {
		s := openT(t, path(t))
		return storetest.Instance{Store: s, Tamper: func(t *testing.T, seq int64) {
			t.Helper()
			res, err := s.w.ExecContext(t.Context(), `UPDATE audit SET data = '{"tampered":true}' WHERE seq = ?`, seq)
			if err != nil {
				t.Fatalf("tamper: %v", err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("tamper: no audit entry %d", seq)
			}
		}}
	}}
}

// emptyDB opens an empty database file and a goose provider of the
// migrations on it; t.Cleanup closes it.
func emptyDB(t *testing.T) (*sql.DB, *goose.Provider, string) {
	path := filepath.Join(t.TempDir(), "rollcall.db")
	db, p := storetest.Unmigrated(t, "sqlite", "file:"+path+"?_pragma=foreign_keys(1)", goose.DialectSQLite3, Migrations())
	return db, p, path
}

// emptyDatabase is a new database file with a goose provider on it.
func emptyDatabase(t *testing.T) storetest.EmptyDatabase {
	_, p, path := emptyDB(t)
	return storetest.EmptyDatabase{Migrations: p, Open: func(t *testing.T) store.Store { return openT(t, path) }}
}

// oldDatabase is emptyDB migrated up to version, the schema of an older
// release, for a migration test to write its rows in.
func oldDatabase(t *testing.T, version int64) (*sql.DB, *goose.Provider, string) {
	db, p, path := emptyDB(t)
	storetest.MigrateTo(t, p, version)
	return db, p, path
}

// TestContract runs the store contract suite on a database file (WAL, one
// writer, concurrent readers). A second handle on the file is refused by
// the instance lock, so the races drive one Store from many goroutines.
func TestContract(t *testing.T) {
	storetest.Run(t, harness(func(t *testing.T) string { return filepath.Join(t.TempDir(), "rollcall.db") }))
}

// TestContractMemory runs the suite on a private in-memory database.
func TestContractMemory(t *testing.T) {
	storetest.Run(t, harness(func(*testing.T) string { return Memory }))
}

func TestSecondOpenRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollcall.db")
	first := openT(t, path)
	_, err := Open(t.Context(), path)
	if err == nil || !strings.Contains(err.Error(), "another rollcall server is using "+path) {
		t.Fatalf("second Open = %v, want the other-server error", err)
	}
	if err := Migrate(t.Context(), path); err == nil {
		t.Fatal("Migrate succeeded while a server holds the file")
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	openT(t, path) // the lock is released on Close
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollcall.db")
	if err := Migrate(t.Context(), path); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if s.Dialect() != "sqlite" {
		t.Errorf("Dialect() = %q", s.Dialect())
	}
	p := domain.Person{ID: "p1", Name: "admin", Admin: true, CreatedAt: storetest.Base}
	if _, err := s.BootstrapAdmin(t.Context(), store.BootstrapAdminParams{Person: p, TokenHash: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s = openT(t, path)
	got, _, err := s.TokenByHash(t.Context(), "h")
	if err != nil || got.ID != "p1" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	created, err := s.BootstrapAdmin(t.Context(), store.BootstrapAdminParams{Person: domain.Person{ID: "p2"}, TokenHash: "h2"})
	if err != nil || created {
		t.Fatalf("BootstrapAdmin after reopen = %v, %v; want not created", created, err)
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(t.Context(), filepath.Join(t.TempDir(), "missing-dir", "rollcall.db"))
	if err == nil || errors.Is(err, os.ErrExist) {
		t.Fatalf("Open in a missing directory = %v, want an error", err)
	}
	if _, err := Open(t.Context(), ""); err == nil {
		t.Fatal("Open(\"\") succeeded")
	}
}

func BenchmarkPushClaimComplete(b *testing.B) {
	s := openT(b, filepath.Join(b.TempDir(), "bench.db"))
	b.Run("serial", func(b *testing.B) { storetest.BenchPushClaimComplete(b, s) })
	b.Run("parallel", func(b *testing.B) { storetest.BenchPushClaimCompleteParallel(b, s) })
}

// BenchmarkCompleteAndClaim is storetest.BenchCompleteAndClaim.
func BenchmarkCompleteAndClaim(b *testing.B) {
	storetest.BenchCompleteAndClaim(b, openT(b, filepath.Join(b.TempDir(), "bench.db")))
}

// BenchmarkMarkRung is storetest.BenchMarkRung.
func BenchmarkMarkRung(b *testing.B) {
	storetest.BenchMarkRung(b, openT(b, filepath.Join(b.TempDir(), "bench.db")))
}

// BenchmarkCreateTodoParallel is storetest.BenchCreateTodoParallel:
// audited creates (group-committed, design: Group commit) and unaudited
// ones (a transaction each), from -cpu × 16 goroutines.
func BenchmarkCreateTodoParallel(b *testing.B) {
	s := openT(b, filepath.Join(b.TempDir(), "bench.db"))
	for _, audited := range []bool{true, false} {
		b.Run(map[bool]string{true: "audited", false: "unaudited"}[audited], func(b *testing.B) {
			b.SetParallelism(16)
			storetest.BenchCreateTodoParallel(b, s, audited)
		})
	}
}

func TestPragmas(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "rollcall.db"))
	var mode string
	if err := s.w.QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	for name, db := range map[string]interface {
		QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	}{"writer": s.w, "reader": s.r} {
		var fk int
		if err := db.QueryRowContext(t.Context(), `PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
			t.Errorf("%s: foreign_keys = %d, %v; want 1", name, fk, err)
		}
	}
	if _, err := s.r.ExecContext(t.Context(), `DELETE FROM audit`); err == nil {
		t.Error("a write through the read pool succeeded")
	}
}

// TestOpensStoredData opens a database file written by the store code of
// main before the queries were generated (testdata/main-fixture.db, made by
// storetest.WriteFixture) and reads back exactly what that code read.
func TestOpensStoredData(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "main-fixture.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rollcall.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	storetest.CheckFixture(t, openT(t, path))
}

// TestClaimNextPlan checks that ClaimNext walks each queue's index in
// order, one correlated walk per queue of the agent (todos_ready) and of
// each of its pools (todos_pool_ready), so that a claim does not read and
// sort every waiting todo: the only full sort is the final pick's, over at
// most lim rows per walk.
func TestClaimNextPlan(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "rollcall.db"))
	rec := &queryRecorder{}
	_, _ = dbsqlc.New(rec).ClaimNext(t.Context(), dbsqlc.ClaimNextParams{AgentID: "a", Queues: `["q","r"]`, Now: 1, LeaseUntil: 2, Lim: 1})
	plan := queryPlan(t, s, rec.query, rec.args...)
	for _, want := range []string{
		"SEARCH o USING INDEX todos_ready (agent_id=? AND queue=?)",
		"SEARCH p USING INDEX todos_pool_ready (pool_id=? AND queue=?)",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan does not contain %q:\n%s", want, plan)
		}
	}
	if n := strings.Count(plan, "USE TEMP B-TREE FOR ORDER BY"); n != 1 {
		t.Errorf("plan sorts %d times in full, want once (the pick):\n%s", n, plan)
	}
}

// queryRecorder is a dbsqlc.DBTX that keeps the statement and arguments
// of a generated query instead of running it.
type queryRecorder struct {
	dbsqlc.DBTX
	query string
	args  []any
}

func (r *queryRecorder) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	r.query, r.args = query, args
	return nil, errors.New("recorded, not run")
}
