// Package groupcommit runs group commits (design: Group commit):
// concurrent writes that arrive while a commit is in flight are written
// together in the next one, one round trip and one commit for all of them,
// in arrival order. Nothing waits for a batch to fill: the first caller
// commits at once whatever is queued (itself alone when nothing is), and
// while it does, later callers queue; when it is done, the next batch is
// committed at once by a goroutine that drains the queue. The store's
// audited todo creates and the PostgreSQL bus's NOTIFYs use it.
package groupcommit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
)

// MaxBatch bounds the writes of one group commit.
const MaxBatch = 64

// Item is one caller's write in a group commit: In is what to write;
// Run sets Out or Err. Ctx is the caller's context: Run skips an item
// whose Ctx is done before it is written (Err = its error), and the
// batch's own context ends only when every item's Ctx has.
type Item[In, Out any] struct {
	Ctx context.Context
	In  In
	Out Out
	Err error

	done   chan struct{}    // closed once Out/Err are final
	queued bool             // still in the queue (guarded by the committer's mu)
	then   func(Out, error) // Submit's callback, run once Out/Err are final
}

// Skip reports whether the item's caller has given up (its Ctx is done),
// and if so sets Err to the context's error: Run writes nothing for it.
func (it *Item[In, Out]) Skip() bool {
	if err := it.Ctx.Err(); err != nil {
		it.Err = err
		return true
	}
	return false
}

// Committer runs group commits of one kind of write. Run writes a
// batch (at most MaxBatch items, in arrival order) in one
// transaction and sets every item's Out or Err; an error of one item must
// not fail the others. The zero value is not usable: set Run.
type Committer[In, Out any] struct {
	Run func(ctx context.Context, batch []*Item[In, Out])

	mu         sync.Mutex
	queue      []*Item[In, Out]
	committing bool // a batch is being written; new items queue

	observe atomic.Pointer[func(int)]
}

// Observe sets f to be told the size of every batch written (a metric:
// e.g. rollcall_store_commit_batch_size); nil stops it.
func (g *Committer[In, Out]) Observe(f func(int)) {
	if f == nil {
		g.observe.Store(nil)
		return
	}
	g.observe.Store(&f)
}

// Do writes in with whatever other writes are queued and returns its
// result. A ctx done while the write is still queued returns ctx's error
// and writes nothing; once its batch is being written, Do waits for the
// batch (which stops early only when every caller in it has given up).
func (g *Committer[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	it := &Item[In, Out]{Ctx: ctx, In: in, done: make(chan struct{}), queued: true}
	g.mu.Lock()
	g.queue = append(g.queue, it)
	if !g.committing {
		g.committing = true
		batch := g.takeLocked()
		g.mu.Unlock()
		g.commit(batch)
		g.next()
		return it.Out, it.Err
	}
	g.mu.Unlock()
	select {
	case <-it.done:
	case <-ctx.Done():
		g.mu.Lock()
		if it.queued { // not taken into a batch yet: leave the queue
			g.queue = slices.Delete(g.queue, slices.Index(g.queue, it), slices.Index(g.queue, it)+1)
			g.mu.Unlock()
			var zero Out
			return zero, ctx.Err()
		}
		g.mu.Unlock()
		<-it.done
	}
	return it.Out, it.Err
}

// Submit queues in for the next group commit and returns at once, keeping
// arrival order with Do's callers: the write is done by a goroutine that
// drains the queue, and then, if not nil, is called on it with the result.
// A ctx done before the item is written skips it (then gets ctx's error).
// Why: a write whose caller need not wait for it (a lossy signal after a
// commit) should not add its round trip to the caller's answer.
func (g *Committer[In, Out]) Submit(ctx context.Context, in In, then func(Out, error)) {
	it := &Item[In, Out]{Ctx: ctx, In: in, done: make(chan struct{}), queued: true, then: then}
	g.mu.Lock()
	g.queue = append(g.queue, it)
	if g.committing {
		g.mu.Unlock()
		return
	}
	g.committing = true
	g.mu.Unlock()
	go g.drain()
}

// takeLocked takes the next batch off the queue (g.mu held).
func (g *Committer[In, Out]) takeLocked() []*Item[In, Out] {
	n := min(len(g.queue), MaxBatch)
	batch := make([]*Item[In, Out], n)
	copy(batch, g.queue)
	for _, it := range batch {
		it.queued = false
	}
	clear(g.queue[:n])
	g.queue = g.queue[n:]
	if len(g.queue) == 0 {
		g.queue = nil // let the backing array go
	}
	return batch
}

// next hands the queue that built up during a commit to a goroutine that
// drains it batch by batch, or ends the commit when nothing queued: the
// caller that committed returns at once.
func (g *Committer[In, Out]) next() {
	g.mu.Lock()
	if len(g.queue) == 0 {
		g.committing = false
		g.mu.Unlock()
		return
	}
	g.mu.Unlock()
	go g.drain()
}

// drain commits the queue batch by batch until it is empty, then ends the
// commit (g.committing is set).
func (g *Committer[In, Out]) drain() {
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.committing = false
			g.mu.Unlock()
			return
		}
		batch := g.takeLocked()
		g.mu.Unlock()
		g.commit(batch)
	}
}

// commit runs one batch under a context that ends when every item's Ctx
// has ended (one caller giving up does not stop the others' commit), and
// wakes every caller.
func (g *Committer[In, Out]) commit(batch []*Item[In, Out]) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].Ctx))
	left := atomic.Int64{}
	left.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, it := range batch {
		stops[i] = context.AfterFunc(it.Ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	if f := g.observe.Load(); f != nil {
		(*f)(len(batch))
	}
	g.Run(ctx, batch)
	for i, it := range batch {
		stops[i]()
		close(it.done)
		if it.then != nil {
			it.then(it.Out, it.Err)
		}
	}
	cancel()
}
