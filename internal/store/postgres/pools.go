package postgres

import (
	"context"
	"errors"
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
				return storeutil.CreatePoolMember(func() (int64, error) {
					return q.InsertPoolMember(ctx, dbsqlc.InsertPoolMemberParams{PoolID: id, AgentID: agentID})
				})
			})
	})
}

// GetPool implements store.PoolStore. Its two reads (the row, then its
// queues and members: the generated statements) go in one round trip, a
// pipelined batch: a pool push reads its pool, and round trips were most
// of that read's time.
func (s *Store) GetPool(ctx context.Context, p store.GetPoolParams) (domain.Pool, error) {
	var b pgx.Batch
	rec := &recorder{}
	rq := dbsqlc.New(rec)
	_, _ = rq.GetPool(ctx, dbsqlc.GetPoolParams{ID: p.ID, OwnerID: p.OwnerID, Name: p.Name}) // records the statement
	b.Queue(rec.sql, rec.args...)
	_, _ = rq.PoolPartsOf(ctx, dbsqlc.PoolPartsOfParams{ID: p.ID, OwnerID: p.OwnerID, Name: p.Name})
	b.Queue(rec.sql, rec.args...)
	br := s.pool.SendBatch(ctx, &b)
	pool, err := readPool(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return domain.Pool{}, mapErr("get pool", err)
	}
	return pool, nil
}

// readPool reads GetPool's two answers: the pool row (pgx.ErrNoRows when
// there is none), then its parts.
func readPool(br pgx.BatchResults) (domain.Pool, error) {
	var r dbsqlc.Pool
	if err := br.QueryRow().Scan(&r.ID, &r.OwnerID, &r.Name, &r.CreatedAt); err != nil {
		return domain.Pool{}, err
	}
	rows, err := br.Query()
	if err != nil {
		return domain.Pool{}, err
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (dbsqlc.PoolPartsOfRow, error) {
		var p dbsqlc.PoolPartsOfRow
		return p, row.Scan(&p.Part, &p.Name, &p.LastRungAt)
	})
	if err != nil {
		return domain.Pool{}, err
	}
	return poolOf(r, parts), nil
}

// poolOf is the pool of row r with its parts (PoolPartsOf: members, then
// queues, each by name).
func poolOf(r dbsqlc.Pool, parts []dbsqlc.PoolPartsOfRow) domain.Pool {
	p := domain.Pool{ID: r.ID, OwnerID: r.OwnerID, Name: r.Name, CreatedAt: r.CreatedAt.UTC(),
		Queues: []string{}, Members: []domain.PoolMember{}}
	for _, x := range parts {
		if x.Part == "queue" {
			p.Queues = append(p.Queues, x.Name)
		} else {
			p.Members = append(p.Members, domain.PoolMember{AgentID: x.Name, LastRungAt: utcPtr(x.LastRungAt)})
		}
	}
	return p
}

// DeletePool implements store.PoolStore: the pool row is locked first, so
// a push racing the delete (whose foreign key check waits for that lock)
// either commits before the count or fails after the delete.
func (s *Store) DeletePool(ctx context.Context, p store.DeletePoolParams) error {
	return s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		return storeutil.DeletePool(p.ID, mapErr, func() (int64, error) { return lockedLiveTodos(ctx, q, p.ID) },
			func() (int64, error) { return q.DeletePool(ctx, p.ID) })
	})
}

// lockedLiveTodos locks the pool row, then counts its live todos in a
// second statement: one statement would count from a snapshot taken
// before the lock was granted, missing a push that committed meanwhile
// (whose todo the delete would then orphan). A pool that does not exist
// counts 0 (the delete then finds nothing).
func lockedLiveTodos(ctx context.Context, q *dbsqlc.Queries, id string) (int64, error) {
	if _, err := q.LockPool(ctx, id); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, nil
		}
		return 0, err
	}
	return q.CountPoolLiveTodos(ctx, id)
}

