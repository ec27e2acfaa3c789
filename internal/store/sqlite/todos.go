package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// Todos over the generated queries (sql/queries.sql).

// scanTodo scans a row of storeutil.TodoCols into a todo.
var scanTodo = storeutil.ScanRow(storeutil.TodoCols, todoFrom)

func todoFrom(r dbsqlc.Todo) domain.Todo {
	return storeutil.AsRead(domain.Todo{ID: r.ID, AgentID: r.AgentID.String, Queue: r.Queue, Title: r.Title,
		Payload: rawJSON(r.Payload), Kind: r.Kind, Source: r.Source, IdempotencyKey: r.IdempotencyKey,
		PushEligible: r.PushEligible != 0, CreatedBy: r.CreatedBy, State: r.State,
		Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
		LeaseExpiresAt: fromNullMicros(r.LeaseExpiresAt), RetryAt: fromNullMicros(r.RetryAt),
		RingAttempts: int(r.RingAttempts), LastRingedAt: fromNullMicros(r.LastRingedAt),
		Result: rawJSON(r.Result), LastError: r.LastError,
		CreatedAt: fromMicros(r.CreatedAt), UpdatedAt: fromMicros(r.UpdatedAt),
		ClaimedAt: fromNullMicros(r.ClaimedAt), FinishedAt: fromNullMicros(r.FinishedAt),
		NextRingAt: fromNullMicros(r.NextRingAt), PoolID: r.PoolID.String, RingAgentID: r.RingAgentID.String})
}

// optStr is s as a nullable column: "" is NULL.
func optStr(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// CreateTodo implements store.Store (design: Idempotency keys; dedup
// among live todos). next_ring_at = storeutil.NextRingAt(todo): creation +
// 5 min for a todo not rung yet (design: Sweep). An audited create is
// group-committed with the audited creates that arrive meanwhile
// (writeTodos; design: Group commit).
func (s *Store) CreateTodo(ctx context.Context, p store.CreateTodoParams) (domain.Todo, bool, error) {
	if p.Audit == nil {
		var out domain.Todo
		created := false
		err := s.write(ctx, func(tx *sql.Tx) error {
			var err error
			out, created, err = s.createTodoTx(ctx, tx, p.Todo)
			return err
		})
		if err != nil {
			return domain.Todo{}, false, err
		}
		return out, created, nil
	}
	r, err := s.todos.Do(ctx, p)
	if err != nil {
		return domain.Todo{}, false, err
	}
	return r.Todo, r.Created, nil
}

// writeTodos is the audited CreateTodo's group commit (design: Group
// commit): the batch's creates, each followed by its audit entry, in
// arrival order in one write transaction. In a batch of several, each
// item is written under a savepoint: an item that fails is rolled back to
// it and gets its error, and the others commit.
func (s *Store) writeTodos(ctx context.Context, batch []*storeutil.TodoItem) {
	todo := slices.DeleteFunc(slices.Clone(batch), (*storeutil.TodoItem).Skip)
	if len(todo) == 0 {
		return
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		if len(todo) == 1 { // its error is the transaction's
			it := todo[0]
			return s.createAuditedTx(ctx, tx, it)
		}
		c := s.in(tx)
		for _, it := range todo {
			if it.Skip() {
				continue
			}
			if _, err := c.ExecContext(ctx, "SAVEPOINT todo"); err != nil {
				return mapErr("create todo", err)
			}
			if err := s.createAuditedTx(ctx, tx, it); err != nil {
				if _, rerr := c.ExecContext(ctx, "ROLLBACK TO todo"); rerr != nil {
					return mapErr("create todo", rerr)
				}
			}
			if _, err := c.ExecContext(ctx, "RELEASE todo"); err != nil {
				return mapErr("create todo", err)
			}
		}
		return nil
	})
	if err != nil {
		for _, it := range todo {
			it.Out, it.Err = storeutil.CreatedTodo{}, err
		}
	}
}

// createAuditedTx is one item of writeTodos inside tx: the todo, and its
// audit entry when it was created. It sets the item's Out and Err and
// returns Err.
func (s *Store) createAuditedTx(ctx context.Context, tx *sql.Tx, it *storeutil.TodoItem) error {
	t, created, err := s.createTodoTx(ctx, tx, it.In.Todo)
	if err == nil && created {
		_, err = s.appendAudit(ctx, tx, it.In.Todo.CreatedAt, *it.In.Audit)
	}
	if err != nil {
		t, created = domain.Todo{}, false
	}
	it.Out, it.Err = storeutil.CreatedTodo{Todo: t, Created: created}, err
	return err
}

