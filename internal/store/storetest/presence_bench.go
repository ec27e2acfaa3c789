package storetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/store"
)

// Presence benchmarks at the store level (design: Digest on return, Sweep; see
// docs/benchmarks.md). The data sets are too large for the store port, so each adapter
// bulk-loads them with one statement of its dialect (BenchLoad); the
// benchmarks then drive the port.
//
//	go test -run '^$' -bench 'Sweep1M|ChangedSince' ./internal/store/postgres/  # ROLLCALL_BENCH_LARGE=1 for the 1M sweep
//
// BenchSweep1M loads 1 000 000 todos and runs only when the environment
// variable ROLLCALL_BENCH_LARGE is 1 (it is skipped otherwise). With
// ROLLCALL_BENCH_EXPLAIN=1 the adapter logs the plans of the measured
// statements on the loaded data (PostgreSQL: EXPLAIN ANALYZE, rolled back).

// LargeBenchEnv is the environment variable that enables BenchSweep1M.
const LargeBenchEnv = "ROLLCALL_BENCH_LARGE"

// ExplainBenchEnv is the environment variable that makes the presence
// benchmarks log their query plans (BenchLoad.Explain).
const ExplainBenchEnv = "ROLLCALL_BENCH_EXPLAIN"

// BenchAgentID is the id of bulk-loaded agent i: "bench-agent-0000042"
// (handle "bench-42"). Loaders must produce exactly these ids.
func BenchAgentID(i int) string { return fmt.Sprintf("bench-agent-%07d", i) }

// BenchAgentsSpec is a bulk load of agents: agent i in [0, N) has id
// BenchAgentID(i), handle "bench-<i>", owner "bench-owner", queues
// ["build", "reviews"], every scope verb, default presence and liveness,
// created_at = updated_at = UpdatedFrom + i×Step.
type BenchAgentsSpec struct {
	N           int
	UpdatedFrom time.Time
	Step        time.Duration
}

// BenchTodosSpec is a bulk load of pending, push-eligible todos: todo g in
// [0, N) has id "bench-todo-<g, 8 digits>", agent BenchAgentID(g % Agents),
// queue "reviews" when g % 10 == 0 else "build", ring_attempts g % 5,
// created_at = updated_at = DueFrom − 24 h, and next_ring_at = DueFrom +
// ((g × 7919) mod SpreadSeconds) seconds: due times spread evenly over
// [DueFrom, DueFrom + Spread) in an order unrelated to g.
type BenchTodosSpec struct {
	N       int
	Agents  int
	DueFrom time.Time
	Spread  time.Duration
}

// SpreadSeconds is Spread in whole seconds (at least 1).
func (s BenchTodosSpec) SpreadSeconds() int64 { return max(1, int64(s.Spread/time.Second)) }

// BenchLoad is what an adapter gives the presence benchmarks.
type BenchLoad struct {
	// Agents bulk-loads agents (one statement); the store is empty.
	Agents func(ctx context.Context, spec BenchAgentsSpec) error
	// Todos bulk-loads todos of already loaded agents (one statement) and
	// refreshes planner statistics where the dialect keeps them.
	Todos func(ctx context.Context, spec BenchTodosSpec) error
	// Explain, when set, logs the plan of the store's statement for p, one
	// of store.SweepParams and store.ListChangedParams, without changing
	// data. Called once after the timed loop when ROLLCALL_BENCH_EXPLAIN=1.
	Explain func(b *testing.B, p any)
}

// Sweep pass limits as the app sets them (design: Sweep; app.SweepPerAgent
// and app.SweepLimit).
const (
	benchPerAgent = 3
	benchLimit    = 1000
)

// BenchSweep1M measures one SweepRing pass (design: Sweep) over 1 000 000
// pending push-eligible todos of 5 000 agents (200 each), with 1 000 of
// them as this instance's receivers and every tenth receiver excluding its
// "reviews" queue; the pass limits are the app's (3 per agent, 1 000 in
// all). Due times are spread over 24 h, so most todos are not due.
//
//   - steady: pass i sweeps at DueFrom + i × 30 s (the sweep interval), so
//     each pass rings what became due since the last one, re-rings
//     included (metric rings/op, about 180 here) — the steady state.
//   - idle: every pass at one instant after everything due there was rung:
//     the cost of looking, with nothing to ring.
//
// Goal on PostgreSQL: ≤ 20 ms a pass. Skipped unless
// ROLLCALL_BENCH_LARGE=1; s must be empty.
func BenchSweep1M(b *testing.B, s store.Store, load BenchLoad) {
	if os.Getenv(LargeBenchEnv) != "1" {
		b.Skipf("loads 1 000 000 todos: set %s=1 to run", LargeBenchEnv)
	}
	benchSweep(b, s, load, 5000, 1_000_000, 1000)
}

