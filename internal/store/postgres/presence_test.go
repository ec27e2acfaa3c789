package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/storetest"
)

// benchLoad bulk-loads the presence benchmark data sets with one
// generate_series INSERT … SELECT each, then VACUUM ANALYZE (the visibility
// map and statistics autovacuum would keep in a running system).
func benchLoad(s *Store) storetest.BenchLoad {
	return storetest.BenchLoad{
		Agents: func(ctx context.Context, spec storetest.BenchAgentsSpec) error {
			_, err := s.pool.Exec(ctx, `INSERT INTO agents (id, handle, owner_id, name, queues, verbs, created_at, updated_at)
				SELECT 'bench-agent-' || lpad(i::text, 7, '0'), 'bench-' || i, 'bench-owner', 'bench ' || i,
				       '{build,reviews}', $2::text[], $3::timestamptz + i * $4::interval, $3::timestamptz + i * $4::interval
				FROM generate_series(0, $1 - 1) AS i`,
				spec.N, domain.ScopeVerbs, micro(spec.UpdatedFrom), spec.Step)
			if err != nil {
				return err
			}
			_, err = s.pool.Exec(ctx, `VACUUM (ANALYZE) agents`)
			return err
		},
		Todos: func(ctx context.Context, spec storetest.BenchTodosSpec) error {
			_, err := s.pool.Exec(ctx, `INSERT INTO todos (id, agent_id, queue, title, push_eligible, created_by, state,
					max_attempts, ring_attempts, created_at, updated_at, next_ring_at)
				SELECT 'bench-todo-' || lpad(g::text, 8, '0'), 'bench-agent-' || lpad((g % $2)::text, 7, '0'),
				       CASE WHEN g % 10 = 0 THEN 'reviews' ELSE 'build' END, 'bench todo', true, 'operator:bench-owner',
				       'pending', 5, g % 5, $3::timestamptz - interval '24 hours', $3::timestamptz - interval '24 hours',
				       $3::timestamptz + make_interval(secs => (g::bigint * 7919) % $4)
				FROM generate_series(0, $1 - 1) AS g`,
				spec.N, spec.Agents, micro(spec.DueFrom), spec.SpreadSeconds())
			if err != nil {
				return err
			}
			_, err = s.pool.Exec(ctx, `VACUUM (ANALYZE) todos`)
			return err
		},
		Explain: func(b *testing.B, p any) {
			switch p := p.(type) {
			case store.SweepParams:
				explainAnalyze(b, s, sweepRingSQL, storeutil.SortedUnique(p.Receivers), storeutil.Strings(p.Excluded),
					micro(p.Now), limitArg(p.PerAgent), limitArg(p.Limit))
			case store.ListChangedParams:
				explainAnalyze(b, s, changedSinceSQL, micro(p.Since), p.AfterID, limitArg(p.Limit))
			}
		},
	}
}

// explainAnalyze logs EXPLAIN (ANALYZE, BUFFERS) of query in a transaction
// it rolls back, so an UPDATE changes nothing.
func explainAnalyze(tb testing.TB, s *Store, query string, args ...any) {
	tb.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) `+query, args...)
	if err != nil {
		tb.Fatalf("explain: %v", err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		tb.Fatalf("explain: %v", err)
	}
	tb.Logf("EXPLAIN ANALYZE:\n%s", strings.Join(lines, "\n"))
}

// BenchmarkSweep1M is storetest.BenchSweep1M on PostgreSQL (goal ≤ 20 ms a
// pass); it needs ROLLCALL_BENCH_LARGE=1.
func BenchmarkSweep1M(b *testing.B) {
	s := openT(b, pgtest.FreshDatabase(b))
	storetest.BenchSweep1M(b, s, benchLoad(s))
}

// BenchmarkChangedSince is storetest.BenchChangedSince on PostgreSQL
// (goal: well under 10 ms with none changed).
func BenchmarkChangedSince(b *testing.B) {
	s := openT(b, pgtest.FreshDatabase(b))
	storetest.BenchChangedSince(b, s, benchLoad(s))
}

// TestPresencePlans checks on a loaded database (200 agents, 20 000
// todos, analysed) that the sweep is one todos_sweep range scan per
// receiver — its predicate, built from domain.MaxRings, must imply the
// index's — and that "changed since" uses agents_updated.
func TestPresencePlans(t *testing.T) {
	s := openT(t, pgtest.FreshSchema(t, pgtest.FreshDatabase(t)))
	l := benchLoad(s)
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Agents(ctx, storetest.BenchAgentsSpec{N: 200, UpdatedFrom: storetest.Base.Add(-time.Hour), Step: time.Second}))
	must(l.Todos(ctx, storetest.BenchTodosSpec{N: 20000, Agents: 200, DueFrom: storetest.Base, Spread: 24 * time.Hour}))
	for _, tc := range []struct {
		name  string
		query string
		want  []string
		args  []any
	}{
		{"sweep", sweepRingSQL, []string{"Index Scan using todos_sweep", "Index Cond: ((agent_id = r.agent) AND (next_ring_at <= "},
			[]any{[]string{storetest.BenchAgentID(1), storetest.BenchAgentID(2)}, []string{}, micro(storetest.Base.Add(time.Hour)), int64(3), int64(1000)}},
		{"changed since", changedSinceSQL, []string{"Index Scan using agents_updated"},
			[]any{micro(storetest.Base), "", int64(1000)}},
	} {
		rows, err := s.pool.Query(ctx, `EXPLAIN `+tc.query, tc.args...)
		must(err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		must(err)
		plan := strings.Join(lines, "\n")
		for _, w := range tc.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: plan does not contain %q:\n%s", tc.name, w, plan)
			}
		}
	}
}

// TestMigrationBackfillsNextRing applies 00002 to a database holding todos
// from before it: every todo that is or may again be pending gets
// next_ring_at = domain.NextRingAt(ring_attempts, last ring or creation);
// finished ones and spent budgets get none. The migration also goes down
// and up again.
func TestMigrationBackfillsNextRing(t *testing.T) {
	db, p, u := oldDatabase(t, 1)
	exec := storetest.Exec(t, db)
	exec(`INSERT INTO agents (id, handle, owner_id, created_at, updated_at) VALUES ('a', 'a', 'o', $1, $1)`, storetest.Base)
	cases := storetest.NextRingCases()
	for _, c := range cases {
		exec(`INSERT INTO todos (id, agent_id, queue, title, state, max_attempts, ring_attempts, last_ringed_at,
			retry_at, created_at, updated_at) VALUES ($1, 'a', 'q', 't', $2, 5, $3, $4, $5, $6, $6)`,
			c.ID, c.State, c.Rings, c.Last, c.Retry, storetest.Base)
	}
	storetest.UpDownUp(t, p, 1)
	storetest.CheckNextRingBackfill(t, openT(t, u), cases)
}
