package domain

import (
	"encoding/json"
	"time"
)

// Todo states (design: Todo lifecycle): pending → claimed → done | failed.
const (
	TodoPending = "pending"
	TodoClaimed = "claimed"
	TodoDone    = "done"
	TodoFailed  = "failed"
)

// Lease, retry and size rules (design: Lease, Retries and dead letter,
// Input bounds).
const (
	DefaultLease       = 300 * time.Second
	MaxLease           = 24 * time.Hour
	DefaultMaxAttempts = 5
	RetryBase          = 30 * time.Second
	RetryCap           = 15 * time.Minute
	MaxTitleLen        = 500      // bytes
	MaxPayloadLen      = 64 << 10 // bytes of JSON
	MaxResultLen       = 64 << 10 // bytes of JSON
	MaxKeyLen          = 200      // idempotency key, bytes
	MaxListLimit       = 500      // list_todos / GET todos
	DefaultListLimit   = 50
	MaxClaimBatch      = 32 // todos one claim_next (n) or complete (next.n) claims at most
)

// Todo is one unit of work for one agent in one queue (design: Todo lifecycle).
//
// A failed todo with RetryAt set is waiting for its retry and becomes
// claimable at RetryAt; a failed todo with RetryAt nil is dead-lettered.
type Todo struct {
	ID             string          `json:"id"`
	AgentID        string          `json:"agent_id"`
	Queue          string          `json:"queue"`
	Title          string          `json:"title"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Kind           string          `json:"kind,omitempty"`
	Source         string          `json:"source,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	// PushEligible is true for todos authored by the agent's owner; only
	// those ring doorbells (design: Push eligibility).
	PushEligible   bool       `json:"push_eligible"`
	CreatedBy      string     `json:"created_by"`
	State          string     `json:"state"`
	Attempt        int        `json:"attempt"`
	MaxAttempts    int        `json:"max_attempts"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	RetryAt        *time.Time `json:"retry_at,omitempty"`
	RingAttempts   int        `json:"ring_attempts"`
	LastRingedAt   *time.Time `json:"last_ringed_at,omitempty"`
	// NextRingAt is when the sweep next re-rings the todo while it is
	// pending (NextRingAt of its ring count and its last ring, digest or
	// creation); nil once the ring budget is spent (design: Ring budget) and
	// on a todo that will never ring again (done or dead-lettered; design:
	// Ring budget). The store computes it; a value passed to CreateTodo is
	// ignored.
	NextRingAt *time.Time      `json:"next_ring_at,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	LastError  string          `json:"last_error,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	ClaimedAt  *time.Time      `json:"claimed_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	// PoolID is the pool the todo was pushed to ("" = pushed to AgentID);
	// a pooled todo has no AgentID until a member claims it (design: Pools).
	PoolID string `json:"pool_id,omitempty"`
	// RingAgentID is the one member a pooled, unclaimed todo's doorbell
	// rings now ("" = held; design: Pool routing).
	RingAgentID string `json:"ring_agent_id,omitempty"`
}

// DeadLettered reports whether the todo failed with no retry scheduled.
func (t *Todo) DeadLettered() bool { return t.State == TodoFailed && t.RetryAt == nil }

// Live reports whether the todo still counts for idempotency-key dedup:
// pending, claimed, or failed with a retry scheduled.
func (t *Todo) Live() bool {
	return t.State == TodoPending || t.State == TodoClaimed || (t.State == TodoFailed && t.RetryAt != nil)
}

// RetryBackoff returns the wait before the retry that follows failed attempt
// number attempt (1-based): 30 s doubling, capped at 15 min
// (design: Retries and dead letter).
func RetryBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := RetryBase
	for i := 1; i < attempt; i++ {
		d *= 2
		if d >= RetryCap {
			return RetryCap
		}
	}
	return d
}

// NextAfterFailure decides what a failed attempt leads to: a retry at
// now+RetryBackoff(attempt) while attempt < maxAttempts, else dead letter
// (nil). The `fail` verb uses it; an expired lease is pending again at once
// (design: Lease).
func NextAfterFailure(attempt, maxAttempts int, now time.Time) *time.Time {
	if attempt >= maxAttempts {
		return nil
	}
	t := now.Add(RetryBackoff(attempt))
	return &t
}

// LeaseFor resolves a requested lease in seconds (0 = default) into a
// duration. Errors: invalid_argument when negative or above MaxLease.
func LeaseFor(seconds int64) (time.Duration, error) {
	if seconds == 0 {
		return DefaultLease, nil
	}
	if seconds < 0 || seconds > int64(MaxLease/time.Second) {
		return 0, Errorf(CodeInvalidArgument, "lease_seconds must be between 1 and %d, got %d", int64(MaxLease/time.Second), seconds).At("/lease_seconds")
	}
	return time.Duration(seconds) * time.Second, nil
}

// MaxRings is the ring budget of one todo (design: Ring budget).
const MaxRings = 5

// sweepDelays[n] is the wait after creation or the last ring/digest before
// a pending todo that has been rung n times is rung again: about 5 min, then
// 20 min, 1 h, 6 h (design: Ring budget). Ring 1 is usually the doorbell on
// create, so a todo rung then is re-rung 5 min later; one that could not be
// rung on create (agent out, no session) gets its first ring 5 min after
// creation or after the digest that announced it.
var sweepDelays = [MaxRings]time.Duration{5 * time.Minute, 5 * time.Minute, 20 * time.Minute, time.Hour, 6 * time.Hour}

// SweepDelays returns the sweep backoff: element n is the wait before a
// pending todo rung n times is rung again (5 min, 5 min, 20 min, 1 h, 6 h;
// design: Ring budget). It is the one source both NextRingAt and the stores'
// SQL (which computes next_ring_at inside the sweep statement) use.
func SweepDelays() [MaxRings]time.Duration { return sweepDelays }

// NextRingAt returns when a pending todo rung ringAttempts times, last rung
// (or digested, or created) at `last`, is next due for a sweep ring; ok is
// false once the ring budget is spent.
func NextRingAt(ringAttempts int, last time.Time) (time.Time, bool) {
	if ringAttempts < 0 {
		ringAttempts = 0
	}
	if ringAttempts >= MaxRings {
		return time.Time{}, false
	}
	return last.Add(sweepDelays[ringAttempts]), true
}
