package store

import (
	"context"
	"time"
)

// OwnerLeaseStore is the part of the store port that serves owner leases
// (design: Owner lease): every instance holds a lease row that it renews,
// and records which agents' liveness deadlines it owns, so that when an
// instance dies without a word the others find its agents and publish them
// offline. Every time passed in is on the database's clock (design:
// Database clock). Both adapters implement it with hand-written statements
// on the two tables of migration 00010, and the contract suite
// (storetest: OwnerLease/…) covers it.
type OwnerLeaseStore interface {
	// RenewOwnerLease acquires or renews the lease of p.Instance: its row
	// expires at p.ExpiresAt (the row is created when missing). held
	// reports whether the row existed before the call — false on the first
	// acquisition, and when another instance took the lease over because
	// it expired (the caller then claims its agents again). A renewal never
	// moves the expiry back (a late renewal computed from an earlier now
	// keeps the later expiry).
	RenewOwnerLease(ctx context.Context, p RenewOwnerLeaseParams) (held bool, err error)

	// ReleaseOwnerLease ends the lease of instance at once (a clean
	// shutdown): its row expires at now, so the next check of another
	// instance takes its agents over. A missing row is not an error.
	ReleaseOwnerLease(ctx context.Context, instance string, now time.Time) error

	// ExpiredOwnerLeases returns the instances, other than except, whose
	// lease expired at or before now, ascending by instance id.
	ExpiredOwnerLeases(ctx context.Context, now time.Time, except string) ([]string, error)

	// TakeOverOwnerLease is the take-over of an expired lease, in ONE
	// transaction: it deletes the lease row of p.From if and only if it
	// expired at or before p.Now (the conditional delete decides: of any
	// number of racing callers on any instances exactly one gets won =
	// true), and the winner moves every agent recorded as owned by p.From
	// to p.To and returns their ids, ascending. A loser (or an unexpired
	// or missing lease) moves nothing and gets won = false.
	TakeOverOwnerLease(ctx context.Context, p TakeOverOwnerLeaseParams) (won bool, agentIDs []string, err error)

	// SetAgentOwner records p.Instance as the owner of the agent's liveness
	// deadline, as of the heartbeat at p.HeartbeatAt: monotone, a record of
	// a later heartbeat is never overwritten by one of an earlier heartbeat
	// (two instances racing for an agent that moved between them). It
	// reports whether it wrote. Errors: ErrNotFound for an unknown agent.
	SetAgentOwner(ctx context.Context, p SetAgentOwnerParams) (wrote bool, err error)

	// AgentOwner returns the instance recorded as the owner of the agent's
	// deadline ("" when none is).
	AgentOwner(ctx context.Context, agentID string) (string, error)
}

// RenewOwnerLeaseParams renews one instance's lease.
type RenewOwnerLeaseParams struct {
	Instance  string
	ExpiresAt time.Time
}

// TakeOverOwnerLeaseParams takes over the expired lease of From.
type TakeOverOwnerLeaseParams struct {
	From, To string
	Now      time.Time
}

// SetAgentOwnerParams records an agent's owning instance.
type SetAgentOwnerParams struct {
	AgentID     string
	Instance    string
	HeartbeatAt time.Time
}
