package tracker

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/ratelimit"
	"github.com/rollcall/rollcall/internal/store"
)

// Arrival is when a heartbeat arrived (database clock), returned by Arrive,
// which took the rate limit's token. The zero Arrival is a heartbeat that
// arrives when Heartbeat runs.
type Arrival struct{ at time.Time }

// IsZero reports whether a is the zero Arrival.
func (a Arrival) IsZero() bool { return a.at.IsZero() }

// Arrive is the first, in-memory step of a heartbeat: the per-principal
// rate limit (*ratelimit.Error, code rate_limited), then, for agentID not
// "", it notes that a heartbeat of the agent arrived now, so until its
// agent part is done the agent's deadline runs from this arrival (design:
// Liveness first). Pass the Arrival to Heartbeat,
// which then takes no second token.
func (t *Tracker) Arrive(p domain.Principal, agentID string) (Arrival, error) {
	now := t.now()
	if err := t.allow(p, now); err != nil {
		return Arrival{}, err
	}
	if agentID != "" {
		if e := t.lookup(agentID); e != nil {
			e.notePending(now)
		}
	}
	return Arrival{at: now}, nil
}

func (t *Tracker) allow(p domain.Principal, now time.Time) error {
	if ok, wait := t.limiter.Allow(limiterKey(p), now); !ok {
		return &ratelimit.Error{RetryAfter: wait, Err: &domain.Error{Code: domain.CodeRateLimited,
			Detail: fmt.Sprintf("too many heartbeats: at most %g per second (burst %d); retry in %s", t.cfg.RateLimit, t.cfg.RateBurst, wait.Round(time.Millisecond))}}
	}
	return nil
}

// Heartbeat records one heartbeat of agent a, sent by p (whom the caller
// authorized), with body an agent_heartbeat.v1 document decoded by
// liveness.DecodeHeartbeat, that arrived at arr (the zero Arrival: now, and
// the rate limit's token is taken here). In order:
//
//  1. the body: invalid_argument / unknown_member with a pointer;
//  2. project_readiness, when present and different from the last list
//     applied, in its own unit of work; a failure is an internal error and
//     changes no presence;
//  3. the reported-change audit when the billing mode or tool class differs
//     from the stored pair; a failure is an internal error;
//  4. the entry: last heartbeat = the arrival on the server's (database)
//     clock — the sender's clock is never read —, the deadline,
//     agent.presence_changed when the pair (state, reported_billing_mode)
//     changed, the warnings' timing.
//
// The heartbeat time it records is the arrival, not when this ran. The Ack
// carries sync.heartbeat_interval in milliseconds.
func (t *Tracker) Heartbeat(ctx context.Context, p domain.Principal, a *domain.Agent, body []byte, arr Arrival) (Ack, error) {
	now := arr.at
	if now.IsZero() {
		now = t.now()
		if err := t.allow(p, now); err != nil {
			return Ack{}, err
		}
	}
	h, err := t.decode(a.ID, body)
	if err != nil {
		return Ack{}, err
	}
	e := t.entryFor(a)
	claim := false
	e.notePending(now)
	ok := false
	defer func() {
		if !ok {
			e.failPending(now)
		}
	}()
	// hbMu serialises this agent's heartbeats across the store writes; e.mu
	// is held only for memory, so a status read, a deadline or a flush never
	// waits for a slow audit.
	e.hbMu.Lock()
	defer e.hbMu.Unlock()
	e.mu.Lock()
	e.refreshConfigLocked(a)
	handle := e.handle
	needReadiness := h.ProjectReadinessPresent && !(e.readinessKnown && liveness.SameReadiness(e.readiness, h.ProjectReadiness))
	needAudit := liveness.ReportedChanged(toReported(e.audited), h.Reported())
	e.mu.Unlock()
	if needReadiness {
		if err := t.applyReadiness(ctx, e, h.ProjectReadiness, now); err != nil {
			return Ack{}, err
		}
	}
	if needAudit {
		if err := t.applyReportedChange(ctx, e, handle, p, h, now); err != nil {
			return Ack{}, err
		}
	}
	e.mu.Lock()
	base := e.lastHB // the heartbeat before this one
	if prev := e.arrivedBefore(now); prev.After(base) {
		base = prev
	}
	if e.owned && e.state != liveness.StateOffline && !e.fromStart && !e.lastHB.IsZero() &&
		!now.Before(liveness.Deadline(base, t.cfg.PresenceTimeout)) {
		// The deadline passed and its timer has not run yet: the agent was
		// offline until this heartbeat, whatever the goroutines' order —
		// unless the process itself stalled meanwhile (the heartbeat may
		// have waited on the socket), which extends the deadline.
		t.stalls.Check()
		if !now.Before(t.extend(base, t.cfg.PresenceTimeout)) {
			t.goOfflineLocked(e, now)
		}
	} else if e.owned && e.fromStart && e.state != liveness.StateOffline && t.stateOf(e, now) == liveness.StateOffline {
		t.goOfflineLocked(e, now)
	}
	if !e.owned {
		e.owned, claim = true, true
		if pair, ok := t.events.LastPair(e.id); ok {
			e.pub = pair
		}
	}
	if e.state != liveness.StateOnline && e.state != liveness.StateDegraded {
		claim = true // coming back (or first heartbeat): announce it at once
	}
	if now.After(e.lastHB) {
		e.lastHB = now
	}
	e.fromStart = false
	e.reported, e.state = h.State, h.State
	e.hb = h
	e.dirty = true
	t.assessLocked(e, now)
	// Lazily: a timer armed for an earlier instant fires there and re-arms
	// to the deadline then current (onTimer), so a steady heartbeat does not
	// touch the timer at all.
	if dl := t.deadline(e); e.armedAt.IsZero() || e.armedAt.After(dl) {
		t.armLocked(e, dl)
	}
	t.publishLocked(e)
	e.mu.Unlock()
	ok = true
	if claim {
		t.publishClaim(e.id, now)
		t.recordOwner(ctx, e.id, now) // (design: Owner lease)
	}
	t.metrics.Heartbeat()
	return Ack{IntervalMS: t.cfg.HeartbeatInterval.Milliseconds()}, nil
}

