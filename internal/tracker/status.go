package tracker

import (
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
)

// Status is what the tracker knows of one agent's runtime at the time of
// the read: the liveness part of the owner's status view (GET
// /v1/agents/{ref}/status).
type Status struct {
	// State is unknown, online, degraded or offline.
	State string
	// LastHeartbeatAt is the time of the last heartbeat known, on the
	// database's clock (nil = never).
	LastHeartbeatAt *time.Time
	// ReportedBillingMode and ReportedToolClass are the last reported
	// values (nil = not reported); the billing mode is kept while offline.
	ReportedBillingMode, ReportedToolClass *string
	// Warnings are the codes of liveness.Assess (never nil).
	Warnings []string
	// Report is the last full report (nil = none known). It is shared and
	// must not be modified.
	Report *liveness.Heartbeat
	// Readiness is the last project_readiness list applied, when
	// ReadinessKnown.
	Readiness      []liveness.ReadinessEntry
	ReadinessKnown bool
}

// Status returns the agent's Status at now. It reads the tracker's entry
// when this instance owns the agent's deadline, else judges the row a (the
// stored state, offline once the stored heartbeat is older than
// agent.presence_timeout + 2 × agent.heartbeat_persist_interval).
func (t *Tracker) Status(a *domain.Agent) Status {
	now := t.now()
	e := t.lookup(a.ID)
	if e != nil {
		e.mu.Lock()
		owned := e.owned
		e.mu.Unlock()
		if !owned {
			e = t.fromRow(a, e, now)
		}
	} else {
		e = t.fromRow(a, nil, now)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refreshConfigLocked(a)
	out := Status{State: t.stateOf(e, now), ReportedBillingMode: e.reportedMode(), ReportedToolClass: e.audited.ToolClass,
		Report: e.hb}
	if !e.lastHB.IsZero() {
		hb := e.lastHB
		out.LastHeartbeatAt = &hb
	}
	out.Warnings = liveness.Assess(t.assessInputs(e, now), now).Warnings
	if e.hb != nil {
		out.ReportedToolClass = e.hb.ToolClass
	}
	if e.readinessKnown {
		out.Readiness, out.ReadinessKnown = e.readiness, true
	}
	return out
}

// fromRow builds a throwaway entry for an agent this instance does not own,
// judged from the stored row: the owner writes every transition at once
// (flush.go, persistSoon) and its steady heartbeats once per
// persist interval, so the row's state is the owner's. A row stored online
// or degraded stays so until its heartbeat — or a fresher one known here
// from a claim — is older than the takeover bound (timeout + 2 × persist
// interval: the owner is gone). Every time compared is on the database's
// clock (t.now), never on this instance's wall clock (design:
// Database clock).
func (t *Tracker) fromRow(a *domain.Agent, known *lvEntry, now time.Time) *lvEntry {
	e := t.newEntry(a)
	if known != nil {
		known.mu.Lock()
		if known.lastHB.After(e.lastHB) {
			e.lastHB = known.lastHB
		}
		if known.hb != nil {
			e.hb = known.hb
		}
		e.mismatchSince, e.modeMismatchSince = known.mismatchSince, known.modeMismatchSince
		known.mu.Unlock()
	}
	if st := e.state; (st == liveness.StateOnline || st == liveness.StateDegraded) && !e.lastHB.IsZero() {
		e.fromStart, e.reported = true, st
		// The start rule's deadline form: offline at and after it.
		e.startDeadline = e.lastHB.Add(t.cfg.PresenceTimeout + claimTTLMargin*t.cfg.PersistInterval)
		if !now.Before(e.startDeadline) {
			e.startDeadline = now
		}
	} else if st == liveness.StateOnline || st == liveness.StateDegraded {
		e.fromStart, e.reported, e.startDeadline = true, st, now // online without a heartbeat: offline
	}
	e.owned = true // judged by the rule above, not by the watch
	return e
}

// MismatchAges calls yield once per active agent this instance tracks (owns
// the deadline of) with the value of the gauge
// rollcall.agent.billing_mode.mismatch_age: seconds since any difference of
// the heartbeat rules began, 0 without one. Inactive agents have no
// series. The metrics adapter calls it at every collection.
func (t *Tracker) MismatchAges(yield func(handle string, seconds float64)) {
	now := t.now()
	for _, e := range t.entries() {
		e.mu.Lock()
		ok := e.active && e.owned
		var v float64
		if ok {
			v = liveness.Assess(t.assessInputs(e, now), now).MismatchAge(now)
		}
		h := e.handle
		e.mu.Unlock()
		if ok {
			yield(h, v)
		}
	}
}

// livenessState returns the agent's liveness state at now as this instance
// knows it, and whether it tracks the agent.
func (t *Tracker) livenessState(agentID string) (string, bool) {
	e := t.lookup(agentID)
	if e == nil {
		return "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return t.stateOf(e, t.now()), true
}

// owns reports whether this instance owns the agent's deadline (only the
// owner reports it offline; claims.go), and whether it tracks the
// agent at all.
func (t *Tracker) owns(agentID string) (owned, tracked bool) {
	e := t.lookup(agentID)
	if e == nil {
		return false, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.owned, true
}
