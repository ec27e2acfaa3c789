package app

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
)

// AgentStatus returns the owner's AgentRuntimeStatus of an agent. It reads
// the tracker's entry when this instance has one, else the stored row (the
// stored state, offline once the stored heartbeat is older than
// agent.presence_timeout + agent.heartbeat_persist_interval).
// Errors: not_found (unknown agent or another person's).
func (s *Service) AgentStatus(ctx context.Context, by domain.Person, ref string) (AgentRuntimeStatus, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return AgentRuntimeStatus{}, err
	}
	st := s.Liveness.status(&a, s.Liveness.now())
	if s.presenceStore() != nil {
		if st.Presence, err = s.GetPresence(ctx, by, a.ID); err != nil {
			return AgentRuntimeStatus{}, err
		}
	}
	return st, nil
}

func (t *Tracker) status(a *domain.Agent, now time.Time) AgentRuntimeStatus {
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
	out := AgentRuntimeStatus{AgentID: a.ID, Agent: a.Handle, BillingMode: a.BillingMode, ToolClass: a.ToolClass,
		State: t.stateOf(e, now), ReportedBillingMode: e.reportedMode(), ReportedToolClass: e.audited.ToolClass}
	if !e.lastHB.IsZero() {
		hb := e.lastHB
		out.LastHeartbeatAt = &hb
	}
	out.Warnings = liveness.Assess(t.assessInputs(e, now), now).Warnings
	if h := e.hb; h != nil {
		out.ReportedToolClass = h.ToolClass
		out.BillingModesSupported = h.BillingModesSupported
		if ev := h.BillingEvidence; ev != nil {
			out.BillingEvidence = &BillingEvidence{KeyType: ev.KeyType, Method: ev.Method}
		}
		if h.Details.Runtime != nil || h.RuntimeVersion != nil {
			out.Runtime = &RuntimeInfo{RuntimeVersion: h.RuntimeVersion}
			if h.Details.Runtime != nil {
				out.Runtime.Name = h.Details.Runtime.Name
			}
		}
		if ad := h.Details.Adapter; ad != nil {
			out.Adapter = &AdapterInfo{Name: ad.Name, Version: ad.Version}
		}
	}
	if e.readinessKnown {
		out.ProjectReadiness = make([]Readiness, len(e.readiness))
		for i, r := range e.readiness {
			out.ProjectReadiness[i] = Readiness(r)
		}
	}
	return out
}

// fromRow builds a throwaway entry for an agent this instance does not own,
// judged from the stored row: the owner writes every transition at once
// (liveness_flush.go, persistSoon) and its steady heartbeats once per
// persist interval, so the row's state is the owner's. A row stored online
// or degraded stays so until its heartbeat — or a fresher one known here
// from a claim — is older than the takeover bound (timeout + 2 × persist
// interval: the owner is gone). Every time compared is on the database's
// clock (t.now), never on this instance's wall clock (DESIGN.md §4).
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
// DESIGN.md §5.2 began, 0 without one (D-M2-20-8). Inactive agents have no
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

// LivenessState returns the agent's liveness state at now as this instance
// knows it, and whether it tracks the agent (for the console and tests).
func (t *Tracker) LivenessState(agentID string) (string, bool) {
	e := t.lookup(agentID)
	if e == nil {
		return "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return t.stateOf(e, t.now()), true
}

// Owns reports whether this instance owns the agent's deadline (only the
// owner reports it offline; liveness_claims.go), and whether it tracks the
// agent at all.
func (t *Tracker) Owns(agentID string) (owned, tracked bool) {
	e := t.lookup(agentID)
	if e == nil {
		return false, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.owned, true
}
