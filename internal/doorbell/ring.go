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
		if onCreate {
			select {
			case d.marks <- store.MarkRungParams{TodoID: r.TodoID, At: now}:
			default:
				d.log.Warn("ring record dropped: queue full", "todo_id", r.TodoID)
			}
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

// RunRecorder writes ring records until ctx ends; it drains what is queued
// before returning.
func (d *Engine) RunRecorder(ctx context.Context) {
	for {
		select {
		case m := <-d.marks:
			d.record(m)
		case <-ctx.Done():
			d.DrainRecords()
			return
		}
	}
}

func (d *Engine) record(m store.MarkRungParams) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.store.MarkRung(ctx, m); err != nil {
		d.log.Warn("ring not recorded", "todo_id", m.TodoID, "err", err)
	}
}

// DrainRecords writes every queued ring record now, on the caller's
// goroutine: before a catch-up, so todos this instance already rang count
// as rung.
func (d *Engine) DrainRecords() {
	for {
		select {
		case m := <-d.marks:
			d.record(m)
		default:
			return
		}
	}
}

// readyOf is the ring of a stored todo.
func readyOf(t domain.Todo) domain.TodoReady {
	return domain.TodoReady{AgentID: t.AgentID, TodoID: t.ID, Queue: t.Queue, Title: t.Title, Kind: t.Kind, Source: t.Source, PoolID: t.PoolID}
}
