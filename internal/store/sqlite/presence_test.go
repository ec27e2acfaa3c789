package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/storetest"
)

// TestPresencePlans checks that the presence queries use their indexes:
// the sweep walks todos_sweep per receiver (its predicate, repeated from
// the migration with domain.MaxRings, must match the index's verbatim), and
// "changed since" walks agents_updated. SQLite plans without statistics
// here, as it does in production.
func TestPresencePlans(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "rollcall.db"))
	for _, tc := range []struct {
		name, query, want string
		args              []any
	}{
		{"sweep", sweepRingSQL, "SEARCH d USING INDEX todos_sweep (agent_id=? AND next_ring_at<?)", []any{`["a"]`, `[]`, 0, 3, 10}},
		{"changed since", changedSinceSQL, "USING INDEX agents_updated (updated_at>?)", []any{0, "", 10}},
	} {
		plan := queryPlan(t, s, tc.query, tc.args...)
		if !strings.Contains(plan, tc.want) {
			t.Errorf("%s: plan does not contain %q:\n%s", tc.name, tc.want, plan)
		}
	}
}

func queryPlan(tb testing.TB, s *Store, query string, args ...any) string {
	tb.Helper()
	rows, err := s.w.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		tb.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			tb.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// benchLoad bulk-loads the presence benchmark data sets with one recursive
// CTE INSERT … SELECT each. No ANALYZE: production SQLite plans without
// statistics too.
func benchLoad(s *Store) storetest.BenchLoad {
	return storetest.BenchLoad{
		Agents: func(ctx context.Context, spec storetest.BenchAgentsSpec) error {
			_, err := s.w.ExecContext(ctx, `WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i + 1 < ?1)
				INSERT INTO agents (id, handle, owner_id, name, queues, verbs, created_at, updated_at)
				SELECT printf('bench-agent-%07d', i), 'bench-' || i, 'bench-owner', 'bench ' || i,
				       '["build","reviews"]', ?2, ?3 + i * ?4, ?3 + i * ?4
				FROM g`, spec.N, encodeList(domain.ScopeVerbs), micros(spec.UpdatedFrom), spec.Step.Microseconds())
			return err
		},
		Todos: func(ctx context.Context, spec storetest.BenchTodosSpec) error {
			created := micros(spec.DueFrom) - 24*3600*1_000_000
			_, err := s.w.ExecContext(ctx, `WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n + 1 < ?1)
				INSERT INTO todos (id, agent_id, queue, title, push_eligible, created_by, state,
					max_attempts, ring_attempts, created_at, updated_at, next_ring_at)
				SELECT printf('bench-todo-%08d', n), printf('bench-agent-%07d', n % ?2),
				       CASE WHEN n % 10 = 0 THEN 'reviews' ELSE 'build' END, 'bench todo', 1, 'operator:bench-owner',
				       'pending', 5, n % 5, ?3, ?3, ?4 + ((n * 7919) % ?5) * 1000000
				FROM g`, spec.N, spec.Agents, created, micros(spec.DueFrom), spec.SpreadSeconds())
			return err
		},
		Explain: func(b *testing.B, p any) {
			switch p := p.(type) {
			case store.SweepParams:
				b.Logf("EXPLAIN QUERY PLAN:\n%s", queryPlan(b, s, sweepRingSQL, encodeList(storeutil.SortedUnique(p.Receivers)),
					encodeList(p.Excluded), micros(p.Now), p.PerAgent, p.Limit))
			case store.ListChangedParams:
				b.Logf("EXPLAIN QUERY PLAN:\n%s", queryPlan(b, s, changedSinceSQL, micros(p.Since), p.AfterID, p.Limit))
			}
		},
	}
}

// BenchmarkSweep1M is storetest.BenchSweep1M on SQLite, for comparison
// with PostgreSQL; it needs ROLLCALL_BENCH_LARGE=1.
func BenchmarkSweep1M(b *testing.B) {
	s := openT(b, filepath.Join(b.TempDir(), "bench.db"))
	storetest.BenchSweep1M(b, s, benchLoad(s))
}

// BenchmarkChangedSince is storetest.BenchChangedSince on SQLite.
func BenchmarkChangedSince(b *testing.B) {
	s := openT(b, filepath.Join(b.TempDir(), "bench.db"))
	storetest.BenchChangedSince(b, s, benchLoad(s))
}

// TestMigrationBackfillsNextRing applies 00002 to a database holding todos
// from before it: every todo that is or may again be pending gets
// next_ring_at = domain.NextRingAt(ring_attempts, last ring or creation);
// finished ones and spent budgets get none. The migration also goes down
// and up again.
func TestMigrationBackfillsNextRing(t *testing.T) {
	db, p, path := oldDatabase(t, 1)
	exec := storetest.Exec(t, db)
	base := micros(storetest.Base)
	exec(`INSERT INTO agents (id, handle, owner_id, created_at, updated_at) VALUES ('a', 'a', 'o', ?1, ?1)`, base)
	cases := storetest.NextRingCases()
	for _, c := range cases {
		exec(`INSERT INTO todos (id, agent_id, queue, title, state, max_attempts, ring_attempts, last_ringed_at,
			retry_at, created_at, updated_at) VALUES (?1, 'a', 'q', 't', ?2, 5, ?3, ?4, ?5, ?6, ?6)`,
			c.ID, c.State, c.Rings, microsPtr(c.Last), microsPtr(c.Retry), base)
	}
	storetest.UpDownUp(t, p, 1)
	_ = db.Close()
	storetest.CheckNextRingBackfill(t, openT(t, path), cases)
}