// createTodoTx is CreateTodo inside tx: the live todo with the key (of
// the agent, or of the pool for a pooled todo; design: Pools), or a new row.
func (s *Store) createTodoTx(ctx context.Context, tx *sql.Tx, t domain.Todo) (domain.Todo, bool, error) {
	q := s.txq(tx)
	if t.IdempotencyKey != "" {
		var existing dbsqlc.Todo
		var err error
		if t.PoolID != "" {
			existing, err = q.LivePoolTodoByKey(ctx, dbsqlc.LivePoolTodoByKeyParams{PoolID: t.PoolID, IdempotencyKey: t.IdempotencyKey})
		} else {
			existing, err = q.LiveTodoByKey(ctx, dbsqlc.LiveTodoByKeyParams{AgentID: t.AgentID, IdempotencyKey: t.IdempotencyKey})
		}
		if err == nil {
			return todoFrom(existing), false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return domain.Todo{}, false, mapErr("create todo", err)
		}
	}
	r, err := q.InsertTodo(ctx, dbsqlc.InsertTodoParams{ID: t.ID, AgentID: optStr(t.AgentID), PoolID: optStr(t.PoolID), Queue: t.Queue,
		Title: t.Title, Payload: nullJSON(t.Payload), Kind: t.Kind, Source: t.Source,
		IdempotencyKey: t.IdempotencyKey, PushEligible: boolInt(t.PushEligible), CreatedBy: t.CreatedBy,
		State: t.State, Attempt: int64(t.Attempt), MaxAttempts: int64(t.MaxAttempts),
		LeaseExpiresAt: nullMicros(t.LeaseExpiresAt), RetryAt: nullMicros(t.RetryAt),
		RingAttempts: int64(t.RingAttempts), LastRingedAt: nullMicros(t.LastRingedAt),
		Result: nullJSON(t.Result), LastError: t.LastError, CreatedAt: micros(t.CreatedAt),
		UpdatedAt: micros(t.UpdatedAt), ClaimedAt: nullMicros(t.ClaimedAt), FinishedAt: nullMicros(t.FinishedAt),
		NextRingAt: nullMicros(storeutil.NextRingAt(t))})
	if err != nil {
		return domain.Todo{}, false, mapErr("create todo", err)
	}
	return todoFrom(r), true, nil
}

// GetTodo implements store.Store.
func (s *Store) GetTodo(ctx context.Context, id string) (domain.Todo, error) {
	r, err := s.rq.GetTodo(ctx, id)
	return storeutil.One(r, mapErr("get todo", err), todoFrom)
}

// ListTodos implements store.Store: oldest first (created_at, then id);
// Limit <= 0 means no limit.
func (s *Store) ListTodos(ctx context.Context, p store.ListTodosParams) ([]domain.Todo, error) {
	rows, err := s.rq.ListTodos(ctx, dbsqlc.ListTodosParams{AgentID: p.AgentID, Queues: encodeList(p.Queues),
		State: p.State, AfterID: p.AfterID, PoolID: p.PoolID, WithPools: boolInt(p.WithPools), Live: boolInt(p.Live), Lim: limit(p.Limit)})
	return storeutil.All(rows, mapErr("list todos", err), todoFrom)
}

// ClaimTodo implements store.Store (design: Lease; claim): ErrNotFound when
// the todo is not the agent's or not in Queues, ErrConflict when it is not
// claimable at Now.
func (s *Store) ClaimTodo(ctx context.Context, p store.ClaimTodoParams) (domain.Todo, error) {
	var t domain.Todo
	err := s.write(ctx, func(tx *sql.Tx) error {
		queues := encodeList(p.Queues)
		r, err := s.txq(tx).ClaimTodo(ctx, dbsqlc.ClaimTodoParams{ID: p.TodoID, AgentID: p.AgentID,
			Queues: queues, Now: micros(p.Now), LeaseUntil: micros(p.Now.Add(storeutil.Lease(p.Lease)))})
		return s.gated(ctx, tx, "claim todo", r, err, p.TodoID, p.AgentID, queues, &t)
	})
	return t, err
}

// todoGate explains a conditional update that matched nothing: ErrNotFound
// when the todo is not the agent's (or, unless queues is "", not in one of
// the JSON array queues), else ErrConflict.
func (s *Store) todoGate(ctx context.Context, tx *sql.Tx, what, id, agentID, queues string) error {
	n, err := s.txq(tx).TodoOfAgent(ctx, dbsqlc.TodoOfAgentParams{ID: id, AgentID: agentID, Queues: queues})
	if err != nil {
		return mapErr(what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, domain.ErrNotFound)
	}
	return fmt.Errorf("%s: todo %s is not in a state that allows it: %w", what, id, domain.ErrConflict)
}

