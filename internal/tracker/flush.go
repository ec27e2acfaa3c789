package tracker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/store"
)

// Start applies the start rule and starts the flush loop (design: Heartbeat
// presence, Rules). It loads the agents stored online or
// degraded: one whose last heartbeat is missing or older than
// agent.presence_timeout + agent.heartbeat_persist_interval is offline at
// once (published, written by the first flush); the others keep their
// state until start + agent.presence_timeout, so adapters reconnecting
// after a restart (4013) are not reported offline. Inactive and revoked
// agents load inactive: no metric series, but their deadline runs. Then it
// asks the other instances to claim the agents they hold fresh heartbeats
// of. Errors: the store could not be read (the loop is not started).
func (t *Tracker) Start(ctx context.Context) error {
	t.runMu.Lock()
	defer t.runMu.Unlock()
	if t.cancel != nil {
		return errors.New("liveness tracker already started")
	}
	// The start rule compares stored heartbeats with now: on the database's
	// clock, measured first.
	if err := t.syncClock(ctx); err != nil {
		t.log.Warn("liveness: database clock not measured at start; this process's clock is used until it is", "err", err)
	}
	if err := t.load(ctx); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.loopDone = cancel, make(chan struct{})
	if t.cfg.DBClock != nil {
		go t.clockLoop(lctx)
	}
	if t.stalls != nil {
		go t.stalls.Run(lctx)
	}
	// A timer re-armed one persist interval after each pass has committed
	// (not a ticker): a pass that runs long never lets the next one follow
	// closer than the interval, so each agent is written at most once per
	// interval.
	timer := t.clock.NewTimer(t.cfg.PersistInterval)
	go func() {
		defer close(t.loopDone)
		defer timer.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-timer.Chan():
			}
			if _, err := t.flush(lctx); err != nil && lctx.Err() == nil {
				t.log.Warn("liveness flush failed; the entries stay dirty for the next pass", "err", err)
			}
			t.limiter.Prune(t.now())
			t.flushMu.Lock()
			next := t.flushedAt.Add(t.cfg.PersistInterval)
			t.flushMu.Unlock()
			timer.Reset(max(next.Sub(t.now()), 0))
		}
	}()
	t.RequestClaims(ctx)
	return nil
}

func (t *Tracker) load(ctx context.Context) error {
	start := t.now()
	after, loaded, offline := "", 0, 0
	for {
		page, err := t.store.ListLiveAgents(ctx, store.ListLiveAgentsParams{AfterID: after, Limit: 1000})
		if err != nil {
			return err
		}
		for i := range page {
			if t.loadOne(&page[i], start) {
				offline++
			}
			loaded++
		}
		if len(page) < 1000 {
			break
		}
		after = page[len(page)-1].ID
	}
	if loaded > 0 {
		t.log.Info("liveness: start rule applied", "agents_stored_live", loaded, "offline_at_once", offline)
	}
	return nil
}

// loadOne creates the entry of an agent stored online or degraded and
// reports whether the start rule put it offline at once.
func (t *Tracker) loadOne(a *domain.Agent, start time.Time) bool {
	e := t.newEntry(a)
	st, dl := liveness.StartRule(a.Liveness.State, a.Liveness.LastHeartbeatAt, t.cfg.PresenceTimeout, t.cfg.PersistInterval, start)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fromStart, e.startDeadline, e.reported, e.owned = true, dl, a.Liveness.State, true
	sh := t.shard(a.ID)
	sh.mu.Lock()
	if sh.m[a.ID] != nil {
		sh.mu.Unlock()
		return false // a heartbeat got here first
	}
	sh.m[a.ID] = e
	sh.mu.Unlock()
	if st == liveness.StateOffline {
		if !e.lastHB.IsZero() {
			t.goOfflineLocked(e, start)
		} else {
			// No time to write with the monotone rule; publish only.
			e.state = liveness.StateOffline
			t.publishLocked(e)
		}
		return true
	}
	e.state = st
	t.assessLocked(e, start)
	t.armLocked(e, dl)
	return false
}

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
	start := !t.urgentRun
	t.urgentRun = true
	t.urgentMu.Unlock()
	if start {
		go t.writeTransitions()
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
			time.Sleep(transitionRetry) // a backoff, not a wait for correctness
			continue
		}
	}
}

// Stop stops the tracker for shutdown (design: Heartbeat presence, Rules): the
// timers stop WITHOUT publishing (a restart is not an agent going offline),
// the flush loop ends, and a last flush writes the dirty entries within
// ctx, or within shutdown.total_timeout when ctx has no deadline. It
// returns the flush's error. Heartbeats accepted afterwards are kept in
// memory only.
func (t *Tracker) Stop(ctx context.Context) error {
	t.stopped.Store(true)
	t.runMu.Lock()
	if t.cancel != nil {
		t.cancel()
		<-t.loopDone
	}
	t.runMu.Unlock()
	for _, e := range t.entries() {
		e.mu.Lock()
		if e.timer != nil {
			e.timer.Stop()
			e.armedAt = time.Time{}
		}
		e.mu.Unlock()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.cfg.ShutdownTimeout)
		defer cancel()
	}
	n, err := t.flush(ctx)
	t.log.Info("liveness tracker stopped", "rows_flushed", n, "err", err)
	return err
}
