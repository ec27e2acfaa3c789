package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The group commit of audited creates (design: Group commit).
var groupCommitTests = []contractTest{
	{"GroupCommit/ConcurrentAuditedCreates", testGroupCommitConcurrent},
	{"GroupCommit/BadItemAlone", testGroupCommitBadItem},
}

// batchObserver is what both adapters offer for the metric
// rollcall_store_commit_batch_size.
type batchObserver interface{ ObserveCommitBatches(func(n int)) }

// batches records the size of every group commit of s; the first one
// waits until hold is closed, so the creates started meanwhile queue
// behind it.
type batches struct {
	mu    sync.Mutex
	sizes []int
	hold  chan struct{}
}

func observeBatches(t *testing.T, s store.Store) *batches {
	t.Helper()
	o, ok := s.(batchObserver)
	if !ok {
		t.Fatalf("%T has no ObserveCommitBatches", s)
	}
	b := &batches{hold: make(chan struct{})}
	o.ObserveCommitBatches(func(n int) {
		b.mu.Lock()
		b.sizes = append(b.sizes, n)
		first := len(b.sizes) == 1
		b.mu.Unlock()
		if first {
			<-b.hold
		}
	})
	t.Cleanup(func() { o.ObserveCommitBatches(nil) })
	return b
}

func (b *batches) got() (count, total, largest int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.sizes {
		total += n
		largest = max(largest, n)
	}
	return len(b.sizes), total, largest
}

// auditedPush is an audited pooled push of td, as the pool push use case
// writes it.
func auditedPush(td domain.Todo) store.CreateTodoParams {
	return store.CreateTodoParams{Todo: td, Audit: &domain.AuditRecord{Actor: "operator:" + ownerID, Action: "todo.push_pool",
		Data: map[string]any{"pool_id": td.PoolID, "todo_id": td.ID}}}
}

type createResult struct {
	todo    domain.Todo
	created bool
	err     error
}

// createAtOnce runs every create in its own goroutine, all released at
// once; the first commit is held until every goroutine has started, so
// the others arrive while it is in flight.
func createAtOnce(t *testing.T, s store.Store, b *batches, ctxs []context.Context, ps []store.CreateTodoParams) []createResult {
	t.Helper()
	out := make([]createResult, len(ps))
	var wg, started sync.WaitGroup
	start := make(chan struct{})
	started.Add(len(ps))
	for i, p := range ps {
		wg.Go(func() {
			<-start
			started.Done()
			td, created, err := s.CreateTodo(ctxs[i], p)
			out[i] = createResult{td, created, err}
		})
	}
	close(start)
	started.Wait()
	close(b.hold)
	wg.Wait()
	return out
}

