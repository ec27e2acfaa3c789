package storeutil

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The pool logic both adapters share (design: Pools, Pool routing); the
// adapters bind it to their generated queries. mapErr is the adapter's
// error mapping.

// CreatePool writes p with the adapter's inserts of the pool row, of one
// queue and of one member.
func CreatePool(p domain.Pool, mapErr func(string, error) error,
	pool func() error, queue func(queue string) error, member func(agentID string) error) error {
	if err := pool(); err != nil {
		return mapErr("create pool", err)
	}
	for _, q := range p.Queues {
		if err := queue(q); err != nil {
			return mapErr("create pool", err)
		}
	}
	for _, m := range p.Members {
		if err := member(m.AgentID); err != nil {
			return mapErr("create pool: member "+m.AgentID, err)
		}
	}
	return nil
}

// DeletePool deletes pool id with del unless live counts live todos in it:
// ErrConflict with live todos, ErrNotFound when del removes no row.
func DeletePool(id string, mapErr func(string, error) error, live, del func() (int64, error)) error {
	n, err := live()
	if err != nil {
		return mapErr("delete pool", err)
	}
	if n > 0 {
		return fmt.Errorf("delete pool: %d live todos: %w", n, domain.ErrConflict)
	}
	if n, err = del(); err != nil {
		return mapErr("delete pool", err)
	}
	if n == 0 {
		return fmt.Errorf("delete pool %s: %w", id, domain.ErrNotFound)
	}
	return nil
}

// PoolFrom is the mapping of an adapter's pool row R: base maps the row,
// queues and members read the pool's queues and member rows M (mapped with
// member) within ctx.
func PoolFrom[R, M any](ctx context.Context, mapErr func(string, error) error,
	queues func(context.Context, string) ([]string, error), members func(context.Context, string) ([]M, error),
	base func(R) domain.Pool, member func(M) domain.PoolMember) func(R) (domain.Pool, error) {
	return func(r R) (domain.Pool, error) {
		p := base(r)
		q, err := queues(ctx, p.ID)
		if err != nil {
			return domain.Pool{}, mapErr("pool queues", err)
		}
		p.Queues = append([]string{}, q...)
		rows, err := members(ctx, p.ID)
		p.Members, err = All(rows, mapErr("pool members", err), member)
		return p, err
	}
}

// RouteRing runs an adapter's RouteRing in its transaction: update runs
// RouteRingSQL and counts the rows it changed; when it rang, touch sets
// the member's last_rung_at (design: Pool routing).
func RouteRing(mapErr func(string, error) error, update func() (int64, error), touch func() error) (bool, error) {
	if n, err := update(); err != nil || n == 0 {
		return false, mapErr("route ring", err)
	}
	return true, mapErr("route ring", touch())
}

// RouteRingSQL is RouteRing's conditional update (design: Pool routing) in
// one dialect: ringSet is the adapter's ring-delay SET clause, arg(n) its
// n-th placeholder of 1 todo, 2 member, 3 previous member ("" = none), 4 at.
func RouteRingSQL(ringSet func(at string) string, arg func(n int) string) string {
	return `UPDATE todos
	` + ringSet(arg(4)) + `, ring_agent_id = ` + arg(2) + `
	WHERE id = ` + arg(1) + ` AND state = 'pending' AND agent_id IS NULL AND pool_id IS NOT NULL
	  AND ring_attempts < ` + strconv.Itoa(domain.MaxRings) + ` AND coalesce(ring_agent_id, '') = ` + arg(3) + `
	  AND EXISTS (SELECT 1 FROM pool_members m WHERE m.pool_id = todos.pool_id AND m.agent_id = ` + arg(2) + `)`
}

// GrantPool runs an adapter's GrantPool in its transaction (design: Pool
// grants): insert adds the grant unless the agent has granted the person
// already (0 rows), get reads the stored one, audit appends the record of
// a new grant. A new grant is returned as stored (CreatedAt to the
// microsecond).
func GrantPool(g domain.PoolGrant, mapErr func(string, error) error,
	insert func() (int64, error), get func() (domain.PoolGrant, error), audit func() error) (domain.PoolGrant, bool, error) {
	n, err := insert()
	if err != nil {
		return domain.PoolGrant{}, false, mapErr("grant pool", err)
	}
	if n == 0 {
		got, err := get()
		return got, false, mapErr("grant pool", err)
	}
	if err := audit(); err != nil {
		return domain.PoolGrant{}, false, mapErr("grant pool", err)
	}
	g.CreatedAt = Micro(g.CreatedAt)
	return g, true, nil
}

