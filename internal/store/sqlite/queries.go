package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// The hand-written SQL of persons, todos and audit. Writes run in write();
// reads outside a transaction use the read-only pool s.r.

// ---- persons ----------------------------------------------------------------

// BootstrapAdmin implements store.Store (DESIGN.md §2, first start).
func (s *Store) BootstrapAdmin(ctx context.Context, p store.BootstrapAdminParams) (bool, error) {
	created := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM persons`).Scan(&n); err != nil {
			return mapErr("bootstrap admin", err)
		}
		if n > 0 {
			return nil
		}
		at := micros(p.Person.CreatedAt)
		_, err := tx.ExecContext(ctx,
			`INSERT INTO persons (id, name, admin, created_at, updated_at) VALUES (?, ?, 1, ?, ?)`,
			p.Person.ID, p.Person.Name, at, at)
		if err != nil {
			return mapErr("bootstrap admin", err)
		}
		tokenID := p.TokenID
		if tokenID == "" {
			tokenID = "bootstrap-" + p.Person.ID
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO person_tokens (id, person_id, name, hash, created_at)
			VALUES (?, ?, 'bootstrap', ?, ?)`, tokenID, p.Person.ID, p.TokenHash, at)
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

// claimable is the SQL condition of a todo claim and claim_next may take at
// ?3 (now): pending, or failed with a retry due. Its first term is the
// todos_ready index predicate, verbatim, so the planner uses that index.
const claimable = `((state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL))
	AND (state = 'pending' OR retry_at <= ?3))`

// inQueues matches a queue against the JSON array bound as ?2.
const inQueues = `queue IN (SELECT value FROM json_each(?2))`

func scanTodo(sc scanner) (domain.Todo, error) {
	var t domain.Todo
	var payload, result sql.NullString
	var lease, retry, rung, claimed, finished, next sql.NullInt64
	var created, updated int64
	err := sc.Scan(&t.ID, &t.AgentID, &t.Queue, &t.Title, &payload, &t.Kind, &t.Source,
		&t.IdempotencyKey, &t.PushEligible, &t.CreatedBy, &t.State, &t.Attempt, &t.MaxAttempts,
		&lease, &retry, &t.RingAttempts, &rung, &result, &t.LastError, &created, &updated,
		&claimed, &finished, &next)
	if err != nil {
		return domain.Todo{}, err
	}
	if payload.Valid {
		t.Payload = json.RawMessage(payload.String)
	}
	if result.Valid {
		t.Result = json.RawMessage(result.String)
	}
	t.LeaseExpiresAt, t.RetryAt = fromNullMicros(lease), fromNullMicros(retry)
	t.LastRingedAt, t.NextRingAt = fromNullMicros(rung), fromNullMicros(next)
	t.ClaimedAt, t.FinishedAt = fromNullMicros(claimed), fromNullMicros(finished)
	t.CreatedAt, t.UpdatedAt = fromMicros(created), fromMicros(updated)
	return t, nil
}

func nullJSON(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// CreateTodo implements store.Store (DESIGN.md §1, idempotency key dedup
// among live todos). next_ring_at = storeutil.NextRingAt(todo): creation +
// 5 min for a todo not rung yet (DESIGN.md §3.8).
func (s *Store) CreateTodo(ctx context.Context, p store.CreateTodoParams) (domain.Todo, bool, error) {
	var out domain.Todo
	created := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		out, created, err = s.createTodoTx(ctx, tx, p.Todo)
		if err == nil && created && p.Audit != nil {
			_, err = appendAudit(ctx, tx, p.Todo.CreatedAt, *p.Audit)
		}
		return err
	})
	if err != nil {
		return domain.Todo{}, false, err
	}
	return out, created, nil
}

