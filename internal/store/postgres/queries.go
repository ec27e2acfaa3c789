package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// The hand-written SQL of persons, todos and audit. Every time sent is
// first truncated to the microsecond (PostgreSQL would round), and every
// time read is returned in UTC.

var micro = storeutil.Micro

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// limitArg maps Limit <= 0 to NULL, which LIMIT reads as "no limit".
func limitArg(n int) *int64 {
	if n <= 0 {
		return nil
	}
	v := int64(n)
	return &v
}

func nullJSON(b json.RawMessage) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// deref reads a nullable text column whose NULL means "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// rawBytes reads a nullable text column kept byte for byte; NULL → nil.
func rawBytes(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

func rawJSON(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// ---- persons ----------------------------------------------------------------

// BootstrapAdmin implements store.Store (DESIGN.md §2, first start). An
// advisory lock makes concurrent first starts create one person.
func (s *Store) BootstrapAdmin(ctx context.Context, p store.BootstrapAdminParams) (bool, error) {
	created := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockBootstrap); err != nil {
			return mapErr("bootstrap admin", err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM persons)`).Scan(&exists); err != nil {
			return mapErr("bootstrap admin", err)
		}
		if exists {
			return nil
		}
		at := micro(p.Person.CreatedAt)
		_, err := tx.Exec(ctx, `INSERT INTO persons (id, name, admin, created_at, updated_at)
			VALUES ($1, $2, true, $3, $3)`, p.Person.ID, p.Person.Name, at)
		if err != nil {
			return mapErr("bootstrap admin", err)
		}
		tokenID := p.TokenID
		if tokenID == "" {
			tokenID = "bootstrap-" + p.Person.ID
		}
		_, err = tx.Exec(ctx, `INSERT INTO person_tokens (id, person_id, name, hash, created_at)
			VALUES ($1, $2, 'bootstrap', $3, $4)`, tokenID, p.Person.ID, p.TokenHash, at)
		if err != nil {
			return mapErr("bootstrap admin token", err)
		}
		created = true
		return nil
	})
	return created, err
}

// ---- todos ------------------------------------------------------------------

const todoCols = `id, agent_id, queue, title, payload, kind, source, idempotency_key,
	push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
	ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
	finished_at, next_ring_at`

// live is the predicate of todos_live_key, repeated verbatim so ON CONFLICT
// can infer that index.
const live = `idempotency_key <> '' AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL))`

// claimable is the condition of a todo claim and claim_next may take at $3:
// pending, or failed with a retry due. Its first term is the todos_ready
// index predicate, verbatim, so the planner uses that index.
const claimable = `((state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL))
	AND (state = 'pending' OR retry_at <= $3))`

func scanTodo(row pgx.Row) (domain.Todo, error) {
	var t domain.Todo
	var payload, result *string
	err := row.Scan(&t.ID, &t.AgentID, &t.Queue, &t.Title, &payload, &t.Kind, &t.Source,
		&t.IdempotencyKey, &t.PushEligible, &t.CreatedBy, &t.State, &t.Attempt, &t.MaxAttempts,
		&t.LeaseExpiresAt, &t.RetryAt, &t.RingAttempts, &t.LastRingedAt, &result, &t.LastError,
		&t.CreatedAt, &t.UpdatedAt, &t.ClaimedAt, &t.FinishedAt, &t.NextRingAt)
	if err != nil {
		return domain.Todo{}, err
	}
	t.Payload, t.Result = rawJSON(payload), rawJSON(result)
	t.LeaseExpiresAt, t.RetryAt, t.LastRingedAt = utcPtr(t.LeaseExpiresAt), utcPtr(t.RetryAt), utcPtr(t.LastRingedAt)
	t.ClaimedAt, t.FinishedAt, t.NextRingAt = utcPtr(t.ClaimedAt), utcPtr(t.FinishedAt), utcPtr(t.NextRingAt)
	t.CreatedAt, t.UpdatedAt = t.CreatedAt.UTC(), t.UpdatedAt.UTC()
	return t, nil
}

func collectTodos(rows pgx.Rows) ([]domain.Todo, error) {
	defer rows.Close()
	out := []domain.Todo{}
	for rows.Next() {
		t, err := scanTodo(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// CreateTodo implements store.Store (DESIGN.md §1, idempotency key dedup
// among live todos). Concurrent creates with one key insert once: the
// loser's ON CONFLICT waits for the winner and then reads its row.
// next_ring_at = storeutil.NextRingAt(todo): creation + 5 min for a todo not
// rung yet (DESIGN.md §3.8).
func (s *Store) CreateTodo(ctx context.Context, p store.CreateTodoParams) (domain.Todo, bool, error) {
	if p.Audit == nil {
		return createTodoQ(ctx, s.pool, p.Todo)
	}
	var out domain.Todo
	var created bool
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		out, created, err = createTodoQ(ctx, tx, p.Todo)
		if err == nil && created {
			_, err = appendAudit(ctx, tx, p.Todo.CreatedAt, *p.Audit)
		}
		return err
	})
	if err != nil {
		return domain.Todo{}, false, err
	}
	return out, created, nil
}

// createTodoQ is CreateTodo on a pool or inside a transaction.
func createTodoQ(ctx context.Context, q querier, t domain.Todo) (domain.Todo, bool, error) {
	for range 3 {
		got, err := scanTodo(q.QueryRow(ctx, `INSERT INTO todos (`+todoCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
			        $18, $19, $20, $21, $22, $23, $24)
			ON CONFLICT (agent_id, idempotency_key) WHERE `+live+` DO NOTHING
			RETURNING `+todoCols,
			t.ID, t.AgentID, t.Queue, t.Title, nullJSON(t.Payload), t.Kind, t.Source,
			t.IdempotencyKey, t.PushEligible, t.CreatedBy, t.State, t.Attempt, t.MaxAttempts,
			storeutil.MicroPtr(t.LeaseExpiresAt), storeutil.MicroPtr(t.RetryAt), t.RingAttempts,
			storeutil.MicroPtr(t.LastRingedAt), nullJSON(t.Result), t.LastError, micro(t.CreatedAt),
			micro(t.UpdatedAt), storeutil.MicroPtr(t.ClaimedAt), storeutil.MicroPtr(t.FinishedAt),
			storeutil.NextRingAt(t)))
		if err == nil {
			return got, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return domain.Todo{}, false, mapErr("create todo", err)
		}
		// A live todo holds the key: return it.
		got, err = scanTodo(q.QueryRow(ctx, `SELECT `+todoCols+` FROM todos
			WHERE agent_id = $1 AND idempotency_key = $2 AND `+live, t.AgentID, t.IdempotencyKey))
		if err == nil {
			return got, false, nil
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
	t, err := scanTodo(s.pool.QueryRow(ctx, `SELECT `+todoCols+` FROM todos WHERE id = $1`, id))
	if err != nil {
		return domain.Todo{}, mapErr("get todo", err)
	}
	return t, nil
}

// ListTodos implements store.Store: oldest first (created_at, then id);
// Limit <= 0 means no limit.
func (s *Store) ListTodos(ctx context.Context, p store.ListTodosParams) ([]domain.Todo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+todoCols+` FROM todos
		WHERE ($1 = '' OR agent_id = $1)
		  AND (cardinality($2::text[]) = 0 OR queue = ANY ($2))
		  AND ($3 = '' OR state = $3)
		  AND ($5 = '' OR created_at > (SELECT created_at FROM todos WHERE id = $5)
		       OR (created_at = (SELECT created_at FROM todos WHERE id = $5) AND id > $5))
		ORDER BY created_at, id LIMIT $4`,
		p.AgentID, storeutil.Strings(p.Queues), p.State, limitArg(p.Limit), p.AfterID)
	if err != nil {
		return nil, mapErr("list todos", err)
	}
	out, err := collectTodos(rows)
	return out, mapErr("list todos", err)
}

// claimSet is the SET clause of a claim; $3 = now, $4 = lease expiry.
const claimSet = `SET state = 'claimed', attempt = attempt + 1, lease_expires_at = $4,
	retry_at = NULL, claimed_at = $3, updated_at = $3`

// ClaimTodo implements store.Store (DESIGN.md §2, claim): one conditional
// UPDATE, so of two racing claims the second re-checks the row after the
// first commits and matches nothing. ErrNotFound when the todo is not the
// agent's or not in Queues, ErrConflict when it is not claimable at Now.
func (s *Store) ClaimTodo(ctx context.Context, p store.ClaimTodoParams) (domain.Todo, error) {
	queues := storeutil.Strings(p.Queues)
	t, err := scanTodo(s.pool.QueryRow(ctx, `UPDATE todos `+claimSet+`
		WHERE id = $1 AND agent_id = $5 AND queue = ANY ($2) AND `+claimable+`
		RETURNING `+todoCols,
		p.TodoID, queues, micro(p.Now), micro(p.Now.Add(storeutil.Lease(p.Lease))), p.AgentID))
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Todo{}, todoGate(ctx, s.pool, "claim todo", p.TodoID, p.AgentID, queues)
	}
	if err != nil {
		return domain.Todo{}, mapErr("claim todo", err)
	}
	return t, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// todoGate explains a conditional update that matched nothing: ErrNotFound
// when the todo is not the agent's (or, with queues non-nil, not in one of
// them), else ErrConflict.
func todoGate(ctx context.Context, q querier, what, id, agentID string, queues []string) error {
	var exists bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM todos
		WHERE id = $1 AND agent_id = $2 AND ($3::text[] IS NULL OR queue = ANY ($3)))`,
		id, agentID, queues).Scan(&exists)
	if err != nil {
		return mapErr(what, err)
	}
	if !exists {
		return fmt.Errorf("%s: todo %s: %w", what, id, domain.ErrNotFound)
	}
	return fmt.Errorf("%s: todo %s is not in a state that allows it: %w", what, id, domain.ErrConflict)
}

// ClaimNext implements store.Store (DESIGN.md §2, claim_next): the oldest
// claimable todo (created_at, then id) of the agent in Queues, picked with
// FOR UPDATE SKIP LOCKED so concurrent claimers take different rows.
func (s *Store) ClaimNext(ctx context.Context, p store.ClaimNextParams) (domain.Todo, error) {
	t, err := scanTodo(s.pool.QueryRow(ctx, `UPDATE todos `+claimSet+`
		WHERE id = (SELECT id FROM todos
			WHERE agent_id = $1 AND queue = ANY ($2) AND `+claimable+`
			ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING `+todoCols,
		p.AgentID, storeutil.Strings(p.Queues), micro(p.Now), micro(p.Now.Add(storeutil.Lease(p.Lease)))))
	if err != nil {
		return domain.Todo{}, mapErr("claim next", err)
	}
	return t, nil
}

// held is the condition of a todo the agent $2 holds at $3: claimed, lease
// not expired.
const held = `agent_id = $2 AND state = 'claimed' AND lease_expires_at > $3`

// RenewLease implements store.Store (DESIGN.md §2, renew).
func (s *Store) RenewLease(ctx context.Context, p store.RenewLeaseParams) (domain.Todo, error) {
	t, err := scanTodo(s.pool.QueryRow(ctx, `UPDATE todos SET lease_expires_at = $4, updated_at = $3
		WHERE id = $1 AND `+held+` RETURNING `+todoCols,
		p.TodoID, p.AgentID, micro(p.Now), micro(p.Now.Add(storeutil.Lease(p.Lease)))))
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Todo{}, todoGate(ctx, s.pool, "renew lease", p.TodoID, p.AgentID, nil)
	}
	if err != nil {
		return domain.Todo{}, mapErr("renew lease", err)
	}
	return t, nil
}

// CompleteTodo implements store.Store (DESIGN.md §2, complete).
func (s *Store) CompleteTodo(ctx context.Context, p store.CompleteTodoParams) (domain.Todo, error) {
	t, err := scanTodo(s.pool.QueryRow(ctx, `UPDATE todos
		SET state = 'done', result = $4, lease_expires_at = NULL, updated_at = $3, finished_at = $3
		WHERE id = $1 AND `+held+` RETURNING `+todoCols,
		p.TodoID, p.AgentID, micro(p.Now), nullJSON(p.Result)))
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Todo{}, todoGate(ctx, s.pool, "complete todo", p.TodoID, p.AgentID, nil)
	}
	if err != nil {
		return domain.Todo{}, mapErr("complete todo", err)
	}
	return t, nil
}

// FailTodo implements store.Store (DESIGN.md §1, retries and dead letter).
// A dead-lettered todo also gets finished_at = Now.
func (s *Store) FailTodo(ctx context.Context, p store.FailTodoParams) (domain.Todo, error) {
	var t domain.Todo
	err := s.tx(ctx, func(tx pgx.Tx) error {
		now := micro(p.Now)
		var attempt, maxAttempts int
		err := tx.QueryRow(ctx, `SELECT attempt, max_attempts FROM todos
			WHERE id = $1 AND `+held+` FOR UPDATE`, p.TodoID, p.AgentID, now).Scan(&attempt, &maxAttempts)
		if errors.Is(err, pgx.ErrNoRows) {
			return todoGate(ctx, tx, "fail todo", p.TodoID, p.AgentID, nil)
		}
		if err != nil {
			return mapErr("fail todo", err)
		}
		retry := storeutil.MicroPtr(domain.NextAfterFailure(attempt, maxAttempts, now))
		var finished *time.Time
		if retry == nil {
			finished = &now
		}
		t, err = scanTodo(tx.QueryRow(ctx, `UPDATE todos
			SET state = 'failed', last_error = $2, retry_at = $3, lease_expires_at = NULL,
			    updated_at = $4, finished_at = $5
			WHERE id = $1 RETURNING `+todoCols,
			p.TodoID, p.Reason, retry, now, finished))
		return mapErr("fail todo", err)
	})
	return t, err
}

// ReapExpiredLeases implements store.Store (DESIGN.md §1, leases): expired
// claims go back to pending (last_error "lease expired") or, at
// max_attempts, to dead letter with finished_at = Now. The oldest leases go
// first; rows locked by another reaper are skipped; Limit <= 0 means no
// limit. The ids come back in no particular order. The ring columns
// (ring_attempts, last_ringed_at, next_ring_at) are left as they are.
func (s *Store) ReapExpiredLeases(ctx context.Context, p store.ReapParams) ([]string, error) {
	// The picks are a MATERIALIZED CTE, evaluated once (an IN subquery with
	// LIMIT and SKIP LOCKED may be rescanned and take rows past the limit).
	rows, err := s.pool.Query(ctx, `WITH pick AS MATERIALIZED (
			SELECT id AS pick_id FROM todos WHERE state = 'claimed' AND lease_expires_at <= $1
			ORDER BY lease_expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
		UPDATE todos SET
			state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END,
			finished_at = CASE WHEN attempt < max_attempts THEN NULL ELSE $1 END,
			lease_expires_at = NULL, retry_at = NULL, last_error = 'lease expired',
			updated_at = $1
		FROM pick
		WHERE todos.id = pick.pick_id AND todos.state = 'claimed'
		RETURNING id`, micro(p.Now), limitArg(p.Limit))
	if err != nil {
		return nil, mapErr("reap leases", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr("reap leases", err)
	}
	return storeutil.Strings(ids), nil
}

// MarkRung implements store.Store (DESIGN.md §3.8): it changes only a
// pending todo; false when the todo is missing or not pending. It also sets
// next_ring_at = domain.NextRingAt(ring_attempts+1, At), NULL once the
// budget is spent.
func (s *Store) MarkRung(ctx context.Context, p store.MarkRungParams) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE todos
		SET ring_attempts = ring_attempts + 1, last_ringed_at = $2,
		    next_ring_at = $2::timestamptz + `+ringDelayAfterRing+`
		WHERE id = $1 AND state = 'pending'`, p.TodoID, micro(p.At))
	if err != nil {
		return false, mapErr("mark rung", err)
	}
	return tag.RowsAffected() > 0, nil
}

// ---- audit ------------------------------------------------------------------

const auditCols = `seq, at, actor, action, agent_id, decision, data, prev_hash, hash`

func scanAudit(row pgx.Row) (domain.AuditEntry, error) {
	var e domain.AuditEntry
	var data *string
	if err := row.Scan(&e.Seq, &e.At, &e.Actor, &e.Action, &e.AgentID, &e.Decision, &data,
		&e.PrevHash, &e.Hash); err != nil {
		return domain.AuditEntry{}, err
	}
	e.At = e.At.UTC()
	e.Data = rawJSON(data)
	return e, nil
}

// appendAudit extends the chain inside tx. The advisory lock, held until tx
// ends, serialises appends across connections and instances, so two appends
// never read the same tail.
func appendAudit(ctx context.Context, tx pgx.Tx, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockAudit); err != nil {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	var seq int64
	var prev string
	err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&seq, &prev)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	e, err := storeutil.AuditEntry(seq+1, prev, at, r)
	if err != nil {
		return domain.AuditEntry{}, err
	}
	_, err = tx.Exec(ctx, `INSERT INTO audit (`+auditCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		e.Seq, e.At, e.Actor, e.Action, e.AgentID, e.Decision, nullJSON(e.Data), e.PrevHash, e.Hash)
	if err != nil {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	return e, nil
}

// AppendAudit implements store.Store (DESIGN.md §1, audit log).
func (s *Store) AppendAudit(ctx context.Context, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	var e domain.AuditEntry
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		e, err = appendAudit(ctx, tx, at, r)
		return err
	})
	return e, err
}

// ListAudit implements store.Store. Limit <= 0 means no limit.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]domain.AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+auditCols+` FROM audit
		WHERE seq > $1 AND ($2 = '' OR agent_id = $2) ORDER BY seq LIMIT $3`,
		p.AfterSeq, p.AgentID, limitArg(p.Limit))
	if err != nil {
		return nil, mapErr("list audit", err)
	}
	defer rows.Close()
	out := []domain.AuditEntry{}
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return nil, mapErr("list audit", err)
		}
		out = append(out, e)
	}
	return out, mapErr("list audit", rows.Err())
}

// VerifyAudit implements store.Store (DESIGN.md §1, verify): it streams the
// whole chain, in one statement snapshot, through domain.AuditVerifier.
func (s *Store) VerifyAudit(ctx context.Context, p store.VerifyAuditParams) (domain.AuditVerifyResult, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+auditCols+` FROM audit ORDER BY seq`)
	if err != nil {
		return domain.AuditVerifyResult{}, mapErr("verify audit", err)
	}
	defer rows.Close()
	v := domain.NewAuditVerifier(p.Scoped, p.AgentIDs)
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return domain.AuditVerifyResult{}, mapErr("verify audit", err)
		}
		v.Add(e)
	}
	if err := rows.Err(); err != nil {
		return domain.AuditVerifyResult{}, mapErr("verify audit", err)
	}
	return v.Result(), nil
}
