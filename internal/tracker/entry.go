package tracker

import (
	"context"
	"errors"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/store"
)

// entryFor returns the agent's entry, creating it from the row when the
// tracker has none (the stored values are the initial published pair).
func (t *Tracker) entryFor(a *domain.Agent) *lvEntry {
	if e := t.lookup(a.ID); e != nil {
		return e
	}
	e := t.newEntry(a)
	sh := t.shard(a.ID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if cur := sh.m[a.ID]; cur != nil {
		return cur
	}
	sh.m[a.ID] = e
	return e
}

func (t *Tracker) newEntry(a *domain.Agent) *lvEntry {
	lv := a.Liveness
	e := &lvEntry{id: a.ID, handle: a.Handle, owner: a.OwnerID, active: a.Active && !a.Revoked(), configAt: a.UpdatedAt,
		billingMode: a.BillingMode, toolClass: a.ToolClass,
		state:   lv.State,
		audited: store.ReportedPair{BillingMode: lv.ReportedBillingMode, ToolClass: lv.ReportedToolClass},
	}
	if e.state == "" {
		e.state = liveness.StateUnknown
	}
	if lv.LastHeartbeatAt != nil {
		e.lastHB = lv.LastHeartbeatAt.UTC()
	}
	if len(lv.ReportedState) > 0 {
		if h, err := liveness.DecodeHeartbeat(lv.ReportedState); err == nil {
			e.hb = &h
		}
	}
	if lv.ProjectReadiness != nil {
		if rs, err := decodeReadiness(lv.ProjectReadiness); err == nil {
			e.readiness, e.readinessKnown = rs, true
		} else {
			t.log.Warn("stored project_readiness does not decode; the next list is applied", "agent_id", a.ID, "err", err)
		}
	}
	e.pub = liveness.PublishPair{State: e.state, ReportedBillingMode: lv.ReportedBillingMode}
	if p, ok := t.events.LastPair(a.ID); ok {
		e.pub = p // what every instance last published wins over the row
	}
	return e
}

// stateOf is the liveness state of the entry at now as this instance knows
// it: the start rule's state until its deadline for an agent loaded at
// start; StateAt (inclusive boundary) once this instance owns a
// heartbeat; for an agent another instance owns, online (as reported) until
// the watch would take over, since the owner holds heartbeats at least as
// fresh as the last one known here and flushes them.
func (t *Tracker) stateOf(e *lvEntry, now time.Time) string {
	if e.fromStart {
		if e.startDeadline.IsZero() || !now.Before(t.deadline(e)) {
			return liveness.StateOffline
		}
		return e.reported
	}
	if e.reported == "" {
		return e.state // never heartbeated here: as stored
	}
	if !e.owned {
		if e.state == liveness.StateOffline || !now.Before(t.takeoverAt(e)) {
			return liveness.StateOffline
		}
		if pair, ok := t.events.LastPair(e.id); ok && pair.State == liveness.StateOffline {
			return liveness.StateOffline // the owner published offline (over the bus) before the watch read the row
		}
		return e.reported
	}
	if e.lastHB.IsZero() {
		return liveness.StateUnknown
	}
	if !now.Before(t.deadline(e)) {
		return liveness.StateOffline // at and after the deadline (inclusive)
	}
	switch e.reported {
	case liveness.StateOnline, liveness.StateDegraded:
		return e.reported
	}
	return liveness.StateUnknown
}

// claimTTLMargin is the watch's margin over the timeout, in persist
// intervals: one for the owner's flush period, one for its offline write.
const claimTTLMargin = 2

// takeoverAt is when the watch of an entry owned elsewhere takes over: a
// stored heartbeat this old proves no instance holds a fresh one.
func (t *Tracker) takeoverAt(e *lvEntry) time.Time {
	return e.lastHB.Add(t.cfg.PresenceTimeout + claimTTLMargin*t.cfg.PersistInterval)
}

// deadline is when the entry becomes offline without another heartbeat:
// agent.presence_timeout after alive (the start rule's deadline for an
// entry loaded at start), extended by every stall of the process since.
func (t *Tracker) deadline(e *lvEntry) time.Time {
	if e.fromStart {
		if e.startDeadline.IsZero() {
			return e.startDeadline
		}
		return t.extend(e.startDeadline.Add(-t.cfg.PresenceTimeout), t.cfg.PresenceTimeout)
	}
	from := e.alive()
	return t.extend(from, t.cfg.PresenceTimeout)
}

// assessLocked runs liveness.Assess at now and keeps when the differences
// began.
func (t *Tracker) assessLocked(e *lvEntry, now time.Time) {
	a := liveness.Assess(t.assessInputs(e, now), now)
	e.mismatchSince, e.modeMismatchSince = a.MismatchSince, a.ModeMismatchSince
}

func (t *Tracker) assessInputs(e *lvEntry, now time.Time) liveness.AssessInputs {
	in := liveness.AssessInputs{
		State: t.stateOf(e, now), BillingMode: e.billingMode, ToolClass: e.toolClass,
		ReportedBillingMode: e.reportedMode(), ReportedToolClass: e.audited.ToolClass,
		MismatchSince: e.mismatchSince, ModeMismatchSince: e.modeMismatchSince, AlertAfter: t.cfg.MismatchAlertAfter,
	}
	if e.hb != nil {
		in.ReportedToolClass = e.hb.ToolClass
		in.ReportedBillingModesSupported = e.hb.BillingModesSupported
		in.Evidence = e.hb.BillingEvidence
	}
	return in
}

// armLocked (re)arms the entry's timer to fire at the instant at (server
// clock). Stopped trackers arm nothing.
func (t *Tracker) armLocked(e *lvEntry, at time.Time) {
	if t.stopped.Load() {
		return
	}
	d := max(at.Sub(t.now()), 0)
	e.armedAt = at
	if e.timer == nil {
		e.timer = t.clock.AfterFunc(d, func() { t.onTimer(e) })
	} else {
		e.timer.Reset(d)
	}
	// The clock may have passed at between reading it and arming (a fake
	// clock advanced by another goroutine): fire now rather than late. The
	// callbacks are idempotent, so a second firing is harmless.
	if d > 0 && !t.now().Before(at) {
		e.timer.Reset(0)
	}
}

// onTimer runs when an entry's timer fires: the owner's deadline (offline
// at and after it, published once) or, for an entry another instance owns,
// the watch that takes over when that instance is gone.
func (t *Tracker) onTimer(e *lvEntry) {
	if t.stopped.Load() {
		return // shutdown: timers stop without publishing
	}
	t.stalls.Check() // a stall that ended just now extends the deadline first
	now := t.now()
	e.mu.Lock()
	e.armedAt = time.Time{}
	if !e.owned {
		e.mu.Unlock()
		t.watch(e, now)
		return
	}
	if t.stopped.Load() {
		e.mu.Unlock()
		return
	}
	if t.stateOf(e, now) != liveness.StateOffline {
		// A heartbeat moved the deadline (or the timer fired a hair early).
		t.armLocked(e, t.deadline(e))
		e.mu.Unlock()
		return
	}
	if e.state != liveness.StateOffline {
		t.goOfflineLocked(e, now)
	}
	e.mu.Unlock()
}

// watch runs when the watch of an entry owned elsewhere fires.
func (t *Tracker) watch(e *lvEntry, now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	a, err := t.store.GetAgent(ctx, store.AgentRef{ID: e.id})
	cancel()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.owned || t.stopped.Load() {
		return // a heartbeat arrived here meanwhile
	}
	if err != nil {
		t.log.Warn("liveness watch: reading the agent failed; retrying", "agent_id", e.id, "err", err)
		t.armLocked(e, now.Add(t.cfg.PersistInterval))
		return
	}
	if hb := a.Liveness.LastHeartbeatAt; hb != nil && hb.After(e.lastHB) {
		e.lastHB = hb.UTC()
	}
	t.log.Debug("liveness: watch", "agent_id", e.id, "now", now, "last_heartbeat", e.lastHB, "stored_state", a.Liveness.State)
	if due := t.takeoverAt(e); now.Before(due) {
		// Read the row again at the known heartbeat + timeout, then once per
		// persist interval (the owner's flush period) until the takeover.
		next := e.lastHB.Add(t.cfg.PresenceTimeout)
		if !now.Before(next) {
			next = now.Add(t.cfg.PersistInterval)
		}
		if next.After(due) {
			next = due
		}
		t.armLocked(e, next)
		return
	}
	pair, known := t.events.LastPair(e.id)
	if known {
		e.pub = pair
	}
	if a.Liveness.State != liveness.StateOnline && a.Liveness.State != liveness.StateDegraded {
		// The owner reported it offline already: follow silently.
		e.state = liveness.StateOffline
		if !known {
			e.pub = liveness.PublishPair{State: e.state, ReportedBillingMode: e.reportedMode()}
		}
		return
	}
	// Stored online long past any fresh heartbeat: the owner is gone.
	t.log.Info("liveness: taking over an agent whose owning instance stopped", "agent", e.handle, "agent_id", e.id)
	e.owned = true
	t.goOfflineLocked(e, now)
}

// goOfflineLocked marks the entry offline, to be written by the next flush
// with its last heartbeat time, and publishes the change.
func (t *Tracker) goOfflineLocked(e *lvEntry, now time.Time) {
	e.state = liveness.StateOffline
	e.dirty = true
	t.assessLocked(e, now)
	t.publishLocked(e)
}

// publishLocked publishes agent.presence_changed when the pair (state,
// reported_billing_mode) differs from the last published one.
// The last reported mode stays in the pair while offline.
func (t *Tracker) publishLocked(e *lvEntry) {
	pair := liveness.PublishPair{State: e.state, ReportedBillingMode: e.reportedMode()}
	if pair.Equal(e.pub) {
		return
	}
	if pair.State != e.pub.State {
		// A transition is written at once, not at the next flush, so every
		// other instance reading the row sees it.
		t.persistSoon(e)
	}
	e.pub = pair
	var last *time.Time
	if !e.lastHB.IsZero() {
		hb := e.lastHB
		last = &hb
	}
	t.log.Info("agent liveness changed", "agent", e.handle, "agent_id", e.id, "state", pair.State,
		"reported_billing_mode", derefOr(pair.ReportedBillingMode, "-"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.events.Publish(ctx, events.KindPresenceChanged, e.id, e.owner, events.PresenceChangedData{
		Agent: e.handle, State: pair.State, ReportedBillingMode: pair.ReportedBillingMode, LastHeartbeatAt: last,
	})
}

// ConfigWritten refreshes the configuration of a tracked agent from the
// row a write of this instance just stored (an update, a revoke, a
// hand-over), with no store read; the bus.Presence signal of the write
// carries the configuration to the other instances.
func (t *Tracker) ConfigWritten(a *domain.Agent) {
	if e := t.lookup(a.ID); e != nil {
		t.refreshConfig(e, a)
	}
}

func (t *Tracker) refreshConfig(e *lvEntry, a *domain.Agent) {
	now := t.now()
	e.mu.Lock()
	e.refreshConfigLocked(a)
	t.assessLocked(e, now)
	e.mu.Unlock()
}

// onPresenceSignal refreshes the configuration of a tracked agent after a
// write that may have changed it (e.g. PATCH of billing_mode or active). A
// presence or readiness write changes nothing the tracker reads from the
// row, so it costs no read here (the presence cache reads the row once);
// nor does a configuration write whose signal carries the configuration.
// A signal without it (from an instance of an earlier release) is answered
// by reading the row, off the bus's delivery goroutine.
func (t *Tracker) onPresenceSignal(sig bus.Presence) {
	if !sig.ConfigChanged() || (sig.Origin != "" && sig.Origin == t.instance) {
		return // nothing the tracker reads changed, or ConfigWritten had the row
	}
	id := sig.AgentID
	e := t.lookup(id)
	if e == nil {
		return
	}
	if c := sig.Config; c != nil {
		t.refreshConfig(e, &domain.Agent{ID: id, Handle: c.Handle, Active: c.Active, BillingMode: c.BillingMode, ToolClass: c.ToolClass, UpdatedAt: c.UpdatedAt})
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, err := t.store.GetAgent(ctx, store.AgentRef{ID: id})
		if err != nil {
			if !errors.Is(err, domain.ErrNotFound) {
				t.log.Warn("liveness: agent refresh failed", "agent_id", id, "err", err)
			}
			return
		}
		t.refreshConfig(e, &a)
	}()
}