// gated sets *t to the todo a conditional update in tx returned, or, when
// it matched nothing, explains why (todoGate).
func (s *Store) gated(ctx context.Context, tx *sql.Tx, what string, r dbsqlc.Todo, err error, id, agentID, queues string, t *domain.Todo) error {
	if errors.Is(err, sql.ErrNoRows) {
		return s.todoGate(ctx, tx, what, id, agentID, queues)
	}
	if err != nil {
		return mapErr(what, err)
	}
	*t = todoFrom(r)
	return nil
}

// ClaimNext implements store.Store (design: Lease; claim_next): the oldest
// claimable todo (created_at, then id) of the agent in Queues.
func (s *Store) ClaimNext(ctx context.Context, p store.ClaimNextParams) (domain.Todo, error) {
	p.N = 1
	return storeutil.FirstClaim(s.ClaimNextN(ctx, p))
}

// ClaimNextN implements store.Store (design: Claiming in batches).
func (s *Store) ClaimNextN(ctx context.Context, p store.ClaimNextParams) ([]domain.Todo, error) {
	return writeValue(ctx, s, func(tx *sql.Tx) ([]domain.Todo, error) { return s.claimNext(ctx, tx, p) })
}

// claimNext claims up to p.N (at least 1, at most domain.MaxClaimBatch)
// todos in tx and returns them oldest first. The query walks each queue
// once, so each is named once.
func (s *Store) claimNext(ctx context.Context, tx *sql.Tx, p store.ClaimNextParams) ([]domain.Todo, error) {
	rows, err := s.txq(tx).ClaimNext(ctx, dbsqlc.ClaimNextParams{AgentID: p.AgentID, Queues: encodeList(storeutil.SortedUnique(p.Queues)),
		Now: micros(p.Now), LeaseUntil: micros(p.Now.Add(storeutil.Lease(p.Lease))), Lim: int64(storeutil.ClaimBatch(p.N))})
	ts, err := storeutil.All(rows, mapErr("claim next", err), todoFrom)
	storeutil.SortTodos(ts)
	return ts, err
}

// RenewLease implements store.Store (design: Lease; renew).
func (s *Store) RenewLease(ctx context.Context, p store.RenewLeaseParams) (domain.Todo, error) {
	var t domain.Todo
	err := s.write(ctx, func(tx *sql.Tx) error {
		r, err := s.txq(tx).RenewLease(ctx, dbsqlc.RenewLeaseParams{ID: p.TodoID, AgentID: p.AgentID,
			Now: micros(p.Now), LeaseUntil: micros(p.Now.Add(storeutil.Lease(p.Lease)))})
		return s.gated(ctx, tx, "renew lease", r, err, p.TodoID, p.AgentID, "", &t)
	})
	return t, err
}

// CompleteTodo implements store.Store (design: Todo lifecycle; complete).
func (s *Store) CompleteTodo(ctx context.Context, p store.CompleteTodoParams) (domain.Todo, error) {
	return writeValue(ctx, s, func(tx *sql.Tx) (domain.Todo, error) { return s.completeTodo(ctx, tx, p) })
}

func (s *Store) completeTodo(ctx context.Context, tx *sql.Tx, p store.CompleteTodoParams) (domain.Todo, error) {
	var t domain.Todo
	r, err := s.txq(tx).CompleteTodo(ctx, dbsqlc.CompleteTodoParams{ID: p.TodoID, AgentID: p.AgentID,
		Now: micros(p.Now), Result: nullJSON(p.Result)})
	err = s.gated(ctx, tx, "complete todo", r, err, p.TodoID, p.AgentID, "", &t)
	return t, err
}

// CompleteAndClaim implements store.Store (design: Complete and claim the
// next): one transaction, so one commit, for both.
func (s *Store) CompleteAndClaim(ctx context.Context, c store.CompleteTodoParams, next store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
	return s.finishAndClaim(ctx, func(tx *sql.Tx) (domain.Todo, error) { return s.completeTodo(ctx, tx, c) }, next)
}

// FailAndClaim implements store.Store (design: Complete and claim the next).
func (s *Store) FailAndClaim(ctx context.Context, f store.FailTodoParams, next store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
	return s.finishAndClaim(ctx, func(tx *sql.Tx) (domain.Todo, error) { return s.failTodo(ctx, tx, f) }, next)
}

