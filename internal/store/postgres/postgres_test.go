package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for goose
	"github.com/pressly/goose/v3"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
	"github.com/rollcall/rollcall/internal/store/storetest"
)

// The tests use the PostgreSQL server of internal/pgtest. Each test gets a
// fresh database, dropped afterwards; the contract suite's subtests each get
// a fresh schema in it (CREATE DATABASE costs ~0.5 s here, a schema ~10 ms).

// openT opens the adapter at url; tb.Cleanup closes it.
func openT(tb testing.TB, url string) *Store { return storetest.OpenT(tb, Open, url) }

// emptyDB opens a fresh schema in the database at dbURL and a goose
// provider of the migrations on it; it returns the schema's URL. t.Cleanup
// closes it.
func emptyDB(t *testing.T, dbURL string) (*sql.DB, *goose.Provider, string) {
	u := pgtest.FreshSchema(t, dbURL)
	db, p := storetest.Unmigrated(t, "pgx", u, goose.DialectPostgres, Migrations())
	return db, p, u
}

// oldDatabase is emptyDB in a fresh database migrated up to version, the
// schema of an older release, for a migration test to write its rows in.
func oldDatabase(t *testing.T, version int64) (*sql.DB, *goose.Provider, string) {
	db, p, u := emptyDB(t, pgtest.FreshDatabase(t))
	storetest.MigrateTo(t, p, version)
	return db, p, u
}

