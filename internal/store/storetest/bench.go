package storetest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// BenchPushClaimComplete measures the todo hot path at the store level
// (see docs/benchmarks.md): one op = CreateTodo + ClaimNext + CompleteTodo for one
// agent. s may be shared between calls.
func BenchPushClaimComplete(b *testing.B, s store.Store) {
	a, err := benchAgent(b, s)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := pushClaimComplete(b, s, a, i); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchPushClaimCompleteParallel is BenchPushClaimComplete from
// b.RunParallel goroutines (GOMAXPROCS × -cpu), each with its own agent, so
// writers contend for the store but never for one todo.
func BenchPushClaimCompleteParallel(b *testing.B, s store.Store) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		a, err := benchAgent(b, s)
		if err != nil {
			b.Error(err) // not Fatal: this is not the benchmark goroutine
			return
		}
		for i := 0; pb.Next(); i++ {
			if err := pushClaimComplete(b, s, a, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func benchAgent(b *testing.B, s store.Store) (domain.Agent, error) {
	a := newAgent("bench-"+uuid.NewString(), ownerID, "build")
	p, _ := vendParams(a)
	if err := s.CreateAgent(b.Context(), p); err != nil {
		return a, fmt.Errorf("CreateAgent: %w", err)
	}
	return a, nil
}

func pushClaimComplete(b *testing.B, s store.Store, a domain.Agent, i int) error {
	ctx := b.Context()
	now := Base.Add(time.Duration(i) * time.Millisecond)
	td := newTodo(a.ID, "build", now)
	td.ID = uuid.NewString()
	td.Payload = []byte(`{"n":1}`)
	if _, _, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: td}); err != nil {
		return fmt.Errorf("CreateTodo: %w", err)
	}
	got, err := s.ClaimNext(ctx, store.ClaimNextParams{AgentID: a.ID, Queues: a.Scope.Queues, Lease: time.Minute, Now: now})
	if err != nil {
		return fmt.Errorf("ClaimNext: %w", err)
	}
	if _, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: got.ID, Result: []byte(`{"ok":true}`), Now: now}); err != nil {
		return fmt.Errorf("CompleteTodo: %w", err)
	}
	return nil
}

// BenchCreateTodoParallel measures CreateTodo from b.RunParallel
// goroutines (GOMAXPROCS × -cpu), one agent each: audited creates are
// group-committed (design: Group commit), unaudited ones are one
// transaction each. One op = one create.
func BenchCreateTodoParallel(b *testing.B, s store.Store, audited bool) {
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		a, err := benchAgent(b, s)
		if err != nil {
			b.Error(err)
			return
		}
		for i := 0; pb.Next(); i++ {
			td := newTodo(a.ID, "build", Base.Add(time.Duration(i)*time.Millisecond))
			p := store.CreateTodoParams{Todo: td}
			if audited {
				p.Audit = &domain.AuditRecord{Actor: "agent:" + a.ID, Action: "todo.handoff", AgentID: a.ID}
			}
			if _, _, err := s.CreateTodo(b.Context(), p); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchCompleteAndClaim measures a worker looping over a queue at the
// store level (design: Complete and claim the next), with 0 and 1 000
// todos pending behind the one claimed (benchCompleteAndClaim), and from
// -cpu × 4 goroutines on one agent's queue with 100 pending
// (benchCompleteAndClaimParallel).
func BenchCompleteAndClaim(b *testing.B, s store.Store) {
	for _, backlog := range []int{0, 1000} {
		b.Run(fmt.Sprintf("backlog=%d", backlog), func(b *testing.B) { benchCompleteAndClaim(b, s, backlog) })
	}
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(4)
		benchCompleteAndClaimParallel(b, s, 100)
	})
}

// benchCompleteAndClaim: one op = CreateTodo (a producer's push, which
// keeps backlog todos pending behind the one claimed) + CompleteAndClaim
// of the todo held, claiming the oldest pending one. cc-ns/op is the
// CompleteAndClaim part alone. s may be shared between calls.
func benchCompleteAndClaim(b *testing.B, s store.Store, backlog int) {
	a, err := benchAgent(b, s)
	if err != nil {
		b.Fatal(err)
	}
	w := benchWorker{s: s, a: a}
	for range backlog + 1 {
		if err := w.push(b); err != nil {
			b.Fatal(err)
		}
	}
	held, err := w.claim(b)
	if err != nil {
		b.Fatal(err)
	}
	var cc time.Duration
	b.ReportAllocs()
	for b.Loop() {
		if err := w.push(b); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		held, err = w.completeAndClaim(b, held)
		cc += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cc.Nanoseconds())/float64(b.N), "cc-ns/op")
}

