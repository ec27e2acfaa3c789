package store

import (
	"context"
	"errors"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// PresenceStore is the part of the store port that serves in/out presence,
// digests and the sweep (design: Store contract). Both adapters implement it and the
// contract suite covers it.
type PresenceStore interface {
	// UpdatePresence writes the shift and/or the override columns of an
	// agent (and, when asked, the self clock-in cap and ledger), bumps
	// updated_at, and appends the audit record, in one transaction. A
	// revoked agent returns ErrConflict; unknown ErrNotFound; with Guard set
	// and the override columns no longer as read, ErrPresenceChanged and
	// nothing is written.
	UpdatePresence(ctx context.Context, p UpdatePresenceParams) (domain.Agent, error)
	// ClaimTransition claims a presence transition with the conditional
	// update of (design: Digest on return):
	//   UPDATE agents SET presence_seen=$new, presence_changed_at=$at,
	//     presence_changed_by=$by WHERE id=$id AND presence_seen <> $new
	//     AND (presence_changed_at IS NULL OR presence_changed_at <= $at)
	// It reports whether this caller claimed it (exactly one of several
	// racing callers does); a claim at an instant before the last claimed
	// one is refused (design: Transition claim); an unknown agent claims
	// nothing (false, nil).
	ClaimTransition(ctx context.Context, p ClaimTransitionParams) (bool, error)
	// ListAgentsChangedSince returns unrevoked agents whose updated_at is at
	// or after Since (zero = all), ascending by id after AfterID, at most
	// Limit: the evaluator's initial load and its safety net for missed bus
	// signals.
	ListAgentsChangedSince(ctx context.Context, p ListChangedParams) ([]domain.Agent, error)
	// PendingDoorbellTodos returns the agent's push-eligible pending todos,
	// and the pooled ones rung at it (design: Pool routing), excluding
	// ExcludeQueues, oldest first, at most Limit: what a digest counts
	// (design: Digest on return) and what presence.pending counts.
	PendingDoorbellTodos(ctx context.Context, p PendingParams) ([]PendingTodo, error)
	// MarkDigestRung sets last_ringed_at = At (and next_ring_at per
	// domain.NextRingAt with the unchanged ring_attempts) on exactly the
	// listed todos of the agent (or rung at it) that are still pending; ring_attempts is
	// unchanged. It returns how many rows changed.
	MarkDigestRung(ctx context.Context, p MarkDigestParams) (int, error)
	// SweepRing selects and rings, in ONE statement, the todos due for a
	// sweep ring (design: Sweep): pending, push-eligible, of one of the
	// Receivers, queue not excluded for that agent, ring_attempts <
	// domain.MaxRings, next_ring_at <= Now; at most PerAgent per agent
	// (oldest due first) and at most Limit in all, round-robin over agents
	// (each agent's first before any agent's second). Each selected row gets
	// ring_attempts+1, last_ringed_at = Now and next_ring_at per
	// domain.NextRingAt; the rows are returned, in no particular order. A
	// receiver listed twice counts once. Empty Receivers → no query.
	SweepRing(ctx context.Context, p SweepParams) ([]domain.Todo, error)
	// RingMissed selects and rings, in ONE statement, the todos whose
	// create doorbell may have been lost while this instance's bus listener
	// was down (design: Catch-up after a lost listener): pending,
	// push-eligible, of one of the Receivers, queue not excluded, never rung
	// (ring_attempts = 0 and last_ringed_at NULL: no doorbell, sweep ring
	// or digest), created at or after Since; oldest first, at most Limit.
	// Each gets ring_attempts+1, last_ringed_at = Now and next_ring_at per
	// domain.NextRingAt, as the sweep does; racing callers ring each todo
	// once. Empty Receivers → no query.
	RingMissed(ctx context.Context, p MissedRingParams) ([]domain.Todo, error)
	// FailoverRings counts failover rings (design: Doorbell failover;
	// doorbell.failover_after) in ONE conditional statement
	// for a batch of todos: each only while it is pending, push-eligible,
	// has ring budget left (ring_attempts < domain.MaxRings) and was not
	// rung after its RungAt (by a sweep, a digest or another failover). Each
	// counted one gets ring_attempts+1, last_ringed_at = At and next_ring_at
	// per domain.NextRingAt. It returns the ids counted, in no particular
	// order; a todo listed twice counts once.
	FailoverRings(ctx context.Context, p FailoverRingsParams) ([]string, error)
}

// FailoverRingsParams is one batch of failover rings at At.
type FailoverRingsParams struct {
	Rings []FailoverRing
	At    time.Time
}

// FailoverRing names a todo and the ring of it being failed over.
type FailoverRing struct {
	TodoID string
	RungAt time.Time
}

// MissedRingParams bounds one RingMissed catch-up.
type MissedRingParams struct {
	Receivers []string // agent ids
	Excluded  []string // "<agent_id>:<queue>" pairs that get no rings
	Since     time.Time
	Now       time.Time
	Limit     int // <= 0 = no bound
}

// UpdatePresenceParams changes presence columns. SetShift/SetOverride say
// which groups to write; a written override with Override "" clears it.
type UpdatePresenceParams struct {
	AgentID string
	Now     time.Time

	SetShift bool
	Shift    string // "" = no shift

	SetOverride   bool
	Override      string // "", "in", "out"
	OverrideUntil *time.Time
	OverrideSetAt *time.Time
	OverrideBy    string

	Audit domain.AuditRecord

	// SetBudget writes the self clock-in ledger (design: Self clock-in cap):
	// self_in_stretch and self_in_used (whole seconds).
	SetBudget     bool
	SelfInStretch *time.Time
	SelfInUsed    time.Duration
	// SetCap writes self_clock_in_cap (whole seconds, >= 0).
	SetCap         bool
	SelfClockInCap time.Duration
	// Guard, when not nil, makes the write conditional on the override
	// columns still holding what the caller decided on (an agent's verb
	// must not undo an operator's override written meanwhile).
	Guard *OverrideGuard
}

// OverrideGuard is the override as read: presence_override ("" = null),
// override_set_at and override_by ("" = null).
type OverrideGuard struct {
	Override string
	SetAt    *time.Time
	By       string
}

// ErrPresenceChanged: UpdatePresence's Guard no longer matched; re-read and
// decide again.
var ErrPresenceChanged = errors.New("store: the override changed since it was read")

// ClaimTransitionParams claims presence_seen = New.
type ClaimTransitionParams struct {
	AgentID string
	New     string // "in" or "out"
	At      time.Time
	By      string // agent, operator, shift, default (the Effective source)
}

// ListChangedParams pages ListAgentsChangedSince.
type ListChangedParams struct {
	Since   time.Time // zero = every unrevoked agent
	AfterID string    // "" = from the first id
	Limit   int       // <= 0 = no limit
}

// PendingParams selects push-eligible pending todos of one agent.
type PendingParams struct {
	AgentID       string
	ExcludeQueues []string
	Limit         int // <= 0 = no limit
}

// PendingTodo is the digest's view of a pending todo: no title, no payload.
type PendingTodo struct {
	ID        string
	Queue     string
	CreatedAt time.Time
}

// MarkDigestParams records a digest on the todos it counted.
type MarkDigestParams struct {
	AgentID string
	IDs     []string
	At      time.Time
}

// SweepParams bounds one sweep pass.
type SweepParams struct {
	Receivers []string // agent ids
	// Excluded lists "<agent_id>:<queue>" pairs that get no rings (queues
	// the agent last reported not ready; design: Queue readiness).
	Excluded []string
	Now      time.Time
	PerAgent int // (design: Sweep): 3; <= 0 = no bound
	Limit    int // <= 0 = no bound
}