// createTodoTx is CreateTodo inside tx: the live todo with the key, or a
// new row.
func (s *Store) createTodoTx(ctx context.Context, tx *sql.Tx, t domain.Todo) (domain.Todo, bool, error) {
	if t.IdempotencyKey != "" {
		existing, err := scanTodo(s.txRow(ctx, tx, `SELECT `+todoCols+` FROM todos
			WHERE agent_id = ? AND idempotency_key = ?
			  AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL))`,
			t.AgentID, t.IdempotencyKey))
		if err == nil {
			return existing, false, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return domain.Todo{}, false, mapErr("create todo", err)
		}
	}
	out, err := scanTodo(s.txRow(ctx, tx, `INSERT INTO todos (`+todoCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		RETURNING `+todoCols,
		t.ID, t.AgentID, t.Queue, t.Title, nullJSON(t.Payload), t.Kind, t.Source,
		t.IdempotencyKey, t.PushEligible, t.CreatedBy, t.State, t.Attempt, t.MaxAttempts,
		microsPtr(t.LeaseExpiresAt), microsPtr(t.RetryAt), t.RingAttempts,
		microsPtr(t.LastRingedAt), nullJSON(t.Result), t.LastError, micros(t.CreatedAt),
		micros(t.UpdatedAt), microsPtr(t.ClaimedAt), microsPtr(t.FinishedAt),
		microsPtr(storeutil.NextRingAt(t))))
	if err != nil {
		return domain.Todo{}, false, mapErr("create todo", err)
	}
	return out, true, nil
}

// GetTodo implements store.Store.
func (s *Store) GetTodo(ctx context.Context, id string) (domain.Todo, error) {
	t, err := scanTodo(s.readRow(ctx, `SELECT `+todoCols+` FROM todos WHERE id = ?`, id))
	if err != nil {
		return domain.Todo{}, mapErr("get todo", err)
	}
	return t, nil
}

// ListTodos implements store.Store: oldest first (created_at, then id);
// Limit <= 0 means no limit.
func (s *Store) ListTodos(ctx context.Context, p store.ListTodosParams) ([]domain.Todo, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+todoCols+` FROM todos
		WHERE (?1 = '' OR agent_id = ?1)
		  AND (json_array_length(?2) = 0 OR `+inQueues+`)
		  AND (?3 = '' OR state = ?3)
		  AND (?5 = '' OR created_at > (SELECT created_at FROM todos WHERE id = ?5)
		       OR (created_at = (SELECT created_at FROM todos WHERE id = ?5) AND id > ?5))
		ORDER BY created_at, id LIMIT ?4`,
		p.AgentID, encodeList(p.Queues), p.State, limit, p.AfterID)
	if err != nil {
		return nil, mapErr("list todos", err)
	}
	defer rows.Close()
	out := []domain.Todo{}
	for rows.Next() {
		t, err := scanTodo(rows)
		if err != nil {
			return nil, mapErr("list todos", err)
		}
		out = append(out, t)
	}
	return out, mapErr("list todos", rows.Err())
}

// claimSet is the SET clause of a claim; ?3 = now, ?4 = lease expiry.
const claimSet = `SET state = 'claimed', attempt = attempt + 1, lease_expires_at = ?4,
	retry_at = NULL, claimed_at = ?3, updated_at = ?3`

// ClaimTodo implements store.Store (DESIGN.md §2, claim): ErrNotFound when
// the todo is not the agent's or not in Queues, ErrConflict when it is not
// claimable at Now.
func (s *Store) ClaimTodo(ctx context.Context, p store.ClaimTodoParams) (domain.Todo, error) {
	var t domain.Todo
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanTodo(s.txRow(ctx, tx, `UPDATE todos `+claimSet+`
			WHERE id = ?1 AND agent_id = ?5 AND `+inQueues+` AND `+claimable+`
			RETURNING `+todoCols,
			p.TodoID, encodeList(p.Queues), micros(p.Now),
			micros(p.Now.Add(storeutil.Lease(p.Lease))), p.AgentID))
		if errors.Is(err, sql.ErrNoRows) {
			return todoGate(ctx, tx, "claim todo", p.TodoID, p.AgentID, &p.Queues)
		}
		return mapErr("claim todo", err)
	})
	return t, err
}

// todoGate explains a conditional update that matched nothing: ErrNotFound
// when the todo is not the agent's (or not in queues, when non-nil), else
// ErrConflict.
func todoGate(ctx context.Context, tx *sql.Tx, what, id, agentID string, queues *[]string) error {
	q := `SELECT 1 FROM todos WHERE id = ?1 AND agent_id = ?3`
	args := []any{id, nil, agentID}
	if queues != nil {
		q += ` AND ` + inQueues
		args[1] = encodeList(*queues)
	}
	var one int
	err := tx.QueryRowContext(ctx, q, args...).Scan(&one)
	if err != nil {
		return mapErr(what, err)
	}
	return fmt.Errorf("%s: todo %s is not in a state that allows it: %w", what, id, domain.ErrConflict)
}

// ClaimNext implements store.Store (DESIGN.md §2, claim_next): the oldest
// claimable todo (created_at, then id) of the agent in Queues.
func (s *Store) ClaimNext(ctx context.Context, p store.ClaimNextParams) (domain.Todo, error) {
	var t domain.Todo
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanTodo(s.txRow(ctx, tx, `UPDATE todos `+claimSet+`
			WHERE id = (SELECT id FROM todos
				WHERE agent_id = ?1 AND `+inQueues+` AND `+claimable+`
				ORDER BY created_at, id LIMIT 1)
			RETURNING `+todoCols,
			p.AgentID, encodeList(p.Queues), micros(p.Now), micros(p.Now.Add(storeutil.Lease(p.Lease)))))
		return mapErr("claim next", err)
	})
	return t, err
}

// held is the condition of a todo the agent ?2 holds at ?3: claimed, lease
// not expired.
const held = `agent_id = ?2 AND state = 'claimed' AND lease_expires_at > ?3`

// RenewLease implements store.Store (DESIGN.md §2, renew).
func (s *Store) RenewLease(ctx context.Context, p store.RenewLeaseParams) (domain.Todo, error) {
	var t domain.Todo
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanTodo(s.txRow(ctx, tx, `UPDATE todos
			SET lease_expires_at = ?4, updated_at = ?3
			WHERE id = ?1 AND `+held+` RETURNING `+todoCols,
			p.TodoID, p.AgentID, micros(p.Now), micros(p.Now.Add(storeutil.Lease(p.Lease)))))
		if errors.Is(err, sql.ErrNoRows) {
			return todoGate(ctx, tx, "renew lease", p.TodoID, p.AgentID, nil)
		}
		return mapErr("renew lease", err)
	})
	return t, err
}

// CompleteTodo implements store.Store (DESIGN.md §2, complete).
func (s *Store) CompleteTodo(ctx context.Context, p store.CompleteTodoParams) (domain.Todo, error) {
	var t domain.Todo
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = scanTodo(s.txRow(ctx, tx, `UPDATE todos
			SET state = 'done', result = ?4, lease_expires_at = NULL, updated_at = ?3, finished_at = ?3
			WHERE id = ?1 AND `+held+` RETURNING `+todoCols,
			p.TodoID, p.AgentID, micros(p.Now), nullJSON(p.Result)))
		if errors.Is(err, sql.ErrNoRows) {
			return todoGate(ctx, tx, "complete todo", p.TodoID, p.AgentID, nil)
		}
		return mapErr("complete todo", err)
	})
	return t, err
}

// FailTodo implements store.Store (DESIGN.md §1, retries and dead letter).
// A dead-lettered todo also gets finished_at = Now.
func (s *Store) FailTodo(ctx context.Context, p store.FailTodoParams) (domain.Todo, error) {
	var t domain.Todo
	err := s.write(ctx, func(tx *sql.Tx) error {
		var attempt, maxAttempts int
		err := s.txRow(ctx, tx, `SELECT attempt, max_attempts FROM todos
			WHERE id = ?1 AND `+held, p.TodoID, p.AgentID, micros(p.Now)).Scan(&attempt, &maxAttempts)
		if errors.Is(err, sql.ErrNoRows) {
			return todoGate(ctx, tx, "fail todo", p.TodoID, p.AgentID, nil)
		}
		if err != nil {
			return mapErr("fail todo", err)
		}
		retry := domain.NextAfterFailure(attempt, maxAttempts, p.Now)
		var finished any
		if retry == nil {
			finished = micros(p.Now)
		}
		t, err = scanTodo(s.txRow(ctx, tx, `UPDATE todos
			SET state = 'failed', last_error = ?2, retry_at = ?3, lease_expires_at = NULL,
			    updated_at = ?4, finished_at = ?5
			WHERE id = ?1 RETURNING `+todoCols,
			p.TodoID, p.Reason, microsPtr(retry), micros(p.Now), finished))
		return mapErr("fail todo", err)
	})
	return t, err
}

// ReapExpiredLeases implements store.Store (DESIGN.md §1, leases): expired
// claims go back to pending (last_error "lease expired") or, at
// max_attempts, to dead letter with finished_at = Now. The oldest leases go
// first; Limit <= 0 means no limit. The ids come back in no particular order.
// The ring columns (ring_attempts, last_ringed_at, next_ring_at) are left as
// they are.
func (s *Store) ReapExpiredLeases(ctx context.Context, p store.ReapParams) ([]string, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	ids := []string{}
	err := s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `UPDATE todos SET
				state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END,
				finished_at = CASE WHEN attempt < max_attempts THEN NULL ELSE ?1 END,
				lease_expires_at = NULL, retry_at = NULL, last_error = 'lease expired',
				updated_at = ?1
			WHERE id IN (SELECT id FROM todos WHERE state = 'claimed' AND lease_expires_at <= ?1
				ORDER BY lease_expires_at, id LIMIT ?2)
			RETURNING id`, micros(p.Now), limit)
		if err != nil {
			return mapErr("reap leases", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return mapErr("reap leases", err)
			}
			ids = append(ids, id)
		}
		return mapErr("reap leases", rows.Err())
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// MarkRung implements store.Store (DESIGN.md §3.8): it changes only a
// pending todo; false when the todo is missing or not pending. It also sets
// next_ring_at = domain.NextRingAt(ring_attempts+1, At), NULL once the
// budget is spent.
func (s *Store) MarkRung(ctx context.Context, p store.MarkRungParams) (bool, error) {
	changed := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.txExec(ctx, tx, `UPDATE todos
			SET ring_attempts = ring_attempts + 1, last_ringed_at = ?2,
			    next_ring_at = ?2 + `+ringDelayAfterRing+`
			WHERE id = ?1 AND state = 'pending'`, p.TodoID, micros(p.At))
		if err != nil {
			return mapErr("mark rung", err)
		}
		n, err := res.RowsAffected()
		changed = n > 0
		return mapErr("mark rung", err)
	})
	return changed, err
}

// ---- audit ------------------------------------------------------------------

const auditCols = `seq, at, actor, action, agent_id, decision, data, prev_hash, hash`

func scanAudit(sc scanner) (domain.AuditEntry, error) {
	var e domain.AuditEntry
	var at int64
	var data sql.NullString
	if err := sc.Scan(&e.Seq, &at, &e.Actor, &e.Action, &e.AgentID, &e.Decision, &data,
		&e.PrevHash, &e.Hash); err != nil {
		return domain.AuditEntry{}, err
	}
	e.At = fromMicros(at)
	if data.Valid {
		e.Data = json.RawMessage(data.String)
	}
	return e, nil
}

// appendAudit extends the chain inside tx. The single write connection and
// BEGIN IMMEDIATE serialise appends, so reading the tail here cannot fork.
func appendAudit(ctx context.Context, tx *sql.Tx, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	var seq int64
	var prev string
	err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&seq, &prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	e, err := storeutil.AuditEntry(seq+1, prev, at, r)
	if err != nil {
		return domain.AuditEntry{}, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO audit (`+auditCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.Seq, micros(e.At), e.Actor, e.Action, e.AgentID, e.Decision, nullJSON(e.Data), e.PrevHash, e.Hash)
	if err != nil {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	return e, nil
}

// AppendAudit implements store.Store (DESIGN.md §1, audit log).
func (s *Store) AppendAudit(ctx context.Context, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	var e domain.AuditEntry
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		e, err = appendAudit(ctx, tx, at, r)
		return err
	})
	return e, err
}

// ListAudit implements store.Store. Limit <= 0 means no limit.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]domain.AuditEntry, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+auditCols+` FROM audit
		WHERE seq > ?1 AND (?2 = '' OR agent_id = ?2) ORDER BY seq LIMIT ?3`,
		p.AfterSeq, p.AgentID, limit)
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
// whole chain, in one read snapshot, through domain.AuditVerifier.
func (s *Store) VerifyAudit(ctx context.Context, p store.VerifyAuditParams) (domain.AuditVerifyResult, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+auditCols+` FROM audit ORDER BY seq`)
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