// benchCompleteAndClaimParallel is benchCompleteAndClaim from
// b.RunParallel goroutines (GOMAXPROCS × -cpu × SetParallelism) that
// share one agent and its queue, as workers with sessions of one agent
// do: they contend for the same oldest todos.
func benchCompleteAndClaimParallel(b *testing.B, s store.Store, backlog int) {
	a, err := benchAgent(b, s)
	if err != nil {
		b.Fatal(err)
	}
	w := &benchWorker{s: s, a: a}
	for range backlog {
		if err := w.push(b); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var held domain.Todo
		for pb.Next() {
			if err := w.push(b); err != nil {
				b.Error(err)
				return
			}
			var err error
			if held.ID == "" {
				held, err = w.claim(b)
			} else {
				held, err = w.completeAndClaim(b, held)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchWorker pushes to one agent's queue and works it; now advances a
// millisecond a push, so the todos are ordered by creation.
type benchWorker struct {
	s store.Store
	a domain.Agent
	n atomic.Int64
}

func (w *benchWorker) now() time.Time { return Base.Add(time.Duration(w.n.Load()) * time.Millisecond) }

func (w *benchWorker) push(b *testing.B) error {
	td := newTodo(w.a.ID, "build", Base.Add(time.Duration(w.n.Add(1))*time.Millisecond))
	td.Payload = []byte(`{"n":1}`)
	if _, _, err := w.s.CreateTodo(b.Context(), store.CreateTodoParams{Todo: td}); err != nil {
		return fmt.Errorf("CreateTodo: %w", err)
	}
	return nil
}

func (w *benchWorker) next() store.ClaimNextParams {
	return store.ClaimNextParams{AgentID: w.a.ID, Queues: w.a.Scope.Queues, Lease: time.Minute, Now: w.now(), N: 1}
}

// claim claims the oldest pending todo; none is an error.
func (w *benchWorker) claim(b *testing.B) (domain.Todo, error) {
	got, err := w.s.ClaimNext(b.Context(), w.next())
	if err != nil {
		return got, fmt.Errorf("ClaimNext: %w", err)
	}
	return got, nil
}

// completeAndClaim completes held and claims the next; when others took
// every pending todo meanwhile it claims alone.
func (w *benchWorker) completeAndClaim(b *testing.B, held domain.Todo) (domain.Todo, error) {
	_, next, err := w.s.CompleteAndClaim(b.Context(),
		store.CompleteTodoParams{AgentID: w.a.ID, TodoID: held.ID, Result: []byte(`{"ok":true}`), Now: w.now()}, w.next())
	if err != nil {
		return domain.Todo{}, fmt.Errorf("CompleteAndClaim: %w", err)
	}
	if len(next) == 0 {
		return w.claim(b)
	}
	return next[0], nil
}

// BenchMarkRung measures recording doorbell rings (design: Ring budget)
// one transaction each and 8 or 64 to a MarkRungBatch (benchMarkRung).
func BenchMarkRung(b *testing.B, s store.Store) {
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchMarkRung(b, s, batch) })
	}
}

// benchMarkRung: one op = batch rings recorded, over 256 pending todos in
// turn; batch 1 is one MarkRung (one transaction) a ring, as the doorbell's
// recorder wrote them one at a time, a larger batch one MarkRungBatch.
// ns/ring is the time per ring.
func benchMarkRung(b *testing.B, s store.Store, batch int) {
	a, err := benchAgent(b, s)
	if err != nil {
		b.Fatal(err)
	}
	w := benchWorker{s: s, a: a}
	ids := make([]string, 256)
	for i := range ids {
		td := newTodo(a.ID, "build", Base.Add(time.Duration(i)*time.Millisecond))
		if _, _, err := s.CreateTodo(b.Context(), store.CreateTodoParams{Todo: td}); err != nil {
			b.Fatal(err)
		}
		ids[i] = td.ID
	}
	marks := make([]store.MarkRungParams, batch)
	next := 0
	b.ReportAllocs()
	for b.Loop() {
		for i := range marks {
			marks[i] = store.MarkRungParams{TodoID: ids[next%len(ids)], At: w.now()}
			next++
		}
		if batch == 1 {
			_, err = markOne(b.Context(), s, marks[0])
		} else {
			_, err = s.MarkRungBatch(b.Context(), marks)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/ring")
}