func TestContract(t *testing.T) {
	dbURL := pgtest.FreshDatabase(t)
	empty := func(t *testing.T) storetest.EmptyDatabase {
		_, p, u := emptyDB(t, dbURL)
		return storetest.EmptyDatabase{Migrations: p, Open: func(t *testing.T) store.Store { return openT(t, u) }}
	}
	storetest.Run(t, storetest.Harness{Parallel: true, Empty: empty, New: func(t *testing.T) storetest.Instance {
		u := pgtest.FreshSchema(t, dbURL)
		s := openT(t, u)
		return storetest.Instance{Store: s, Twin: func(t *testing.T) store.Store { return openT(t, u) }, Tamper: func(t *testing.T, seq int64) {
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
	dbURL := pgtest.FreshDatabase(t)
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
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Go(func() {
				<-start
				_, errs[i] = stores[i].ClaimTodo(ctx, store.ClaimTodoParams{AgentID: "a1", TodoID: td.ID, Queues: []string{"q"},
					Lease: time.Minute, Now: storetest.Base})
				if _, aerr := stores[i].AppendAudit(ctx, storetest.Base, domain.AuditRecord{Actor: "system", Action: "x"}); aerr != nil {
					t.Error(aerr)
				}
			})
		}
		close(start)
		wg.Wait()
		wins, conflicts, err := storetest.Outcome(errs)
		if err != nil {
			t.Error(err)
		}
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
	dbURL := pgtest.FreshDatabase(t)
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
	s := openT(b, pgtest.FreshDatabase(b))
	b.Run("serial", func(b *testing.B) { storetest.BenchPushClaimComplete(b, s) })
	b.Run("parallel", func(b *testing.B) { storetest.BenchPushClaimCompleteParallel(b, s) })
}

// BenchmarkCompleteAndClaim is storetest.BenchCompleteAndClaim.
func BenchmarkCompleteAndClaim(b *testing.B) {
	storetest.BenchCompleteAndClaim(b, openT(b, pgtest.FreshDatabase(b)))
}

// BenchmarkMarkRung is storetest.BenchMarkRung.
func BenchmarkMarkRung(b *testing.B) { storetest.BenchMarkRung(b, openT(b, pgtest.FreshDatabase(b))) }

// BenchmarkCreateTodoParallel is storetest.BenchCreateTodoParallel:
// audited creates (group-committed, design: Group commit) and unaudited
// ones (a transaction each), from -cpu × 16 goroutines; serial: audited
// creates one at a time from -cpu goroutines (-cpu 1: the latency of one).
func BenchmarkCreateTodoParallel(b *testing.B) {
	s := openT(b, pgtest.FreshDatabase(b))
	b.Run("serial", func(b *testing.B) {
		b.SetParallelism(1)
		storetest.BenchCreateTodoParallel(b, s, true)
	})
	for _, audited := range []bool{true, false} {
		b.Run(map[bool]string{true: "audited", false: "unaudited"}[audited], func(b *testing.B) {
			b.SetParallelism(16)
			storetest.BenchCreateTodoParallel(b, s, audited)
		})
	}
}

// TestOpensStoredData restores a database written by the store code of
// main before the queries were generated (testdata/main-fixture.sql, a
// pg_dump --inserts of storetest.WriteFixture's data), opens it and reads
// back exactly what that code read.
func TestOpensStoredData(t *testing.T) {
	dump, err := os.ReadFile(filepath.Join("testdata", "main-fixture.sql"))
	if err != nil {
		t.Fatal(err)
	}
	u := pgtest.FreshDatabase(t)
	pgtest.Exec(t, u, string(dump))
	storetest.CheckFixture(t, openT(t, u))
}

// TestClaimNextPlan (design: Claiming in batches): on a young database —
// 30 000 done and 20 000 pending todos of two agents, the table never
// analysed — a claim walks todos_ready, and todos_pool_ready per pool of
// the agent, in (created_at, id) order and stops after lim rows, instead
// of reading and sorting every waiting todo: in the plan made for the
// call's values and in the generic plan of the prepared statement.
func TestClaimNextPlan(t *testing.T) {
	s := openT(t, pgtest.FreshSchema(t, pgtest.FreshDatabase(t)))
	ctx := t.Context()
	if err := benchLoad(s).Agents(ctx, storetest.BenchAgentsSpec{N: 2, UpdatedFrom: storetest.Base.Add(-time.Hour), Step: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO todos (id, agent_id, queue, title, created_by, state, max_attempts, created_at, updated_at)
			SELECT 'todo-' || g, 'bench-agent-' || lpad((g % 2)::text, 7, '0'), CASE WHEN g % 10 = 0 THEN 'reviews' ELSE 'build' END,
			       'todo', 'operator:x', CASE WHEN g < 30000 THEN 'done' ELSE 'pending' END, 5,
			       $1::timestamptz + make_interval(secs => g), $1::timestamptz
			FROM generate_series(0, 49999) AS g`, micro(storetest.Base)); err != nil {
		t.Fatal(err)
	}
	rec := &queryRecorder{}
	_, _ = dbsqlc.New(rec).ClaimNext(ctx, dbsqlc.ClaimNextParams{AgentID: storetest.BenchAgentID(1), Queues: []string{"build", "reviews"},
		Now: storetest.Base, LeaseUntil: storetest.Base.Add(time.Minute), Lim: 2})
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, `PREPARE claim_next_plan AS `+rec.sql); err != nil {
		t.Fatal(err)
	}
	args := make([]string, len(rec.args))
	for i := range args {
		args[i] = fmt.Sprintf("$%d", i+1)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := c.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
			t.Fatal(err)
		}
		// The simple protocol writes the arguments into the statement as
		// literals: EXECUTE takes no parameters of its own.
		rows, err := c.Query(ctx, `EXPLAIN EXECUTE claim_next_plan(`+strings.Join(args, ", ")+`)`,
			append([]any{pgx.QueryExecModeSimpleProtocol}, rec.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		for _, want := range []string{"Index Scan using todos_ready on todos t", "Index Scan using todos_pool_ready on todos p"} {
			if !strings.Contains(plan, want) {
				t.Errorf("%s: the plan does not contain %q:\n%s", mode, want, plan)
			}
		}
		for _, sorted := range []string{"Sort Key: t.created_at", "Sort Key: p.created_at"} {
			if strings.Contains(plan, sorted) {
				t.Errorf("%s: the plan sorts the waiting todos (%s):\n%s", mode, sorted, plan)
			}
		}
	}
	if _, err := c.Exec(ctx, `RESET plan_cache_mode; DEALLOCATE claim_next_plan`); err != nil {
		t.Fatal(err)
	}
}

// queryRecorder is a dbsqlc.DBTX that keeps the statement and arguments
// of a generated query instead of running it.
type queryRecorder struct {
	dbsqlc.DBTX
	sql  string
	args []any
}

func (r *queryRecorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errors.New("recorded, not run")
}