// decode runs the one decoder, liveness.DecodeHeartbeat, unless the body is
// byte for byte the last one this agent sent and the decoder accepted: an
// adapter's steady heartbeats repeat themselves, and skipping the decode
// keeps them free of allocations. The result is shared and must not be
// modified.
func (t *Tracker) decode(agentID string, body []byte) (*liveness.Heartbeat, error) {
	e := t.lookup(agentID)
	if e != nil {
		if c := e.last.Load(); c != nil && bytes.Equal(c.body, body) {
			return c.hb, nil
		}
	}
	h, err := liveness.DecodeHeartbeat(body)
	if err != nil {
		return nil, err
	}
	if e != nil {
		e.last.Store(&decoded{body: bytes.Clone(body), hb: &h})
	}
	return &h, nil
}

// applyReadiness writes the list in its own unit of work, before the audit
// transaction, and tells every instance's presence cache.
func (t *Tracker) applyReadiness(ctx context.Context, e *lvEntry, rs []liveness.ReadinessEntry, now time.Time) error {
	raw := encodeReadiness(rs)
	if err := t.store.ApplyProjectReadiness(ctx, store.ApplyProjectReadinessParams{AgentID: e.id, Readiness: raw, Now: now}); err != nil {
		return fmt.Errorf("applying project_readiness of agent %s: %w", e.id, err)
	}
	e.mu.Lock()
	e.readiness, e.readinessKnown = rs, true
	e.mu.Unlock()
	t.signal(ctx, e.id, causeReadiness)
	return nil
}

// applyReportedChange runs the audited unit of work.
func (t *Tracker) applyReportedChange(ctx context.Context, e *lvEntry, handle string, p domain.Principal, h *liveness.Heartbeat, now time.Time) error {
	next := store.ReportedPair{BillingMode: h.BillingMode, ToolClass: h.ToolClass}
	actor := p.Actor()
	wrote, err := t.audits.apply(ctx, store.ApplyReportedChangeParams{
		AgentID: e.id, BillingMode: h.BillingMode, ToolClass: h.ToolClass,
		RuntimeVersion: h.RuntimeVersion, ReportedState: h.Canonical(), State: h.State, HeartbeatAt: now,
		Audit: func(old store.ReportedPair) domain.AuditRecord {
			return domain.AuditRecord{Actor: actor, Action: "agent.heartbeat", AgentID: e.id, Decision: "allow",
				Data: liveness.AuditData(toReported(old), h.Reported(), h.BillingEvidence)}
		},
	})
	if err != nil {
		return fmt.Errorf("auditing the reported change of agent %s: %w", e.id, err)
	}
	if wrote {
		t.log.Info("agent reported a new billing mode or tool class", "agent", handle, "agent_id", e.id,
			"billing_mode", derefOr(h.BillingMode, "-"), "tool_class", derefOr(h.ToolClass, "-"))
	}
	e.mu.Lock()
	e.audited = next
	e.mu.Unlock()
	return nil
}