func testGroupCommitConcurrent(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	p := createPool(t, s, newPool("builders", []string{"build"}, a))
	taken := push(t, s, pooledTodo(p.ID, "build", at(0)))
	before := auditCount(t, s)
	b := observeBatches(t, s)

	// 40 distinct pushes, 2 × 4 retries of one key each, an item refused
	// by the database (its id is taken), one to a pool that does not
	// exist, one whose caller gave up before it was written, and an
	// audited agent push (a handoff).
	const distinct, retries = 40, 4
	var ps []store.CreateTodoParams
	for i := range distinct {
		ps = append(ps, auditedPush(pooledTodo(p.ID, "build", at(time.Duration(i+1)*time.Millisecond))))
	}
	for k := range 2 {
		for range retries {
			td := pooledTodo(p.ID, "build", at(time.Second))
			td.IdempotencyKey = fmt.Sprintf("retried-%d", k)
			ps = append(ps, auditedPush(td))
		}
	}
	dupID := pooledTodo(p.ID, "build", at(2*time.Second))
	dupID.ID = taken.ID
	ps = append(ps, auditedPush(dupID))
	ghost := pooledTodo(uuid.NewString(), "build", at(2*time.Second))
	ps = append(ps, auditedPush(ghost))
	gaveUp := pooledTodo(p.ID, "build", at(2*time.Second))
	ps = append(ps, auditedPush(gaveUp))
	handoff := newTodo(a.ID, "build", at(3*time.Second))
	ps = append(ps, store.CreateTodoParams{Todo: handoff, Audit: &domain.AuditRecord{Actor: "agent:" + a.ID, Action: "todo.handoff", AgentID: a.ID}})
	ctxs := make([]context.Context, len(ps))
	for i := range ctxs {
		ctxs[i] = ctx
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	ctxs[len(ps)-2] = cancelled

	res := createAtOnce(t, s, b, ctxs, ps)

	created := 0
	for i := range distinct {
		r := res[i]
		if r.err != nil || !r.created || r.todo.ID != ps[i].Todo.ID || r.todo.PoolID != p.ID {
			t.Errorf("push %d = %s created=%v err=%v", i, r.todo.ID, r.created, r.err)
		}
		created++
	}
	for k := range 2 {
		var ids = map[string]bool{}
		wins := 0
		for j := range retries {
			r := res[distinct+k*retries+j]
			if r.err != nil {
				t.Errorf("retry %d of key %d: %v", j, k, r.err)
				continue
			}
			ids[r.todo.ID] = true
			if r.created {
				wins++
			}
		}
		if len(ids) != 1 || wins != 1 {
			t.Errorf("key %d: %d todos, %d created; want 1 todo created once and returned to every retry", k, len(ids), wins)
		}
		created += wins
	}
	n := distinct + 2*retries
	wantErr(t, "CreateTodo(taken id) in a batch", res[n].err, domain.ErrConflict)
	wantErr(t, "CreateTodo(unknown pool) in a batch", res[n+1].err, domain.ErrNotFound)
	wantErr(t, "CreateTodo(caller gave up)", res[n+2].err, context.Canceled)
	if _, err := s.GetTodo(ctx, gaveUp.ID); err == nil {
		t.Error("the todo of a caller that gave up before its batch was written exists")
	}
	if r := res[n+3]; r.err != nil || !r.created || r.todo.AgentID != a.ID {
		t.Errorf("audited agent push in a batch = %+v, %v", r.todo, r.err)
	}
	created++
	if got := getTodo(t, s, taken.ID); !got.CreatedAt.Equal(taken.CreatedAt) {
		t.Errorf("the refused item changed the todo that holds its id: %+v", got)
	}

	// One audit entry per created todo, the chain intact.
	if got := auditCount(t, s) - before; got != created {
		t.Errorf("audit entries appended = %d, want %d (one per created todo)", got, created)
	}
	v, err := s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	if !v.OK || v.Checked != before+created {
		t.Errorf("VerifyAudit = %+v, want ok over %d entries", v, before+created)
	}
	live, err := s.ListTodos(ctx, store.ListTodosParams{PoolID: p.ID})
	must(t, "ListTodos(pool)", err)
	if len(live) != 1+distinct+2 {
		t.Errorf("pool holds %d todos, want %d", len(live), 1+distinct+2)
	}

	// The writes were batched: fewer commits than calls, every call in one.
	count, total, largest := b.got()
	// (the caller that gave up may have left the queue before a batch took it)
	if total < len(ps)-1 || total > len(ps) || count >= len(ps) || largest < 2 {
		t.Errorf("group commits: %d batches of %d writes (largest %d) for %d calls; want fewer batches than calls", count, total, largest, len(ps))
	}
	t.Logf("%d calls in %d group commits, largest %d", len(ps), count, largest)
}

// testGroupCommitBadItem: a refused create alone in its batch fails
// alone, and the next batch commits.
func testGroupCommitBadItem(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "build"))
	p := createPool(t, s, newPool("builders", []string{"build"}, a))
	_, _, err := s.CreateTodo(ctx, auditedPush(pooledTodo(uuid.NewString(), "build", at(0))))
	wantErr(t, "CreateTodo(unknown pool)", err, domain.ErrNotFound)
	td, created, err := s.CreateTodo(ctx, auditedPush(pooledTodo(p.ID, "build", at(time.Second))))
	if err != nil || !created {
		t.Fatalf("CreateTodo after a refused one = %+v, %v, %v", td, created, err)
	}
	v, err := s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	if !v.OK {
		t.Errorf("VerifyAudit = %+v", v)
	}
}
