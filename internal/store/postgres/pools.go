package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// Pools (design: Pools, Pool routing) over the generated queries
// (sql/queries.sql); RouteRing is hand-written for the ring-delay CASE.

var _ store.PoolStore = (*Store)(nil)

// CreatePool implements store.PoolStore.
func (s *Store) CreatePool(ctx context.Context, p store.CreatePoolParams) error {
	return s.txAudited(ctx, p.Pool.CreatedAt, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.InsertPool(ctx, dbsqlc.InsertPoolParams{ID: p.Pool.ID, OwnerID: p.Pool.OwnerID, Name: p.Pool.Name,
			CreatedAt: micro(p.Pool.CreatedAt)}); err != nil {
			return mapErr("create pool", err)
		}
		for _, queue := range p.Pool.Queues {
			if err := q.InsertPoolQueue(ctx, dbsqlc.InsertPoolQueueParams{PoolID: p.Pool.ID, Queue: queue}); err != nil {
				return mapErr("create pool", err)
			}
		}
		for _, m := range p.Pool.Members {
			if err := q.InsertPoolMember(ctx, dbsqlc.InsertPoolMemberParams{PoolID: p.Pool.ID, AgentID: m.AgentID}); err != nil {
				return mapErr("create pool: member "+m.AgentID, err)
			}
		}
		return nil
	})
}

// poolFrom is the mapping of a pool row: with its queues and members,
// read with s.q.
func (s *Store) poolFrom(ctx context.Context) func(dbsqlc.Pool) (domain.Pool, error) {
	return func(r dbsqlc.Pool) (domain.Pool, error) {
		queues, err := s.q.PoolQueues(ctx, r.ID)
		if err != nil {
			return domain.Pool{}, mapErr("pool queues", err)
		}
		rows, err := s.q.PoolMembers(ctx, r.ID)
		members, err := storeutil.All(rows, mapErr("pool members", err), func(m dbsqlc.PoolMembersRow) domain.PoolMember {
			return domain.PoolMember{AgentID: m.AgentID, LastRungAt: utcPtr(m.LastRungAt)}
		})
		return domain.Pool{ID: r.ID, OwnerID: r.OwnerID, Name: r.Name, Queues: append([]string{}, queues...),
			Members: members, CreatedAt: r.CreatedAt.UTC()}, err
	}
}

// GetPool implements store.PoolStore.
func (s *Store) GetPool(ctx context.Context, p store.GetPoolParams) (domain.Pool, error) {
	r, err := s.q.GetPool(ctx, dbsqlc.GetPoolParams{ID: p.ID, OwnerID: p.OwnerID, Name: p.Name})
	return storeutil.OneErr(r, mapErr("get pool", err), s.poolFrom(ctx))
}

// ListPools implements store.PoolStore.
func (s *Store) ListPools(ctx context.Context, p store.ListPoolsParams) ([]domain.Pool, error) {
	rows, err := s.q.ListPools(ctx, dbsqlc.ListPoolsParams{OwnerID: p.OwnerID, MemberID: p.MemberID})
	return storeutil.AllErr(rows, mapErr("list pools", err), s.poolFrom(ctx))
}

// DeletePool implements store.PoolStore: the pool row is locked first, so
// a push racing the delete (whose foreign key check waits for that lock)
// either commits before the count or fails after the delete.
func (s *Store) DeletePool(ctx context.Context, p store.DeletePoolParams) error {
	return s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		live, err := q.LockPoolLiveTodos(ctx, p.ID)
		if err != nil {
			return mapErr("delete pool", err)
		}
		if live > 0 {
			return fmt.Errorf("delete pool: %d live todos: %w", live, domain.ErrConflict)
		}
		n, err := q.DeletePool(ctx, p.ID)
		if err != nil {
			return mapErr("delete pool", err)
		}
		if n == 0 {
			return fmt.Errorf("delete pool %s: %w", p.ID, domain.ErrNotFound)
		}
		return nil
	})
}

// routeRingSQL is RouteRing's conditional update (design: Pool routing):
// $1 todo, $2 member, $3 previous member ("" = none), $4 at. Of racing
// routes the second re-checks ring_agent_id after the first commits.
var routeRingSQL = `UPDATE todos
	` + ringSet("$4") + `, ring_agent_id = $2::text
	WHERE id = $1 AND state = 'pending' AND agent_id IS NULL AND pool_id IS NOT NULL
	  AND ring_attempts < ` + strconv.Itoa(domain.MaxRings) + ` AND coalesce(ring_agent_id, '') = $3::text
	  AND EXISTS (SELECT 1 FROM pool_members m WHERE m.pool_id = todos.pool_id AND m.agent_id = $2::text)`

// RouteRing implements store.PoolStore.
func (s *Store) RouteRing(ctx context.Context, p store.RouteRingParams) (bool, error) {
	routed := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, routeRingSQL, p.TodoID, p.AgentID, p.Prev, micro(p.At))
		if err != nil || tag.RowsAffected() == 0 {
			return mapErr("route ring", err)
		}
		routed = true
		return mapErr("route ring", dbsqlc.New(tx).TouchPoolMember(ctx, dbsqlc.TouchPoolMemberParams{At: micro(p.At),
			AgentID: p.AgentID, TodoID: p.TodoID}))
	})
	return routed && err == nil, err
}

// ReleaseRing implements store.PoolStore.
func (s *Store) ReleaseRing(ctx context.Context, p store.ReleaseRingParams) (bool, error) {
	n, err := s.q.ReleaseRing(ctx, dbsqlc.ReleaseRingParams{ID: p.TodoID, AgentID: p.AgentID})
	return n > 0, mapErr("release ring", err)
}
