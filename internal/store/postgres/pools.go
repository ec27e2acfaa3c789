package postgres

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// Pools (design: Pools, Pool routing) over the generated queries
// (sql/queries.sql); RouteRing is hand-written for the ring-delay CASE. Store
// implements store.PoolStore as part of store.Store.

// CreatePool implements store.PoolStore.
func (s *Store) CreatePool(ctx context.Context, p store.CreatePoolParams) error {
	return s.txAudited(ctx, p.Pool.CreatedAt, p.Audit, func(tx pgx.Tx) error {
		q, id := dbsqlc.New(tx), p.Pool.ID
		row := dbsqlc.InsertPoolParams{ID: id, OwnerID: p.Pool.OwnerID, Name: p.Pool.Name, CreatedAt: micro(p.Pool.CreatedAt)}
		return storeutil.CreatePool(p.Pool, mapErr, func() error { return q.InsertPool(ctx, row) },
			func(queue string) error {
				return q.InsertPoolQueue(ctx, dbsqlc.InsertPoolQueueParams{PoolID: id, Queue: queue})
			},
			func(agentID string) error {
				return q.InsertPoolMember(ctx, dbsqlc.InsertPoolMemberParams{PoolID: id, AgentID: agentID})
			})
	})
}

// GetPool implements store.PoolStore.
func (s *Store) GetPool(ctx context.Context, p store.GetPoolParams) (domain.Pool, error) {
	r, err := s.q.GetPool(ctx, dbsqlc.GetPoolParams{ID: p.ID, OwnerID: p.OwnerID, Name: p.Name})
	return storeutil.OneErr(r, mapErr("get pool", err), s.poolFrom(ctx))
}

// DeletePool implements store.PoolStore: the pool row is locked first, so
// a push racing the delete (whose foreign key check waits for that lock)
// either commits before the count or fails after the delete.
func (s *Store) DeletePool(ctx context.Context, p store.DeletePoolParams) error {
	return s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		return storeutil.DeletePool(p.ID, mapErr, func() (int64, error) { return q.LockPoolLiveTodos(ctx, p.ID) },
			func() (int64, error) { return q.DeletePool(ctx, p.ID) })
	})
}

// ListPools implements store.PoolStore.
func (s *Store) ListPools(ctx context.Context, p store.ListPoolsParams) ([]domain.Pool, error) {
	rows, err := s.q.ListPools(ctx, dbsqlc.ListPoolsParams{OwnerID: p.OwnerID, MemberID: p.MemberID})
	return storeutil.AllErr(rows, mapErr("list pools", err), s.poolFrom(ctx))
}

// routeRingSQL is RouteRing's conditional update: $1 todo, $2 member,
// $3 previous member, $4 at. Of racing routes the second re-checks
// ring_agent_id after the first commits.
var routeRingSQL = storeutil.RouteRingSQL(ringSet, func(n int) string {
	if n == 2 || n == 3 {
		return "$" + strconv.Itoa(n) + "::text"
	}
	return "$" + strconv.Itoa(n)
})

// RouteRing implements store.PoolStore.
func (s *Store) RouteRing(ctx context.Context, p store.RouteRingParams) (bool, error) {
	routed := false
	err := s.tx(ctx, func(tx pgx.Tx) (err error) {
		routed, err = storeutil.RouteRing(mapErr, func() (int64, error) {
			tag, err := tx.Exec(ctx, routeRingSQL, p.TodoID, p.AgentID, p.Prev, micro(p.At))
			return tag.RowsAffected(), err
		}, func() error {
			return dbsqlc.New(tx).TouchPoolMember(ctx, dbsqlc.TouchPoolMemberParams{At: micro(p.At), AgentID: p.AgentID, TodoID: p.TodoID})
		})
		return err
	})
	return routed && err == nil, err
}

// ReleaseRing implements store.PoolStore.
func (s *Store) ReleaseRing(ctx context.Context, p store.ReleaseRingParams) (bool, error) {
	n, err := s.q.ReleaseRing(ctx, dbsqlc.ReleaseRingParams{ID: p.TodoID, AgentID: p.AgentID})
	return n > 0, mapErr("release ring", err)
}

// poolFrom is the mapping of a pool row: with its queues and members,
// read with s.q.
func (s *Store) poolFrom(ctx context.Context) func(dbsqlc.Pool) (domain.Pool, error) {
	return storeutil.PoolFrom(ctx, mapErr, s.q.PoolQueues, s.q.PoolMembers, func(r dbsqlc.Pool) domain.Pool {
		return domain.Pool{ID: r.ID, OwnerID: r.OwnerID, Name: r.Name, CreatedAt: r.CreatedAt.UTC()}
	}, func(m dbsqlc.PoolMembersRow) domain.PoolMember {
		return domain.PoolMember{AgentID: m.AgentID, LastRungAt: utcPtr(m.LastRungAt)}
	})
}
