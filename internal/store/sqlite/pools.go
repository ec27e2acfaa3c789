package sqlite

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// Pools (design: Pools, Pool routing) over the generated queries
// (sql/queries.sql); RouteRing is hand-written for the ring-delay CASE. Store
// implements store.PoolStore as part of store.Store.

// CreatePool implements store.PoolStore.
func (s *Store) CreatePool(ctx context.Context, p store.CreatePoolParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		q, id := s.txq(tx), p.Pool.ID
		row := dbsqlc.InsertPoolParams{ID: id, OwnerID: p.Pool.OwnerID, Name: p.Pool.Name, CreatedAt: micros(p.Pool.CreatedAt)}
		if err := storeutil.CreatePool(p.Pool, mapErr, func() error { return q.InsertPool(ctx, row) },
			func(queue string) error {
				return q.InsertPoolQueue(ctx, dbsqlc.InsertPoolQueueParams{PoolID: id, Queue: queue})
			},
			func(agentID string) error {
				return storeutil.CreatePoolMember(func() (int64, error) {
					return q.InsertPoolMember(ctx, dbsqlc.InsertPoolMemberParams{PoolID: id, AgentID: agentID})
				})
			},
		); err != nil {
			return err
		}
		_, err := s.appendAudit(ctx, tx, p.Pool.CreatedAt, p.Audit)
		return err
	})
}

// GetPool implements store.PoolStore.
func (s *Store) GetPool(ctx context.Context, p store.GetPoolParams) (domain.Pool, error) {
	r, err := s.rq.GetPool(ctx, dbsqlc.GetPoolParams{ID: p.ID, OwnerID: p.OwnerID, Name: p.Name})
	return storeutil.OneErr(r, mapErr("get pool", err), s.poolFrom(ctx))
}

// DeletePool implements store.PoolStore: the one write transaction
// serialises it with pushes to the pool.
func (s *Store) DeletePool(ctx context.Context, p store.DeletePoolParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		live := func() (int64, error) { return q.PoolLiveTodos(ctx, sql.NullString{String: p.ID, Valid: true}) }
		if err := storeutil.DeletePool(p.ID, mapErr, live, func() (int64, error) { return q.DeletePool(ctx, p.ID) }); err != nil {
			return err
		}
		_, err := s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
}

// SetPoolMembers implements store.PoolStore (one write transaction).
func (s *Store) SetPoolMembers(ctx context.Context, p store.SetPoolMembersParams) (unrung []string, err error) {
	err = s.write(ctx, func(tx *sql.Tx) (err error) {
		q, id := s.txq(tx), p.PoolID
		unrung, err = storeutil.SetPoolMembers(mapErr, p.Members, func() ([]string, error) {
			if _, err := q.GetPool(ctx, dbsqlc.GetPoolParams{ID: id}); err != nil {
				return nil, err
			}
			rows, err := q.PoolMembers(ctx, id)
			var had []string
			for _, m := range rows {
				had = append(had, m.AgentID)
			}
			return had, err
		}, func(agentID string) ([]string, error) {
			arg := dbsqlc.UnringPoolMemberParams{PoolID: id, AgentID: agentID}
			ids, err := q.UnringPoolMember(ctx, arg)
			if err != nil {
				return nil, err
			}
			_, err = q.DeletePoolMember(ctx, dbsqlc.DeletePoolMemberParams(arg))
			return ids, err
		}, func(agentID string) (int64, error) {
			return q.InsertPoolMember(ctx, dbsqlc.InsertPoolMemberParams{PoolID: id, AgentID: agentID})
		}, func(was []string) error {
			_, err := s.appendAudit(ctx, tx, p.Now, p.Audit(was))
			return err
		})
		return err
	})
	return unrung, err
}

// ListPools implements store.PoolStore.
func (s *Store) ListPools(ctx context.Context, p store.ListPoolsParams) ([]domain.Pool, error) {
	var rows []dbsqlc.Pool
	var err error
	if p.MemberIDs != nil {
		rows, err = s.rq.ListPoolsOfMembers(ctx, encodeList(p.MemberIDs))
	} else {
		rows, err = s.rq.ListPools(ctx, dbsqlc.ListPoolsParams{OwnerID: p.OwnerID, MemberID: p.MemberID})
	}
	return storeutil.AllErr(rows, mapErr("list pools", err), s.poolFrom(ctx))
}

// routeRingSQL is RouteRing's conditional update: ?1 todo, ?2 member,
// ?3 previous member, ?4 at.
var routeRingSQL = storeutil.RouteRingSQL(ringSet, func(n int) string { return "?" + strconv.Itoa(n) })

