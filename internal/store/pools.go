package store

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// PoolStore is the part of the store port that serves pools and the
// routing of their todos (design: Pools, Pool routing). Pushing to a pool
// is CreateTodo with Todo.PoolID set and no AgentID; ClaimTodo, ClaimNext
// and ListTodos (WithPools) of a member include the unclaimed todos of its
// pools; a lease that expires, or a failure that will be retried, returns
// a pooled todo to its pool (AgentID empty again).
type PoolStore interface {
	// CreatePool inserts the pool with its queues and members and appends
	// the audit record. A name the owner already uses returns ErrConflict;
	// an unknown member, or a member of another person that has no pool
	// grant to the pool's owner (design: Pool grants), ErrNotFound.
	CreatePool(ctx context.Context, p CreatePoolParams) error
	// GetPool returns a pool by ID, or by OwnerID and Name; ErrNotFound
	// when none.
	GetPool(ctx context.Context, p GetPoolParams) (domain.Pool, error)
	// ListPools lists pools by owner, then name; empty filters match all.
	ListPools(ctx context.Context, p ListPoolsParams) ([]domain.Pool, error)
	// DeletePool deletes the pool with its queues and members and appends
	// the audit record. A pool with live todos (pending, claimed or
	// waiting for a retry) returns ErrConflict; unknown ErrNotFound.
	DeletePool(ctx context.Context, p DeletePoolParams) error
	// SetPoolMembers makes Members (agent ids) the pool's members, in one
	// transaction with the audit record: an agent no longer listed leaves
	// (the pool's todos rung at it, pending and unclaimed, ring nobody:
	// held; a todo it holds keeps its lease), a new one joins (another
	// person's through its grant to the pool's owner, as in CreatePool);
	// one that stays keeps its last_rung_at. It returns the ids of the
	// todos whose ring ended (to be routed again). An unknown pool, an
	// unknown member or another person's agent without the grant returns
	// ErrNotFound.
	SetPoolMembers(ctx context.Context, p SetPoolMembersParams) (unrung []string, err error)
	// RouteRing rings a pooled todo at a member, one conditional statement
	// (design: Pool routing): only while the todo is pending, unclaimed,
	// has ring budget left (ring_attempts < domain.MaxRings), AgentID is a
	// member of its pool and its ring_agent_id is Prev ("" = unset). It
	// sets ring_agent_id = AgentID, counts the ring (ring_attempts+1,
	// last_ringed_at = At, next_ring_at per domain.NextRingAt) and sets the
	// member's last_rung_at = At. Of racing routes with the same Prev
	// exactly one reports true.
	RouteRing(ctx context.Context, p RouteRingParams) (bool, error)
	// ReleaseRing clears ring_agent_id while it is AgentID (the todo is
	// held until a member becomes eligible); it reports whether it did.
	ReleaseRing(ctx context.Context, p ReleaseRingParams) (bool, error)

	// GrantPool inserts the grant (design: Pool grants) and appends the
	// audit record, and reports true; when the agent has already granted
	// the person, it returns the stored grant, false, and appends nothing.
	// An unknown agent returns ErrNotFound.
	GrantPool(ctx context.Context, p GrantPoolParams) (domain.PoolGrant, bool, error)
	// ListPoolGrants lists grants by agent, then creation; empty filters
	// match all.
	ListPoolGrants(ctx context.Context, p ListPoolGrantsParams) ([]domain.PoolGrant, error)
	// RevokePoolGrant deletes the grant in one transaction with what hangs
	// on it (design: Pool grants): the agent leaves every pool of the
	// person it joined through the grant, and the pooled todos of those
	// pools rung at it (pending, unclaimed) ring nobody (held); a todo the
	// agent holds keeps its lease. It appends Audit(result) and returns
	// the result. No such grant returns ErrNotFound.
	RevokePoolGrant(ctx context.Context, p RevokePoolGrantParams) (RevokedPoolGrant, error)
}

// SetPoolMembersParams replaces the members of the pool PoolID.
type SetPoolMembersParams struct {
	PoolID  string
	Members []string // agent ids, at least one, none twice
	// Audit builds the audit record from the members the pool had (agent
	// ids, sorted), as read under the transaction's lock.
	Audit func(was []string) domain.AuditRecord
	Now   time.Time // the audit record's time
}

// GrantPoolParams inserts a pool grant (every field set by the use case).
type GrantPoolParams struct {
	Grant domain.PoolGrant
	Audit domain.AuditRecord
}

// ListPoolGrantsParams filters ListPoolGrants.
type ListPoolGrantsParams struct {
	AgentID  string // "" = every agent
	PersonID string // "" = every grantee
}

// RevokePoolGrantParams deletes the grant of AgentID to PersonID; Audit
// builds the audit record from what the revocation did.
type RevokePoolGrantParams struct {
	AgentID  string
	PersonID string
	Now      time.Time
	Audit    func(RevokedPoolGrant) domain.AuditRecord
}

// RevokedPoolGrant is what RevokePoolGrant did: the grant as it was, the
// pools the agent left (ids, sorted) and the pooled todos whose ring it
// ended (ids, sorted), for the caller to route again.
type RevokedPoolGrant struct {
	Grant  domain.PoolGrant
	Pools  []string
	Unrung []string
}

// CreatePoolParams inserts a pool (ID, owner, name, queues, members and
// CreatedAt set by the use case).
type CreatePoolParams struct {
	Pool  domain.Pool
	Audit domain.AuditRecord
}

// GetPoolParams addresses a pool by ID, or by OwnerID and Name.
type GetPoolParams struct {
	ID      string
	OwnerID string
	Name    string
}

// ListPoolsParams filters ListPools.
type ListPoolsParams struct {
	OwnerID  string // "" = every owner
	MemberID string // "" = any; else only pools with this member agent
	// MemberIDs, when non-nil, selects the pools with a member among
	// these agents (empty: none), OwnerID and MemberID ignored: one read
	// for all of a sweep's receivers.
	MemberIDs []string
}

// DeletePoolParams deletes a pool.
type DeletePoolParams struct {
	ID    string
	Now   time.Time
	Audit domain.AuditRecord
}

// RouteRingParams rings a pooled todo at a member.
type RouteRingParams struct {
	TodoID  string
	AgentID string
	Prev    string
	At      time.Time
}

// ReleaseRingParams ends a member's ring of a pooled todo.
type ReleaseRingParams struct {
	TodoID  string
	AgentID string
}
