package doorbell

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Ring sends the todo doorbell for r on create: only while the agent is in
// (design: Held doorbells) and the queue is not reported not-ready, to one
// local session, deduplicated per todo for DedupTTL. A queued ring is
// recorded (ring_attempts+1). It reports whether a notification was
// queued.
func (d *Engine) Ring(r domain.TodoReady) bool {
	return d.deliver(r, ringCreate)
}

// ringKind says where a ring comes from.
type ringKind int

const (
	// ringCreate: the todo-ready signal (or the pushing instance itself).
	// Filtered by presence and readiness, deduplicated, recorded here.
	ringCreate ringKind = iota
	// ringSweep: the sweep selected, filtered and counted the todo in one
	// statement; it is sent whatever the dedup says, and marks it.
	ringSweep
	// ringCatchUp: RingMissed after a bus outage selected and counted it;
	// skipped when this instance rang it within the dedup TTL (its record
	// was not written yet), and marks the dedup so a late echo is not sent.
	ringCatchUp
)

// deliver queues the doorbell on one of this instance's sessions of the
// agent (see ringKind for the filters of each kind).
func (d *Engine) deliver(r domain.TodoReady, kind ringKind) bool {
	onCreate := kind == ringCreate
	hub := d.sessionHub()
	if hub == nil {
		return false
	}
	sessions := hub.AgentSessions(r.AgentID)
	if len(sessions) == 0 {
		return false
	}
	now := d.now()
	if onCreate {
		if p, ok := d.presence.Presence(r.AgentID, now); !ok || p != "in" {
			return false
		}
		if d.presence.NotReady(r.AgentID, r.Queue) {
			return false
		}
	}
	d.mu.Lock()
	if !d.recent.add(r.TodoID, now) && kind != ringSweep {
		d.mu.Unlock()
		return false
	}
	order := pickOrder(sessions, d.rr[r.AgentID], d.badLocked(now))
	d.rr[r.AgentID]++
	d.mu.Unlock()

	msg := domain.TodoDoorbell(r)
	for _, si := range order {
		if err := hub.Notify(si.ID, msg); err != nil {
			continue
		}
		d.metrics.DoorbellRung()
		if len(sessions) > 1 {
			d.watch(r, si.ID, []string{si.ID}, now)
		}
		if onCreate && !d.queueRecord(store.MarkRungParams{TodoID: r.TodoID, At: now}) {
			d.log.Warn("ring record dropped: queue full", "todo_id", r.TodoID)
		}
		return true
	}
	if onCreate {
		d.mu.Lock()
		d.recent.remove(r.TodoID)
		d.mu.Unlock()
	}
	return false
}

// queueRecord queues m for RunRecorder; false when the queue is full.
func (d *Engine) queueRecord(m store.MarkRungParams) bool {
	d.qmu.Lock()
	ok := len(d.queued) < maxQueuedRecords
	if ok {
		d.queued = append(d.queued, m)
	}
	batch := len(d.queued) >= maxRecordBatch
	d.qmu.Unlock()
	if ok {
		nudge(d.wake)
		if batch {
			nudge(d.full)
		}
	}
	return ok
}

// nudge leaves a token in ch unless one is there already.
func nudge(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// takeRecords removes and returns up to maxRecordBatch of the oldest
// queued records (none when nothing is queued). The caller holds writing.
func (d *Engine) takeRecords() []store.MarkRungParams {
	d.qmu.Lock()
	defer d.qmu.Unlock()
	n := min(len(d.queued), maxRecordBatch)
	batch := d.queued[:n:n] // appends go past the end, never over it
	d.queued = d.queued[n:]
	if len(d.queued) == 0 {
		d.queued = nil // let the drained array go
	}
	return batch
}

// recordDelay is how long RunRecorder lets ring records gather before it
// writes them (at once when a whole batch is queued). Why: on SQLite a
// transaction per ring took the one writer just as the next push wanted
// it (push → doorbell p50 0.59 ms, against 0.50 ms with records gathered
// this long); a record written up to this much later changes nothing the
// sweep decides on (design: Ring on create).
const recordDelay = 50 * time.Millisecond

// RunRecorder writes ring records until ctx ends: recordDelay after the
// first one arrives (at once when a whole batch is queued), every record
// queued by then, at most maxRecordBatch to a transaction. It drains what
// is queued before returning.
func (d *Engine) RunRecorder(ctx context.Context) {
	for {
		select {
		case <-d.wake:
		case <-ctx.Done():
			d.DrainRecords()
			return
		}
		t := time.NewTimer(recordDelay)
		select {
		case <-t.C:
		case <-d.full:
		case <-ctx.Done():
		}
		t.Stop()
		d.DrainRecords()
	}
}

// DrainRecords writes every queued ring record now, on the caller's
// goroutine, in batches of at most maxRecordBatch; when it returns, every
// record queued before the call is written (or its failure logged), also
// one RunRecorder had taken: before a catch-up, so todos this instance
// already rang count as rung.
func (d *Engine) DrainRecords() {
	d.writing.Lock()
	defer d.writing.Unlock()
	for {
		batch := d.takeRecords()
		if len(batch) == 0 {
			return
		}
		d.record(batch)
	}
}

// record writes batch in one transaction.
func (d *Engine) record(batch []store.MarkRungParams) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.store.MarkRungBatch(ctx, batch); err != nil {
		d.log.Warn("rings not recorded", "rings", len(batch), "first_todo_id", batch[0].TodoID, "err", err)
	}
}

// readyOf is the ring of a stored todo.
func readyOf(t domain.Todo) domain.TodoReady {
	return domain.TodoReady{AgentID: t.AgentID, TodoID: t.ID, Queue: t.Queue, Title: t.Title, Kind: t.Kind, Source: t.Source, PoolID: t.PoolID}
}