// RouteRing implements store.PoolStore.
func (s *Store) RouteRing(ctx context.Context, p store.RouteRingParams) (bool, error) {
	routed := false
	err := s.write(ctx, func(tx *sql.Tx) (err error) {
		routed, err = storeutil.RouteRing(mapErr, func() (int64, error) {
			res, err := s.in(tx).ExecContext(ctx, routeRingSQL, p.TodoID, p.AgentID, p.Prev, micros(p.At))
			if err != nil {
				return 0, err
			}
			return res.RowsAffected()
		}, func() error {
			return s.txq(tx).TouchPoolMember(ctx, dbsqlc.TouchPoolMemberParams{At: micros(p.At), AgentID: p.AgentID, TodoID: p.TodoID})
		})
		return err
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

// poolFrom is the mapping of a pool row: with its queues and members,
// read with s.rq.
func (s *Store) poolFrom(ctx context.Context) func(dbsqlc.Pool) (domain.Pool, error) {
	return storeutil.PoolFrom(ctx, mapErr, s.rq.PoolQueues, s.rq.PoolMembers, func(r dbsqlc.Pool) domain.Pool {
		return domain.Pool{ID: r.ID, OwnerID: r.OwnerID, Name: r.Name, CreatedAt: fromMicros(r.CreatedAt)}
	}, func(m dbsqlc.PoolMembersRow) domain.PoolMember {
		return domain.PoolMember{AgentID: m.AgentID, LastRungAt: fromNullMicros(m.LastRungAt)}
	})
}

// GrantPool implements store.PoolStore (design: Pool grants).
func (s *Store) GrantPool(ctx context.Context, p store.GrantPoolParams) (got domain.PoolGrant, created bool, err error) {
	g := p.Grant
	err = s.write(ctx, func(tx *sql.Tx) (err error) {
		q := s.txq(tx)
		got, created, err = storeutil.GrantPool(g, mapErr, func() (int64, error) {
			return q.InsertPoolGrant(ctx, dbsqlc.InsertPoolGrantParams{AgentID: g.AgentID, PersonID: g.PersonID, GrantedBy: g.GrantedBy, CreatedAt: micros(g.CreatedAt)})
		}, func() (domain.PoolGrant, error) {
			r, err := q.GetPoolGrant(ctx, dbsqlc.GetPoolGrantParams{AgentID: g.AgentID, PersonID: g.PersonID})
			return poolGrantFrom(r), err
		}, func() error {
			_, err := s.appendAudit(ctx, tx, g.CreatedAt, p.Audit)
			return err
		})
		return err
	})
	return got, created, err
}

// ListPoolGrants implements store.PoolStore.
func (s *Store) ListPoolGrants(ctx context.Context, p store.ListPoolGrantsParams) ([]domain.PoolGrant, error) {
	rows, err := s.rq.ListPoolGrants(ctx, dbsqlc.ListPoolGrantsParams{AgentID: p.AgentID, PersonID: p.PersonID})
	return storeutil.All(rows, mapErr("list pool grants", err), poolGrantFrom)
}

// RevokePoolGrant implements store.PoolStore: the one write transaction
// serialises it with members joining through the grant.
func (s *Store) RevokePoolGrant(ctx context.Context, p store.RevokePoolGrantParams) (res store.RevokedPoolGrant, err error) {
	err = s.write(ctx, func(tx *sql.Tx) (err error) {
		q := s.txq(tx)
		res, err = storeutil.RevokePoolGrant(mapErr, func() (domain.PoolGrant, error) {
			r, err := q.GetPoolGrant(ctx, dbsqlc.GetPoolGrantParams{AgentID: p.AgentID, PersonID: p.PersonID})
			return poolGrantFrom(r), err
		}, func() ([]string, error) {
			return q.GrantedPools(ctx, dbsqlc.GrantedPoolsParams{AgentID: p.AgentID, PersonID: p.PersonID})
		}, func() ([]string, error) {
			return q.UnringGranted(ctx, dbsqlc.UnringGrantedParams{AgentID: p.AgentID, PersonID: p.PersonID})
		}, func() (int64, error) {
			return q.DeletePoolGrant(ctx, dbsqlc.DeletePoolGrantParams{AgentID: p.AgentID, PersonID: p.PersonID})
		}, func(res store.RevokedPoolGrant) error {
			_, err := s.appendAudit(ctx, tx, p.Now, p.Audit(res))
			return err
		})
		return err
	})
	return res, err
}

func poolGrantFrom(r dbsqlc.PoolGrant) domain.PoolGrant {
	return domain.PoolGrant{AgentID: r.AgentID, PersonID: r.PersonID, GrantedBy: r.GrantedBy, CreatedAt: fromMicros(r.CreatedAt)}
}
