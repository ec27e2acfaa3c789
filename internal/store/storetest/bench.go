package storetest

import (
	"fmt"
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