// SetPoolMembers implements store.PoolStore: the pool row locked first,
// so a racing update or delete of the pool waits for this one.
func (s *Store) SetPoolMembers(ctx context.Context, p store.SetPoolMembersParams) (unrung []string, err error) {
	err = s.tx(ctx, func(tx pgx.Tx) (err error) {
		q, id := dbsqlc.New(tx), p.PoolID
		unrung, err = storeutil.SetPoolMembers(mapErr, p.Members, func() ([]string, error) {
			if _, err := q.LockPool(ctx, id); err != nil {
				return nil, err
			}
			parts, err := q.PoolPartsOf(ctx, dbsqlc.PoolPartsOfParams{ID: id})
			var had []string
			for _, m := range poolOf(dbsqlc.Pool{}, parts).Members {
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
			_, err := appendAudit(ctx, tx, p.Now, p.Audit(was))
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
		rows, err = s.q.ListPoolsOfMembers(ctx, p.MemberIDs)
	} else {
		rows, err = s.q.ListPools(ctx, dbsqlc.ListPoolsParams{OwnerID: p.OwnerID, MemberID: p.MemberID})
	}
	return storeutil.AllErr(rows, mapErr("list pools", err), s.poolFrom(ctx, s.q))
}

// routeRingSQL is RouteRing as one statement (design: Pool routing): the
// conditional update of the todo ($1 todo, $2 member, $3 previous member,
// $4 at) and, in a data-modifying CTE, the member's last_rung_at when the
// todo was rung; it returns the todos rung (0 or 1). Of racing routes the
// second re-checks ring_agent_id after the first commits. One round trip
// instead of four (begin, two updates, commit): a route no longer holds a
// pool connection idle in transaction between them.
var routeRingSQL = `WITH r AS (` + storeutil.RouteRingSQL(ringSet, func(n int) string {
	if n == 2 || n == 3 {
		return "$" + strconv.Itoa(n) + "::text"
	}
	return "$" + strconv.Itoa(n)
}) + ` RETURNING pool_id), m AS (
	UPDATE pool_members SET last_rung_at = $4::timestamptz
	FROM r WHERE pool_members.pool_id = r.pool_id AND pool_members.agent_id = $2::text)
SELECT count(*) FROM r`

// RouteRing implements store.PoolStore.
func (s *Store) RouteRing(ctx context.Context, p store.RouteRingParams) (bool, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, routeRingSQL, p.TodoID, p.AgentID, p.Prev, micro(p.At)).Scan(&n); err != nil {
		return false, mapErr("route ring", err)
	}
	return n > 0, nil
}

// ReleaseRing implements store.PoolStore.
func (s *Store) ReleaseRing(ctx context.Context, p store.ReleaseRingParams) (bool, error) {
	n, err := s.q.ReleaseRing(ctx, dbsqlc.ReleaseRingParams{ID: p.TodoID, AgentID: p.AgentID})
	return n > 0, mapErr("release ring", err)
}

// poolFrom is the mapping of a pool row: with its queues and members,
// read with q.
func (s *Store) poolFrom(ctx context.Context, q *dbsqlc.Queries) func(dbsqlc.Pool) (domain.Pool, error) {
	return func(r dbsqlc.Pool) (domain.Pool, error) {
		parts, err := q.PoolPartsOf(ctx, dbsqlc.PoolPartsOfParams{ID: r.ID})
		if err != nil {
			return domain.Pool{}, mapErr("pool parts", err)
		}
		return poolOf(r, parts), nil
	}
}

// GrantPool implements store.PoolStore (design: Pool grants).
func (s *Store) GrantPool(ctx context.Context, p store.GrantPoolParams) (got domain.PoolGrant, created bool, err error) {
	g := p.Grant
	err = s.tx(ctx, func(tx pgx.Tx) (err error) {
		q := dbsqlc.New(tx)
		got, created, err = storeutil.GrantPool(g, mapErr, func() (int64, error) {
			return q.InsertPoolGrant(ctx, dbsqlc.InsertPoolGrantParams{AgentID: g.AgentID, PersonID: g.PersonID, GrantedBy: g.GrantedBy, CreatedAt: micro(g.CreatedAt)})
		}, func() (domain.PoolGrant, error) {
			r, err := q.GetPoolGrant(ctx, dbsqlc.GetPoolGrantParams{AgentID: g.AgentID, PersonID: g.PersonID})
			return poolGrantFrom(r), err
		}, func() error {
			_, err := appendAudit(ctx, tx, g.CreatedAt, p.Audit)
			return err
		})
		return err
	})
	return got, created, err
}

// ListPoolGrants implements store.PoolStore.
func (s *Store) ListPoolGrants(ctx context.Context, p store.ListPoolGrantsParams) ([]domain.PoolGrant, error) {
	rows, err := s.q.ListPoolGrants(ctx, dbsqlc.ListPoolGrantsParams{AgentID: p.AgentID, PersonID: p.PersonID})
	return storeutil.All(rows, mapErr("list pool grants", err), poolGrantFrom)
}

// RevokePoolGrant implements store.PoolStore: the grant row is locked
// first, so a member joining through it (whose foreign key check holds a
// key-share lock on it) either commits before the revocation reads the
// memberships or fails after the delete.
func (s *Store) RevokePoolGrant(ctx context.Context, p store.RevokePoolGrantParams) (res store.RevokedPoolGrant, err error) {
	err = s.tx(ctx, func(tx pgx.Tx) (err error) {
		q := dbsqlc.New(tx)
		res, err = storeutil.RevokePoolGrant(mapErr, func() (domain.PoolGrant, error) {
			r, err := q.LockPoolGrant(ctx, dbsqlc.LockPoolGrantParams{AgentID: p.AgentID, PersonID: p.PersonID})
			return poolGrantFrom(r), err
		}, func() ([]string, error) {
			return q.GrantedPools(ctx, dbsqlc.GrantedPoolsParams{AgentID: p.AgentID, PersonID: p.PersonID})
		}, func() ([]string, error) {
			return q.UnringGranted(ctx, dbsqlc.UnringGrantedParams{AgentID: p.AgentID, PersonID: p.PersonID})
		}, func() (int64, error) {
			return q.DeletePoolGrant(ctx, dbsqlc.DeletePoolGrantParams{AgentID: p.AgentID, PersonID: p.PersonID})
		}, func(res store.RevokedPoolGrant) error {
			_, err := appendAudit(ctx, tx, p.Now, p.Audit(res))
			return err
		})
		return err
	})
	return res, err
}

func poolGrantFrom(r dbsqlc.PoolGrant) domain.PoolGrant {
	return domain.PoolGrant{AgentID: r.AgentID, PersonID: r.PersonID, GrantedBy: r.GrantedBy, CreatedAt: r.CreatedAt.UTC()}
}