// finishAndClaim runs finish and then claimNext of next in one
// transaction; nothing is claimed when finish fails.
func (s *Store) finishAndClaim(ctx context.Context, finish func(*sql.Tx) (domain.Todo, error), next store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
	var done domain.Todo
	var claimed []domain.Todo
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		if done, err = finish(tx); err != nil {
			return err
		}
		claimed, err = s.claimNext(ctx, tx, next)
		return err
	})
	if err != nil {
		return domain.Todo{}, nil, err
	}
	return done, claimed, nil
}

// FailTodo implements store.Store (design: Retries and dead letter).
// A dead-lettered todo also gets finished_at = Now.
func (s *Store) FailTodo(ctx context.Context, p store.FailTodoParams) (domain.Todo, error) {
	return writeValue(ctx, s, func(tx *sql.Tx) (domain.Todo, error) { return s.failTodo(ctx, tx, p) })
}

func (s *Store) failTodo(ctx context.Context, tx *sql.Tx, p store.FailTodoParams) (domain.Todo, error) {
	q := s.txq(tx)
	held, err := q.HeldAttempts(ctx, dbsqlc.HeldAttemptsParams{ID: p.TodoID, AgentID: p.AgentID, Now: micros(p.Now)})
	if errors.Is(err, sql.ErrNoRows) {
		return domain.Todo{}, s.todoGate(ctx, tx, "fail todo", p.TodoID, p.AgentID, "")
	}
	if err != nil {
		return domain.Todo{}, mapErr("fail todo", err)
	}
	retry := domain.NextAfterFailure(int(held.Attempt), int(held.MaxAttempts), p.Now)
	var finished sql.NullInt64
	if retry == nil {
		finished = nullMicros(&p.Now)
	}
	r, err := q.FailTodo(ctx, dbsqlc.FailTodoParams{ID: p.TodoID, Reason: p.Reason, RetryAt: nullMicros(retry),
		Now: micros(p.Now), FinishedAt: finished})
	return storeutil.One(r, mapErr("fail todo", err), todoFrom)
}

// ReapExpiredLeases implements store.Store (design: Lease): expired
// claims go back to pending (last_error "lease expired") or, at
// max_attempts, to dead letter with finished_at = Now. The oldest leases go
// first; Limit <= 0 means no limit. The ids come back in no particular order.
// The ring columns (ring_attempts, last_ringed_at, next_ring_at) are left as
// they are.
func (s *Store) ReapExpiredLeases(ctx context.Context, p store.ReapParams) ([]store.Reaped, error) {
	rows, err := storeutil.InTx(func(f func(*sql.Tx) error) error { return s.write(ctx, f) }, func(tx *sql.Tx) ([]dbsqlc.ReapExpiredLeasesRow, error) {
		rows, err := s.txq(tx).ReapExpiredLeases(ctx, dbsqlc.ReapExpiredLeasesParams{Now: micros(p.Now), Lim: limit(p.Limit)})
		return rows, mapErr("reap leases", err)
	})
	return storeutil.All(rows, err, func(r dbsqlc.ReapExpiredLeasesRow) store.Reaped {
		return store.Reaped{ID: r.ID, AgentID: r.AgentID, PoolID: r.PoolID}
	})
}

// MarkRungBatch implements store.Store (design: Ring budget): MarkRung of
// each mark in order, in one write transaction.
func (s *Store) MarkRungBatch(ctx context.Context, marks []store.MarkRungParams) (int, error) {
	if len(marks) == 0 {
		return 0, nil
	}
	changed := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		changed = 0
		for _, p := range marks {
			// Hand-written: the ring-delay CASE is built from domain.SweepDelays.
			res, err := s.in(tx).ExecContext(ctx, markRungSQL, p.TodoID, micros(p.At))
			if err != nil {
				return mapErr("mark rung", err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return mapErr("mark rung", err)
			}
			changed += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return changed, nil
}

// markRungSQL records one ring of the pending todo ?1 at ?2.
var markRungSQL = `UPDATE todos ` + ringSet("?2") + ` WHERE id = ?1 AND state = 'pending'`

// ring is the sweep backoff of domain.SweepDelays as SQL, in microseconds
// (storeutil.RingSQL).
var ring = storeutil.NewRingSQL(sqlMicros, "")

// ringSet is ring's SET clause of a ring rung at the parameter at.
func ringSet(at string) string { return ring.Set(at) }

func sqlMicros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }
