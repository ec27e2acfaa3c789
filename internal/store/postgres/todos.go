package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// Todos and the audit chain (design: Audit chain) over the generated
// queries (sql/queries.sql).

// todoFrom turns a row into a todo, every time in UTC.
func todoFrom(r dbsqlc.Todo) domain.Todo {
	return storeutil.AsRead(domain.Todo{ID: r.ID, AgentID: deref(r.AgentID), Queue: r.Queue, Title: r.Title,
		Payload: rawJSON(r.Payload), Kind: r.Kind, Source: r.Source, IdempotencyKey: r.IdempotencyKey,
		PushEligible: r.PushEligible, CreatedBy: r.CreatedBy, State: r.State,
		Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
		LeaseExpiresAt: utcPtr(r.LeaseExpiresAt), RetryAt: utcPtr(r.RetryAt),
		RingAttempts: int(r.RingAttempts), LastRingedAt: utcPtr(r.LastRingedAt),
		Result: rawJSON(r.Result), LastError: r.LastError,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		ClaimedAt: utcPtr(r.ClaimedAt), FinishedAt: utcPtr(r.FinishedAt), NextRingAt: utcPtr(r.NextRingAt),
		PoolID: deref(r.PoolID), RingAgentID: deref(r.RingAgentID)})
}

// optStr is s as a nullable column: "" is NULL.
func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// scanTodo scans a row of storeutil.TodoCols into a todo.
var scanTodo = storeutil.ScanRow(storeutil.TodoCols, todoFrom)

func collectTodos(rows pgx.Rows) ([]domain.Todo, error) {
	defer rows.Close()
	return storeutil.Collect(rows, scanTodo)
}

// CreateTodo implements store.Store (design: Idempotency keys; dedup
// among live todos). Concurrent creates with one key insert once: the
// loser's ON CONFLICT waits for the winner and then reads its row.
// next_ring_at = storeutil.NextRingAt(todo): creation + 5 min for a todo not
// rung yet (design: Sweep). An audited create is group-committed with the
// audited creates that arrive meanwhile (writeTodos; design: Group commit).
func (s *Store) CreateTodo(ctx context.Context, p store.CreateTodoParams) (domain.Todo, bool, error) {
	if p.Audit == nil {
		return createTodoQ(ctx, s.q, p.Todo)
	}
	r, err := s.todos.Do(ctx, p)
	if err != nil {
		return domain.Todo{}, false, err
	}
	return r.Todo, r.Created, nil
}

// errRefused ends a group commit's transaction whose item the server
// refused (writeTodos).
var errRefused = errors.New("an item of the batch was refused")

// maxBatchRetries bounds how often writeTodos writes a batch again after
// a deadlock or serialization failure (SQLSTATE class 40).
const maxBatchRetries = 3

// writeTodos is the audited CreateTodo's group commit (design: Group
// commit): the batch's creates in one transaction, in arrival order, then
// their audit entries with one INSERT under one acquisition of the chain's
// advisory lock, then one commit — in two round trips (writeBatch). An
// insert the server refuses (a pool or agent deleted meanwhile, a taken
// id) aborts the transaction: that item gets its error and the transaction
// is written again without it, so one bad item does not fail its
// batch-mates. A deadlock with another instance's batch (two keys taken in
// opposite orders) writes the batch again, at most maxBatchRetries times.
func (s *Store) writeTodos(ctx context.Context, batch []*storeutil.TodoItem) {
	todo := slices.Clone(batch)
	for retries := 0; ; {
		todo = slices.DeleteFunc(todo, (*storeutil.TodoItem).Skip)
		if len(todo) == 0 {
			return
		}
		refused, err := s.writeBatch(ctx, todo)
		switch {
		case errors.Is(err, errRefused) && refused != nil:
			todo = slices.DeleteFunc(todo, func(it *storeutil.TodoItem) bool { return it == refused })
			continue
		case retryable(err) && retries < maxBatchRetries:
			retries++
			continue
		case err != nil:
			for _, it := range todo {
				it.Out, it.Err = storeutil.CreatedTodo{}, err
			}
		}
		return
	}
}

// auditTailSQL reads the chain's tail; under the chain's advisory lock it
// is the tail the next entry extends.
const auditTailSQL = `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`

// writeBatch writes todo in one transaction on a connection of the group
// commit's pool, pipelined in two round trips where one statement each
// took six: BEGIN, the inserts, the chain's lock and the tail it extends
// (readInserts); then the audit entries of the todos created and COMMIT.
// A live todo that held an item's key is read between the two (createTodoQ;
// its round trips only then). On any error the transaction is rolled back
// (or the connection closed), and the error returned: errRefused with the
// item the server refused, whose Err is set.
func (s *Store) writeBatch(ctx context.Context, todo []*storeutil.TodoItem) (refused *storeutil.TodoItem, err error) {
	c, err := s.commits.Acquire(ctx)
	if err != nil {
		return nil, mapErr("create todo", err)
	}
	committed := false
	defer func() {
		if !committed && c.Conn().PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, rerr := c.Exec(rctx, "ROLLBACK"); rerr != nil {
				_ = c.Conn().Close(rctx) // not reused: the pool drops a closed connection
			}
			cancel()
		}
		c.Release()
	}()
	var b pgx.Batch
	b.Queue("BEGIN")
	rec := &recorder{}
	rq := dbsqlc.New(rec)
	for _, it := range todo {
		_, _ = insertTodo(ctx, rq, it.In.Todo) // records the statement
		b.Queue(rec.sql, rec.args...)
	}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, lockAudit)
	b.Queue(auditTailSQL)
	seq, prev, refused, err := readInserts(ctx, c.SendBatch(ctx, &b), todo)
	if err != nil || refused != nil {
		return refused, cmp.Or(err, errRefused)
	}
	q := dbsqlc.New(c)
	ats, recs := make([]time.Time, 0, len(todo)), make([]domain.AuditRecord, 0, len(todo))
	for _, it := range todo {
		if it.Err != nil { // a live todo held its key: return it (or insert again, it stopped being live)
			t, created, err := createTodoQ(ctx, q, it.In.Todo)
			it.Out, it.Err = storeutil.CreatedTodo{Todo: t, Created: created}, err
			switch {
			case err == nil:
			case ctx.Err() != nil || c.Conn().IsClosed() || retryable(err):
				return nil, err // the whole batch's
			case c.Conn().PgConn().TxStatus() == 'E': // the server refused this item's write (its pool deleted meanwhile): it fails alone
				return it, errRefused
			default: // this item's (its key keeps changing hands); the transaction lives on
				continue
			}
		}
		if it.Out.Created {
			ats, recs = append(ats, it.In.Todo.CreatedAt), append(recs, *it.In.Audit)
		}
	}
	var b2 pgx.Batch
	if len(recs) > 0 {
		sql, args, err := auditInsert(seq, prev, ats, recs)
		if err != nil {
			return nil, err
		}
		b2.Queue(sql, args...)
	}
	b2.Queue("COMMIT")
	br := c.SendBatch(ctx, &b2)
	if len(recs) > 0 {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return nil, mapErr("append audit", err)
		}
	}
	tag, err := br.Exec()
	if err == nil && tag.String() == "COMMIT" {
		// Committed: what follows the commit's answer (an error of the closing
		// batch, say the backend terminated after committing) is the
		// connection's, not the batch's; the pool drops a broken connection.
		committed = true
		_ = br.Close()
		return nil, nil
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, mapErr("create todo", err)
	}
	return nil, fmt.Errorf("create todo: transaction rolled back (%s)", tag) // COMMIT of a failed transaction answers ROLLBACK
}

// readInserts reads the answers of writeBatch's first round trip: BEGIN,
// one insert per item of todo (setting its Out, or Err = pgx.ErrNoRows
// where a live todo holds its key), the lock, and the chain's tail
// (seq 0 and "" for an empty chain). The first insert the server refuses
// is returned, with its Err set (the transaction is then aborted); err is
// the whole batch's. It closes br.
func readInserts(ctx context.Context, br pgx.BatchResults, todo []*storeutil.TodoItem) (seq int64, prev string, refused *storeutil.TodoItem, err error) {
	defer func() {
		if cerr := br.Close(); cerr != nil && err == nil && refused == nil {
			err = mapErr("create todo", cerr)
		}
	}()
	if _, err := br.Exec(); err != nil {
		return 0, "", nil, mapErr("create todo", err)
	}
	for _, it := range todo {
		t, err := scanTodo(br.QueryRow())
		it.Out, it.Err = storeutil.CreatedTodo{Todo: t, Created: err == nil}, nil
		if errors.Is(err, pgx.ErrNoRows) {
			it.Err = err
			continue
		}
		var pe *pgconn.PgError
		if err != nil && errors.As(err, &pe) && !retryable(err) && ctx.Err() == nil {
			it.Out, it.Err = storeutil.CreatedTodo{}, mapErr("create todo", err)
			return 0, "", it, nil
		}
		if err != nil {
			return 0, "", nil, mapErr("create todo", err)
		}
	}
	if _, err := br.Exec(); err != nil {
		return 0, "", nil, mapErr("append audit", err)
	}
	if err := br.QueryRow().Scan(&seq, &prev); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil, mapErr("append audit", err)
	}
	return seq, prev, nil, nil
}

// recorder is a dbsqlc.DBTX that runs nothing: it keeps the statement and
// arguments of the last query a generated method asked for, so that
// writeBatch can send the generated statements in one batch.
type recorder struct {
	sql  string
	args []any
}

var errRecorded = errors.New("recorded, not run")

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return recordedRow{}
}

type recordedRow struct{}

func (recordedRow) Scan(...any) error { return errRecorded }

// retryable reports a deadlock or serialization failure (SQLSTATE class
// 40): the transaction can be written again as it was.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "40")
}

// insertTodo inserts t (InsertTodo, or InsertPoolTodo for a pooled todo):
// pgx.ErrNoRows when a live todo holds its key.
func insertTodo(ctx context.Context, q *dbsqlc.Queries, t domain.Todo) (dbsqlc.Todo, error) {
	arg := insertArg(t)
	if t.PoolID != "" { // pushed to a pool: its key is the pool's (design: Pools)
		return q.InsertPoolTodo(ctx, dbsqlc.InsertPoolTodoParams(arg))
	}
	return q.InsertTodo(ctx, arg)
}

func insertArg(t domain.Todo) dbsqlc.InsertTodoParams {
	return dbsqlc.InsertTodoParams{ID: t.ID, AgentID: optStr(t.AgentID), Queue: t.Queue, Title: t.Title,
		Payload: nullJSON(t.Payload), Kind: t.Kind, Source: t.Source, IdempotencyKey: t.IdempotencyKey,
		PushEligible: t.PushEligible, CreatedBy: t.CreatedBy, State: t.State,
		Attempt: int32(t.Attempt), MaxAttempts: int32(t.MaxAttempts),
		LeaseExpiresAt: storeutil.MicroPtr(t.LeaseExpiresAt), RetryAt: storeutil.MicroPtr(t.RetryAt),
		RingAttempts: int32(t.RingAttempts), LastRingedAt: storeutil.MicroPtr(t.LastRingedAt),
		Result: nullJSON(t.Result), LastError: t.LastError, CreatedAt: micro(t.CreatedAt),
		UpdatedAt: micro(t.UpdatedAt), ClaimedAt: storeutil.MicroPtr(t.ClaimedAt),
		FinishedAt: storeutil.MicroPtr(t.FinishedAt), NextRingAt: storeutil.NextRingAt(t), PoolID: optStr(t.PoolID)}
}

// createTodoQ is CreateTodo on the pool or inside a transaction.
func createTodoQ(ctx context.Context, q *dbsqlc.Queries, t domain.Todo) (domain.Todo, bool, error) {
	live := func() (dbsqlc.Todo, error) {
		return q.LiveTodoByKey(ctx, dbsqlc.LiveTodoByKeyParams{AgentID: t.AgentID, IdempotencyKey: t.IdempotencyKey})
	}
	if t.PoolID != "" {
		live = func() (dbsqlc.Todo, error) {
			return q.LivePoolTodoByKey(ctx, dbsqlc.LivePoolTodoByKeyParams{PoolID: t.PoolID, IdempotencyKey: t.IdempotencyKey})
		}
	}
	for range 3 {
		r, err := insertTodo(ctx, q, t)
		if err == nil {
			return todoFrom(r), true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return domain.Todo{}, false, mapErr("create todo", err)
		}
		// A live todo holds the key: return it.
		r, err = live()
		if err == nil {
			return todoFrom(r), false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return domain.Todo{}, false, mapErr("create todo", err)
		}
		// It stopped being live in between; insert again.
	}
	return domain.Todo{}, false, fmt.Errorf("create todo: idempotency key %q keeps changing hands: %w", t.IdempotencyKey, domain.ErrConflict)
}

// GetTodo implements store.Store.
func (s *Store) GetTodo(ctx context.Context, id string) (domain.Todo, error) {
	r, err := s.q.GetTodo(ctx, id)
	return storeutil.One(r, mapErr("get todo", err), todoFrom)
}

// ListTodos implements store.Store: oldest first (created_at, then id);
// Limit <= 0 means no limit.
func (s *Store) ListTodos(ctx context.Context, p store.ListTodosParams) ([]domain.Todo, error) {
	rows, err := s.q.ListTodos(ctx, dbsqlc.ListTodosParams{AgentID: p.AgentID, Queues: storeutil.Strings(p.Queues),
		State: p.State, AfterID: p.AfterID, PoolID: p.PoolID, WithPools: p.WithPools, Live: p.Live, Lim: limitArg(p.Limit)})
	return storeutil.All(rows, mapErr("list todos", err), todoFrom)
}

// ClaimTodo implements store.Store (design: Lease; claim): ErrNotFound when
// the todo is not the agent's or not in Queues, ErrConflict when it is not
// claimable at Now.
func (s *Store) ClaimTodo(ctx context.Context, p store.ClaimTodoParams) (domain.Todo, error) {
	queues := storeutil.Strings(p.Queues)
	r, err := s.q.ClaimTodo(ctx, dbsqlc.ClaimTodoParams{ID: p.TodoID, AgentID: p.AgentID, Queues: queues,
		Now: micro(p.Now), LeaseUntil: micro(p.Now.Add(storeutil.Lease(p.Lease)))})
	return s.gated(ctx, "claim todo", r, err, p.TodoID, p.AgentID, queues)
}

// todoGate explains a conditional update that matched nothing: ErrNotFound
// when the todo is not the agent's (or, with queues non-nil, not in one of
// them), else ErrConflict.
func todoGate(ctx context.Context, q *dbsqlc.Queries, what, id, agentID string, queues []string) error {
	exists, err := q.TodoOfAgent(ctx, dbsqlc.TodoOfAgentParams{ID: id, AgentID: agentID, Queues: queues})
	if err != nil {
		return mapErr(what, err)
	}
	if !exists {
		return fmt.Errorf("%s: todo %s: %w", what, id, domain.ErrNotFound)
	}
	return fmt.Errorf("%s: todo %s is not in a state that allows it: %w", what, id, domain.ErrConflict)
}

// gated is the todo a conditional update returned, or, when it matched
// nothing, why (todoGate).
func (s *Store) gated(ctx context.Context, what string, r dbsqlc.Todo, err error, id, agentID string, queues []string) (domain.Todo, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Todo{}, todoGate(ctx, s.q, what, id, agentID, queues)
	}
	return storeutil.One(r, mapErr(what, err), todoFrom)
}

// ClaimNext implements store.Store (design: Lease; claim_next): the oldest
// claimable todo (created_at, then id) of the agent in Queues.
func (s *Store) ClaimNext(ctx context.Context, p store.ClaimNextParams) (domain.Todo, error) {
	p.N = 1
	return storeutil.FirstClaim(claimNext(ctx, s.q, p))
}

// ClaimNextN implements store.Store (design: Claiming in batches).
func (s *Store) ClaimNextN(ctx context.Context, p store.ClaimNextParams) ([]domain.Todo, error) {
	return claimNext(ctx, s.q, p)
}

// claimNext claims up to p.N (at least 1, at most domain.MaxClaimBatch)
// todos with q and returns them oldest first.
func claimNext(ctx context.Context, q *dbsqlc.Queries, p store.ClaimNextParams) ([]domain.Todo, error) {
	_, ts, err := completeAndClaim(ctx, q, nil, p)
	return ts, err
}

// completeAndClaim is claimNext after CompleteTodo of c when c is not
// nil, in one statement (ClaimNext with done_id; design: Complete and
// claim the next): one round trip, and nothing claimed unless the todo
// was completed. It returns the completed todo and the claims, oldest
// first; a complete that matched nothing is explained by todoGate.
func completeAndClaim(ctx context.Context, q *dbsqlc.Queries, c *store.CompleteTodoParams, p store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
	what := "claim next"
	arg := dbsqlc.ClaimNextParams{AgentID: p.AgentID, Queues: storeutil.Strings(p.Queues),
		Now: micro(p.Now), LeaseUntil: micro(p.Now.Add(storeutil.Lease(p.Lease))), Lim: int32(storeutil.ClaimBatch(p.N))}
	if c != nil {
		what, arg.DoneID, arg.DoneAgentID, arg.Result = "complete todo", &c.TodoID, c.AgentID, nullJSON(c.Result)
	}
	rows, err := q.ClaimNext(ctx, arg)
	if err != nil {
		return domain.Todo{}, nil, mapErr(what, err)
	}
	var done domain.Todo
	claimed := make([]domain.Todo, 0, len(rows))
	for _, r := range rows {
		if t := todoFrom(dbsqlc.Todo(r)); c != nil && t.ID == c.TodoID {
			done = t
		} else {
			claimed = append(claimed, t)
		}
	}
	if c != nil && done.ID == "" {
		return domain.Todo{}, nil, todoGate(ctx, q, what, c.TodoID, c.AgentID, nil)
	}
	storeutil.SortTodos(claimed)
	return done, claimed, nil
}

// RenewLease implements store.Store (design: Lease; renew).
func (s *Store) RenewLease(ctx context.Context, p store.RenewLeaseParams) (domain.Todo, error) {
	r, err := s.q.RenewLease(ctx, dbsqlc.RenewLeaseParams{ID: p.TodoID, AgentID: p.AgentID,
		Now: micro(p.Now), LeaseUntil: micro(p.Now.Add(storeutil.Lease(p.Lease)))})
	return s.gated(ctx, "renew lease", r, err, p.TodoID, p.AgentID, nil)
}

// CompleteTodo implements store.Store (design: Todo lifecycle; complete).
func (s *Store) CompleteTodo(ctx context.Context, p store.CompleteTodoParams) (domain.Todo, error) {
	return completeTodo(ctx, s.q, p)
}

func completeTodo(ctx context.Context, q *dbsqlc.Queries, p store.CompleteTodoParams) (domain.Todo, error) {
	r, err := q.CompleteTodo(ctx, dbsqlc.CompleteTodoParams{ID: p.TodoID, AgentID: p.AgentID,
		Now: micro(p.Now), Result: nullJSON(p.Result)})
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Todo{}, todoGate(ctx, q, "complete todo", p.TodoID, p.AgentID, nil)
	}
	return storeutil.One(r, mapErr("complete todo", err), todoFrom)
}

// CompleteAndClaim implements store.Store (design: Complete and claim the
// next): one statement, so one round trip and one commit, for both.
func (s *Store) CompleteAndClaim(ctx context.Context, c store.CompleteTodoParams, next store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
	return completeAndClaim(ctx, s.q, &c, next)
}

// FailAndClaim implements store.Store (design: Complete and claim the next).
func (s *Store) FailAndClaim(ctx context.Context, f store.FailTodoParams, next store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
	return s.finishAndClaim(ctx, func(q *dbsqlc.Queries) (domain.Todo, error) { return failTodo(ctx, q, f) }, next)
}

// finishAndClaim runs finish and then claimNext of next in one
// transaction; nothing is claimed when finish fails.
func (s *Store) finishAndClaim(ctx context.Context, finish func(*dbsqlc.Queries) (domain.Todo, error), next store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
	var done domain.Todo
	var claimed []domain.Todo
	err := s.tx(ctx, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		var err error
		if done, err = finish(q); err != nil {
			return err
		}
		claimed, err = claimNext(ctx, q, next)
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
	return txValue(ctx, s, func(q *dbsqlc.Queries) (domain.Todo, error) { return failTodo(ctx, q, p) })
}

// failTodo is FailTodo in a transaction (q is the transaction's).
func failTodo(ctx context.Context, q *dbsqlc.Queries, p store.FailTodoParams) (domain.Todo, error) {
	now := micro(p.Now)
	held, err := q.LockHeldAttempts(ctx, dbsqlc.LockHeldAttemptsParams{ID: p.TodoID, AgentID: p.AgentID, Now: now})
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Todo{}, todoGate(ctx, q, "fail todo", p.TodoID, p.AgentID, nil)
	}
	if err != nil {
		return domain.Todo{}, mapErr("fail todo", err)
	}
	retry := storeutil.MicroPtr(domain.NextAfterFailure(int(held.Attempt), int(held.MaxAttempts), now))
	var finished *time.Time
	if retry == nil {
		finished = &now
	}
	r, err := q.FailTodo(ctx, dbsqlc.FailTodoParams{ID: p.TodoID, Reason: p.Reason, RetryAt: retry,
		Now: now, FinishedAt: finished})
	return storeutil.One(r, mapErr("fail todo", err), todoFrom)
}

// ReapExpiredLeases implements store.Store (design: Lease): expired
// claims go back to pending (last_error "lease expired") or, at
// max_attempts, to dead letter with finished_at = Now. The oldest leases go
// first; rows locked by another reaper are skipped; Limit <= 0 means no
// limit. A pooled todo going back to pending goes back to its pool
// (design: Pools). The ids come back in no particular order. The ring columns
// (ring_attempts, last_ringed_at, next_ring_at) are left as they are.
func (s *Store) ReapExpiredLeases(ctx context.Context, p store.ReapParams) ([]store.Reaped, error) {
	// Hand-written: the picks are a MATERIALIZED CTE with SKIP LOCKED,
	// evaluated once (an IN subquery with LIMIT and SKIP LOCKED may be
	// rescanned and take rows past the limit).
	rows, err := s.pool.Query(ctx, `WITH pick AS MATERIALIZED (
			SELECT id AS pick_id FROM todos WHERE state = 'claimed' AND lease_expires_at <= $1
			ORDER BY lease_expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE todos SET
			state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END,
			finished_at = CASE WHEN attempt < max_attempts THEN NULL ELSE $1 END,
			agent_id = CASE WHEN pool_id IS NOT NULL AND attempt < max_attempts THEN NULL ELSE agent_id END,
			lease_expires_at = NULL, retry_at = NULL, last_error = 'lease expired', ring_agent_id = NULL,
			updated_at = $1
		FROM pick
		WHERE todos.id = pick.pick_id AND todos.state = 'claimed'
		RETURNING id, coalesce(agent_id, ''), coalesce(pool_id, '')`, micro(p.Now), limitArg(p.Limit))
	if err != nil {
		return nil, mapErr("reap leases", err)
	}
	reaped, err := pgx.CollectRows(rows, pgx.RowToStructByPos[store.Reaped])
	if err != nil {
		return nil, mapErr("reap leases", err)
	}
	return reaped, nil
}

// MarkRungBatch implements store.Store (design: Ring budget): one UPDATE a
// mark, sent as one pgx batch, so one round trip and one implicit
// transaction (the statements before the batch's one Sync), one commit.
// The marks go in todo id order (a todo's own marks in theirs), so two
// batches lock their rows in one order; a deadlock with another writer
// (SQLSTATE class 40) writes the batch again, at most maxBatchRetries
// times.
func (s *Store) MarkRungBatch(ctx context.Context, marks []store.MarkRungParams) (int, error) {
	if len(marks) == 0 {
		return 0, nil
	}
	marks = slices.Clone(marks)
	slices.SortStableFunc(marks, func(a, b store.MarkRungParams) int { return strings.Compare(a.TodoID, b.TodoID) })
	for retries := 0; ; retries++ {
		n, err := s.sendMarks(ctx, marks)
		if retryable(err) && retries < maxBatchRetries {
			continue
		}
		return n, mapErr("mark rung", err)
	}
}

// sendMarks sends marks as one batch and counts the rows they changed.
func (s *Store) sendMarks(ctx context.Context, marks []store.MarkRungParams) (int, error) {
	var b pgx.Batch
	for _, p := range marks {
		// Hand-written: the ring-delay CASE is built from domain.SweepDelays.
		b.Queue(markRungSQL, p.TodoID, micro(p.At))
	}
	br := s.pool.SendBatch(ctx, &b)
	changed := 0
	for range marks {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return 0, err
		}
		changed += int(tag.RowsAffected())
	}
	if err := br.Close(); err != nil {
		return 0, err
	}
	return changed, nil
}

