package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// Pools (design: Pools, Pool routing) over the generated queries
// (sql/queries.sql); RouteRing is hand-written for the ring-delay CASE.

var _ store.PoolStore = (*Store)(nil)

// CreatePool implements store.PoolStore.
func (s *Store) CreatePool(ctx context.Context, p store.CreatePoolParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		if err := q.InsertPool(ctx, dbsqlc.InsertPoolParams{ID: p.Pool.ID, OwnerID: p.Pool.OwnerID, Name: p.Pool.Name,
			CreatedAt: micros(p.Pool.CreatedAt)}); err != nil {
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
		_, err := s.appendAudit(ctx, tx, p.Pool.CreatedAt, p.Audit)
		return err
	})
}

// poolFrom is the mapping of a pool row: with its queues and members,
// read with s.rq.
func (s *Store) poolFrom(ctx context.Context) func(dbsqlc.Pool) (domain.Pool, error) {
	return func(r dbsqlc.Pool) (domain.Pool, error) {
		queues, err := s.rq.PoolQueues(ctx, r.ID)
		if err != nil {
			return domain.Pool{}, mapErr("pool queues", err)
		}
		rows, err := s.rq.PoolMembers(ctx, r.ID)
		members, err := storeutil.All(rows, mapErr("pool members", err), func(m dbsqlc.PoolMembersRow) domain.PoolMember {
			return domain.PoolMember{AgentID: m.AgentID, LastRungAt: fromNullMicros(m.LastRungAt)}
		})
		return domain.Pool{ID: r.ID, OwnerID: r.OwnerID, Name: r.Name, Queues: append([]string{}, queues...),
			Members: members, CreatedAt: fromMicros(r.CreatedAt)}, err
	}
}

// GetPool implements store.PoolStore.
func (s *Store) GetPool(ctx context.Context, p store.GetPoolParams) (domain.Pool, error) {
	r, err := s.rq.GetPool(ctx, dbsqlc.GetPoolParams{ID: p.ID, OwnerID: p.OwnerID, Name: p.Name})
	return storeutil.OneErr(r, mapErr("get pool", err), s.poolFrom(ctx))
}

// ListPools implements store.PoolStore.
func (s *Store) ListPools(ctx context.Context, p store.ListPoolsParams) ([]domain.Pool, error) {
	rows, err := s.rq.ListPools(ctx, dbsqlc.ListPoolsParams{OwnerID: p.OwnerID, MemberID: p.MemberID})
	return storeutil.AllErr(rows, mapErr("list pools", err), s.poolFrom(ctx))
}

// DeletePool implements store.PoolStore: the one write transaction
// serialises it with pushes to the pool.
func (s *Store) DeletePool(ctx context.Context, p store.DeletePoolParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		live, err := q.PoolLiveTodos(ctx, sql.NullString{String: p.ID, Valid: true})
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
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
}

// routeRingSQL is RouteRing's conditional update (design: Pool routing):
// ?1 todo, ?2 member, ?3 previous member ("" = none), ?4 at.
var routeRingSQL = `UPDATE todos
	` + ringSet("?4") + `, ring_agent_id = ?2
	WHERE id = ?1 AND state = 'pending' AND agent_id IS NULL AND pool_id IS NOT NULL
	  AND ring_attempts < ` + strconv.Itoa(domain.MaxRings) + ` AND coalesce(ring_agent_id, '') = ?3
	  AND EXISTS (SELECT 1 FROM pool_members m WHERE m.pool_id = todos.pool_id AND m.agent_id = ?2)`

// RouteRing implements store.PoolStore.
func (s *Store) RouteRing(ctx context.Context, p store.RouteRingParams) (bool, error) {
	routed := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.in(tx).ExecContext(ctx, routeRingSQL, p.TodoID, p.AgentID, p.Prev, micros(p.At))
		if err != nil {
			return mapErr("route ring", err)
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return mapErr("route ring", err)
		}
		routed = true
		return mapErr("route ring", s.txq(tx).TouchPoolMember(ctx, dbsqlc.TouchPoolMemberParams{At: micros(p.At),
			AgentID: p.AgentID, TodoID: p.TodoID}))
	})
	return routed && err == nil, err
}

// ReleaseRing implements store.PoolStore.
func (s *Store) ReleaseRing(ctx context.Context, p store.ReleaseRingParams) (bool, error) {
	released := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		n, err := s.txq(tx).ReleaseRing(ctx, dbsqlc.ReleaseRingParams{ID: p.TodoID, AgentID: p.AgentID})
		released = n > 0
		return mapErr("release ring", err)
	})
	return released, err
}