// RevokePoolGrant runs an adapter's RevokePoolGrant in its transaction
// (design: Pool grants): get reads (PostgreSQL: locks) the grant, pools
// lists the pools the agent joined through it, unring ends the agent's
// rings in them, del deletes the grant and, by the foreign key's cascade,
// the memberships; audit appends the record of the result.
func RevokePoolGrant(mapErr func(string, error) error, get func() (domain.PoolGrant, error),
	pools, unring func() ([]string, error), del func() (int64, error),
	audit func(store.RevokedPoolGrant) error) (store.RevokedPoolGrant, error) {
	g, err := get()
	if err != nil {
		return store.RevokedPoolGrant{}, mapErr("revoke pool grant", err)
	}
	res := store.RevokedPoolGrant{Grant: g}
	if res.Pools, err = pools(); err != nil {
		return store.RevokedPoolGrant{}, mapErr("revoke pool grant: pools", err)
	}
	if res.Unrung, err = unring(); err != nil {
		return store.RevokedPoolGrant{}, mapErr("revoke pool grant: rings", err)
	}
	res.Pools, res.Unrung = Strings(res.Pools), SortedUnique(res.Unrung)
	if n, err := del(); err != nil || n == 0 {
		if err == nil {
			err = domain.ErrNotFound
		}
		return store.RevokedPoolGrant{}, mapErr("revoke pool grant", err)
	}
	return res, mapErr("revoke pool grant: audit", audit(res))
}

// SetPoolMembers runs an adapter's SetPoolMembers in its transaction:
// current reads the pool's members (after locking the pool where the
// dialect needs it; ErrNotFound when there is no pool), leave takes one
// out and returns the todos whose ring at it ended, join adds one
// (CreatePoolMember's insert), and audit appends the record built from
// the members the pool had. It returns the todos unrung.
func SetPoolMembers(mapErr func(string, error) error, members []string, current func() ([]string, error),
	leave func(agentID string) ([]string, error), join func(agentID string) (int64, error), audit func(was []string) error) ([]string, error) {
	had, err := current()
	if err != nil {
		return nil, mapErr("set pool members", err)
	}
	slices.Sort(had)
	var unrung []string
	for _, id := range had {
		if !slices.Contains(members, id) {
			ids, err := leave(id)
			if err != nil {
				return nil, mapErr("set pool members: leave "+id, err)
			}
			unrung = append(unrung, ids...)
		}
	}
	for _, id := range members {
		if !slices.Contains(had, id) {
			if err := CreatePoolMember(func() (int64, error) { return join(id) }); err != nil {
				return nil, mapErr("set pool members: member "+id, err)
			}
		}
	}
	return unrung, mapErr("set pool members", audit(had))
}

// CreatePoolMember is the member insert of CreatePool: no row inserted
// means the agent (or the pool) is unknown.
func CreatePoolMember(insert func() (int64, error)) error {
	n, err := insert()
	if err == nil && n == 0 {
		err = domain.ErrNotFound
	}
	return err
}

// HandOverPools runs, in an adapter's hand-over transaction, the pool
// grant part of a hand-over (design: Pool grants): grant makes the grants
// to the owners of the other persons' pools the agent was in as its
// owner's own, regrant points every membership at its grant (none in the
// new owner's pools), drop deletes the agent's grant to the new owner.
func HandOverPools(mapErr func(string, error) error, grant, regrant func() error, drop func() (int64, error)) error {
	if err := grant(); err != nil {
		return mapErr("hand over: pool grants", err)
	}
	if err := regrant(); err != nil {
		return mapErr("hand over: pool members", err)
	}
	_, err := drop()
	return mapErr("hand over: grant to the new owner", err)
}
