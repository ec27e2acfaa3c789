package tracker

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/store"
)

// flush writes every dirty entry in one unit of work, ascending by agent id,
// with the monotone write, and returns how many rows it wrote.
// The loop calls it one agent.heartbeat_persist_interval after the previous
// pass committed, so each agent is written at most once per interval and the
// writes per second are bounded by agents ÷ interval, whatever the heartbeat
// rate. On an error the entries stay dirty for the next pass.
func (t *Tracker) flush(ctx context.Context) (int, error) {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	n, err := t.flushLocked(ctx, t.entries())
	t.flushedAt = t.now() // the commit: the next pass follows one interval after it
	return n, err
}

// flushLocked writes the dirty ones of es (flushMu held: the flush loop and
// the transition writer never write the same agent concurrently, so rows
// reach the store in the order their state was read).
func (t *Tracker) flushLocked(ctx context.Context, es []*lvEntry) (int, error) {
	var rows []store.HeartbeatRow
	var dirty []*lvEntry
	for _, e := range es {
		e.mu.Lock()
		if e.dirty && !e.lastHB.IsZero() {
			r := store.HeartbeatRow{AgentID: e.id, State: e.state, LastHeartbeatAt: e.lastHB}
			if e.hb != nil {
				r.HasReport, r.RuntimeVersion, r.ReportedState = true, e.hb.RuntimeVersion, e.hb.Canonical()
			}
			if r.State == liveness.StateUnknown {
				r.State = liveness.StateOffline
			}
			rows = append(rows, r)
			dirty = append(dirty, e)
			e.dirty = false
		}
		e.mu.Unlock()
	}
	if len(rows) == 0 {
		return 0, nil
	}
	slices.SortFunc(rows, func(a, b store.HeartbeatRow) int { return strings.Compare(a.AgentID, b.AgentID) })
	n, err := t.store.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{Rows: rows})
	if err != nil {
		for _, e := range dirty {
			e.mu.Lock()
			e.dirty = true
			e.mu.Unlock()
		}
		return 0, err
	}
	t.written.Add(int64(n))
	t.metrics.HeartbeatRowsPersisted(n)
	return n, nil
}

// persistSoon queues the entry for the transition writer: a change of the
// liveness state (online, degraded, offline; the first heartbeat; coming
// back) is written at once, in a small group commit, instead of at the next
// flush one agent.heartbeat_persist_interval later, so another instance
// reading the row — GET /v1/agents/{ref}/status there — agrees within a
// write's latency. Called with e.mu held; it only takes
// urgentMu.
func (t *Tracker) persistSoon(e *lvEntry) {
	t.urgentMu.Lock()
	t.urgent[e] = struct{}{}
	// Once stopped, Stop's final flush writes what is dirty; no new writer
	// starts that could outlive the store.
	start := !t.urgentRun && !t.stopped.Load()
	if start {
		t.urgentRun = true
		t.urgentDone = make(chan struct{})
	}
	t.urgentMu.Unlock()
	if start {
		go t.writeTransitions()
	}
}

// waitTransitions waits, within ctx, for a running transition writer to
// end; Stop calls it after setting stopped so that no write or log line of
// the writer happens after Stop returns.
func (t *Tracker) waitTransitions(ctx context.Context) {
	t.urgentMu.Lock()
	done := t.urgentDone
	running := t.urgentRun
	t.urgentMu.Unlock()
	if !running || done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// transitionRetry is the pause before a failed transition write is tried
// again (the flush loop would retry only one persist interval later).
const transitionRetry = time.Second

// writeTransitions writes queued transitions until none is left.
func (t *Tracker) writeTransitions() {
	for {
		t.urgentMu.Lock()
		batch := make([]*lvEntry, 0, len(t.urgent))
		for e := range t.urgent {
			batch = append(batch, e)
		}
		clear(t.urgent)
		if len(batch) == 0 || t.stopped.Load() {
			// Stopped: the final flush of Stop writes what is dirty.
			t.urgentRun = false
			close(t.urgentDone)
			t.urgentMu.Unlock()
			return
		}
		t.urgentMu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.flushMu.Lock()
		_, err := t.flushLocked(ctx, batch)
		t.flushMu.Unlock()
		cancel()
		if err != nil {
			t.log.Warn("liveness: transitions not written; retrying", "agents", len(batch), "err", err)
			t.urgentMu.Lock()
			for _, e := range batch {
				t.urgent[e] = struct{}{}
			}
			t.urgentMu.Unlock()
			t.sleepUnlessStopped(transitionRetry) // a backoff, not a wait for correctness
			continue
		}
	}
}

// sleepUnlessStopped pauses for d, or less when Stop is called meanwhile.
func (t *Tracker) sleepUnlessStopped(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.stopCh:
	}
}
