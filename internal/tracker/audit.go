package tracker

import (
	"context"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/store"
)

// The reported-change audit (design: Billing-mode audit) as a group
// commit. Every audited write appends to the one audit chain, so
// the store serialises them (PostgreSQL: an advisory lock; SQLite: the one
// write connection). One transaction per heartbeat made a burst of first
// reports — 2 000 agents connecting after a restart — queue one by one
// behind that lock, each holding a pool connection while it waited. The
// batcher hands every change that is waiting to one ApplyReportedChanges
// call instead: one transaction, one row-lock pass, one acquisition of the
// chain's lock, one pool connection. Each change is still compared again
// under the row lock and audited on its own.
//
// Each agent has at most one change waiting (its heartbeats are serialised
// by the entry's lock), so a batch holds at most one element per agent.

// maxAuditBatch bounds one transaction of the batcher.
const maxAuditBatch = 500

// auditTimeout bounds one batch's transaction.
const auditTimeout = 30 * time.Second

type auditBatcher struct {
	write   func(context.Context, []store.ApplyReportedChangeParams) ([]bool, error) // Store.ApplyReportedChanges
	mu      sync.Mutex
	queue   []*auditReq
	running bool
}

type auditReq struct {
	p    store.ApplyReportedChangeParams
	done chan auditRes // buffered: the batcher never blocks on a caller gone
}

type auditRes struct {
	wrote bool
	err   error
}

// apply queues p for the next batch and waits for its result (or ctx).
// A change whose caller gave up is still written (or not) by its batch;
// the next heartbeat compares with the row again.
func (b *auditBatcher) apply(ctx context.Context, p store.ApplyReportedChangeParams) (bool, error) {
	r := &auditReq{p: p, done: make(chan auditRes, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, r)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		go b.run()
	}
	select {
	case res := <-r.done:
		return res.wrote, res.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// run writes batches until the queue is empty.
func (b *auditBatcher) run() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxAuditBatch)
		if n == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		batch := b.queue[:n:n]
		b.queue = b.queue[n:]
		b.mu.Unlock()
		ps := make([]store.ApplyReportedChangeParams, len(batch))
		for i, r := range batch {
			ps[i] = r.p
		}
		ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
		wrote, err := b.write(ctx, ps)
		cancel()
		for i, r := range batch {
			res := auditRes{err: err}
			if err == nil {
				res.wrote = wrote[i]
			}
			r.done <- res
		}
	}
}

// waiting returns how many reported changes wait for the next group commit
// (not counting the batch being written).
func (b *auditBatcher) waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