// markRungSQL records one ring of the pending todo $1 at $2.
var markRungSQL = `UPDATE todos ` + ringSet("$2") + ` WHERE id = $1 AND state = 'pending'`

// ring is the sweep backoff of domain.SweepDelays as SQL, in intervals
// (storeutil.RingSQL).
var ring = storeutil.NewRingSQL(sqlInterval, "::timestamptz")

// ringSet is ring's SET clause of a ring rung at the parameter at.
func ringSet(at string) string { return ring.Set(at) }

// sqlInterval renders d as an exact interval literal.
func sqlInterval(d time.Duration) string {
	if d%time.Second == 0 {
		return "interval '" + strconv.FormatInt(int64(d/time.Second), 10) + " seconds'"
	}
	return "interval '" + strconv.FormatInt(d.Microseconds(), 10) + " microseconds'"
}

func auditFrom(r dbsqlc.Audit) domain.AuditEntry {
	return domain.AuditEntry{Seq: r.Seq, At: r.At.UTC(), Actor: r.Actor, Action: r.Action,
		AgentID: r.AgentID, Decision: r.Decision, Data: rawJSON(r.Data), PrevHash: r.PrevHash, Hash: r.Hash}
}

// scanAudit scans a row of every audit column in table order.
func scanAudit(sc storeutil.Scanner) (domain.AuditEntry, error) {
	var r dbsqlc.Audit
	err := sc.Scan(&r.Seq, &r.At, &r.Actor, &r.Action, &r.AgentID, &r.Decision, &r.Data, &r.PrevHash, &r.Hash)
	return auditFrom(r), err
}

// appendAudit extends the chain inside tx. The advisory lock, held until tx
// ends, serialises appends across connections and instances, so two appends
// never read the same tail.
func appendAudit(ctx context.Context, tx pgx.Tx, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockAudit); err != nil {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	q := dbsqlc.New(tx)
	tail := func() (int64, string, error) { t, err := q.AuditTail(ctx); return t.Seq, t.Hash, err }
	return storeutil.AppendAudit(at, r, pgx.ErrNoRows, mapErr, tail, func(e domain.AuditEntry) error {
		return q.InsertAudit(ctx, dbsqlc.InsertAuditParams{Seq: e.Seq, At: e.At, Actor: e.Actor, Action: e.Action,
			AgentID: e.AgentID, Decision: e.Decision, Data: nullJSON(e.Data), PrevHash: e.PrevHash, Hash: e.Hash})
	})
}

// txAudited runs fn in one transaction (s.tx) and, when fn succeeds,
// appends rec at at in the same transaction: the shape of every audited
// change (store conventions: the audit record commits with the change).
func (s *Store) txAudited(ctx context.Context, at time.Time, rec domain.AuditRecord, fn func(tx pgx.Tx) error) error {
	return s.tx(ctx, storeutil.Audited(fn, func(tx pgx.Tx) error {
		_, err := appendAudit(ctx, tx, at, rec)
		return err
	}))
}

// AppendAudit implements store.Store (design: Audit chain).
func (s *Store) AppendAudit(ctx context.Context, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	return storeutil.InTx(func(f func(pgx.Tx) error) error { return s.tx(ctx, f) }, func(tx pgx.Tx) (domain.AuditEntry, error) {
		return appendAudit(ctx, tx, at, r)
	})
}

// ListAudit implements store.Store. Limit <= 0 means no limit.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]domain.AuditEntry, error) {
	rows, err := s.q.ListAudit(ctx, dbsqlc.ListAuditParams{AfterSeq: p.AfterSeq, AgentID: p.AgentID, Lim: limitArg(p.Limit)})
	return storeutil.All(rows, mapErr("list audit", err), auditFrom)
}

// VerifyAudit implements store.Store (design: Audit chain; verify): it streams the
// whole chain, in one statement snapshot, through domain.AuditVerifier.
func (s *Store) VerifyAudit(ctx context.Context, p store.VerifyAuditParams) (domain.AuditVerifyResult, error) {
	res, err := storeutil.VerifyQuery(func() (pgx.Rows, error) { return s.pool.Query(ctx, storeutil.AuditChainSQL) }, pgx.Rows.Close,
		scanAudit, p.Scoped, p.AgentIDs)
	return res, mapErr("verify audit", err)
}
