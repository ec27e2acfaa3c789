package tracker

import (
	"context"
	"errors"
	"hash/maphash"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/dbclock"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/ratelimit"
	"github.com/rollcall/rollcall/internal/stall"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// New builds a tracker and subscribes it to bus.ChannelLiveness (claims)
// and bus.ChannelPresence (configuration changes). Start loads the stored
// state and starts the flush loop.
func New(o Options) *Tracker {
	workgroup.Defaults(&o.Clock, &o.Log)
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	if o.SignalPresence == nil {
		o.SignalPresence = func(context.Context, string, string) {}
	}
	cfg := o.Config.withDefaults()
	t := &Tracker{store: o.Store, bus: o.Bus, events: o.Events, clock: o.Clock, log: o.Log, metrics: o.Metrics,
		instance: o.Instance, signal: o.SignalPresence,
		cfg: cfg, limiter: ratelimit.New(cfg.RateLimit, cfg.RateBurst), seed: maphash.MakeSeed(),
		urgent: map[*lvEntry]struct{}{}, stopCh: make(chan struct{}), clk: dbclock.Of(o.Clock)}
	t.stalls = stall.New(t.clk.Base(), cfg.StallThreshold, cfg.PresenceTimeout, o.Log) // measures this process's own run
	t.audits.write = o.Store.ApplyReportedChanges
	for i := range t.shards {
		t.shards[i].m = map[string]*lvEntry{}
	}
	bus.Listen(t.bus, t.onClaims, nil)
	bus.Listen(t.bus, t.onSync, nil)
	bus.Listen(t.bus, t.onPresenceSignal, nil)
	return t
}

// Start applies the start rule and starts the flush loop (design:
// Start rule, Flush loop). It loads the agents stored online or
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
	// clock, which the Service measured first (app.Service.StartLiveness).
	if t.cfg.OwnerLease > 0 {
		// Acquired before any owner is recorded, so a death right after
		// the start still releases its agents (design: Owner lease).
		if _, err := t.store.RenewOwnerLease(ctx, store.RenewOwnerLeaseParams{Instance: t.instance, ExpiresAt: t.now().Add(t.cfg.OwnerLease)}); err != nil {
			t.log.Warn("owner lease not acquired at start; retrying in the lease loop", "err", err)
		} else {
			t.leaseHeld.Store(true)
			t.leaseSince.Store(t.now().UnixMicro())
		}
	}
	if err := t.load(ctx); err != nil {
		return err
	}
	if t.cfg.OwnerLease > 0 {
		// After the start rule: an agent it loaded keeps the start rule's
		// deadline when this instance takes its dead owner's lease over.
		if _, err := t.checkLeases(ctx); err != nil {
			t.log.Warn("owner lease: check at start failed; retrying in the lease loop", "err", err)
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.loopDone = cancel, make(chan struct{})
	if t.cfg.OwnerLease > 0 {
		t.leaseDone = make(chan struct{})
		go t.leaseLoop(lctx, t.leaseDone)
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
		workgroup.Rearm(lctx.Done(), timer, func() time.Duration {
			if _, err := t.flush(lctx); err != nil && lctx.Err() == nil {
				t.log.Warn("liveness flush failed; the entries stay dirty for the next pass", "err", err)
			}
			t.limiter.Prune(t.now())
			t.flushMu.Lock()
			next := t.flushedAt.Add(t.cfg.PersistInterval)
			t.flushMu.Unlock()
			return max(next.Sub(t.now()), 0)
		})
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

// Stop stops the tracker for shutdown (design: Shutdown flush): the
// timers stop WITHOUT publishing (a restart is not an agent going offline),
// the flush loop ends, and a last flush writes the dirty entries within
// ctx, or within shutdown.total_timeout when ctx has no deadline. It
// returns the flush's error. Heartbeats accepted afterwards are kept in
// memory only.
func (t *Tracker) Stop(ctx context.Context) error {
	if t.stopped.CompareAndSwap(false, true) {
		close(t.stopCh)
	}
	t.runMu.Lock()
	if t.cancel != nil {
		t.cancel()
		<-t.loopDone
		if t.leaseDone != nil {
			<-t.leaseDone
		}
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
	t.waitTransitions(ctx)
	n, err := t.flush(ctx)
	// Flushed first: whoever takes the agents over reads fresh heartbeats
	// (design: Owner lease).
	t.releaseLease(ctx)
	t.log.Info("liveness tracker stopped", "rows_flushed", n, "err", err)
	return err
}