func benchSweep(b *testing.B, s store.Store, load BenchLoad, agents, todos, receivers int) {
	ps, ok := s.(store.PresenceStore)
	if !ok {
		b.Fatalf("%T does not implement store.PresenceStore", s)
	}
	ctx := b.Context()
	start := time.Now()
	if err := load.Agents(ctx, BenchAgentsSpec{N: agents, UpdatedFrom: Base.Add(-48 * time.Hour), Step: time.Millisecond}); err != nil {
		b.Fatalf("load agents: %v", err)
	}
	spec := BenchTodosSpec{N: todos, Agents: agents, DueFrom: Base, Spread: 24 * time.Hour}
	if err := load.Todos(ctx, spec); err != nil {
		b.Fatalf("load todos: %v", err)
	}
	b.Logf("loaded %d agents and %d todos in %v", agents, todos, time.Since(start).Round(time.Millisecond))
	p := store.SweepParams{PerAgent: benchPerAgent, Limit: benchLimit}
	step := agents / receivers
	for i := 0; i < agents; i += step {
		id := BenchAgentID(i)
		p.Receivers = append(p.Receivers, id)
		if len(p.Receivers)%10 == 0 {
			p.Excluded = append(p.Excluded, id+":reviews")
		}
	}
	const interval = 30 * time.Second
	pass := func(b *testing.B) int {
		got, err := ps.SweepRing(ctx, p)
		if err != nil {
			b.Fatalf("SweepRing: %v", err)
		}
		return len(got)
	}
	explain := func(b *testing.B) {
		if load.Explain != nil && os.Getenv(ExplainBenchEnv) == "1" {
			b.StopTimer()
			load.Explain(b, p)
		}
	}
	passes := 0 // kept across the runs b.Run makes, so time only moves on
	b.Run("steady", func(b *testing.B) {
		rung := 0
		for b.Loop() {
			p.Now = Base.Add(time.Duration(passes) * interval)
			passes++
			rung += pass(b)
		}
		b.ReportMetric(float64(rung)/float64(b.N), "rings/op")
		p.Now = Base.Add(time.Duration(passes) * interval)
		explain(b)
	})
	b.Run("idle", func(b *testing.B) {
		for pass(b) > 0 { // ring everything due at p.Now first
		}
		rung := 0
		for b.Loop() {
			rung += pass(b)
		}
		if rung != 0 {
			b.Fatalf("idle passes rang %d todos", rung)
		}
		explain(b)
	})
}

// BenchChangedSince measures the evaluator's per-pass safety net,
// ListAgentsChangedSince (design: Presence evaluator), over 100 000 agents whose
// updated_at lies in the 100 s before Base: "none" asks for changes since
// Base, when none changed (goal: well under 10 ms); "100-changed" first
// writes the presence of 100 agents at Base and lists those. s must be
// empty.
func BenchChangedSince(b *testing.B, s store.Store, load BenchLoad) {
	ps, ok := s.(store.PresenceStore)
	if !ok {
		b.Fatalf("%T does not implement store.PresenceStore", s)
	}
	const n = 100_000
	start := time.Now()
	if err := load.Agents(b.Context(), BenchAgentsSpec{N: n, UpdatedFrom: Base.Add(-n * time.Millisecond), Step: time.Millisecond}); err != nil {
		b.Fatalf("load agents: %v", err)
	}
	b.Logf("loaded %d agents in %v", n, time.Since(start).Round(time.Millisecond))
	run := func(b *testing.B, want int) {
		p := store.ListChangedParams{Since: Base, Limit: 1000}
		b.ReportAllocs()
		for b.Loop() {
			got, err := ps.ListAgentsChangedSince(b.Context(), p)
			if err != nil {
				b.Fatalf("ListAgentsChangedSince: %v", err)
			}
			if len(got) != want {
				b.Fatalf("ListAgentsChangedSince = %d agents, want %d", len(got), want)
			}
		}
		if load.Explain != nil && os.Getenv(ExplainBenchEnv) == "1" {
			b.StopTimer()
			load.Explain(b, p)
		}
	}
	b.Run("none", func(b *testing.B) { run(b, 0) })
	for i := range 100 {
		id := BenchAgentID(i * (n / 100))
		_, err := ps.UpdatePresence(b.Context(), store.UpdatePresenceParams{AgentID: id, Now: Base, SetShift: true, Shift: "Mon-Fri 09:00-17:00",
			Audit: presenceRecord(id, "agent.shift", nil)})
		if err != nil {
			b.Fatalf("UpdatePresence: %v", err)
		}
	}
	b.Run("100-changed", func(b *testing.B) { run(b, 100) })
}
