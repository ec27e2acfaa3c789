package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// The audit chain (design: Audit chain) over the generated queries
// (sql/queries.sql).

func auditFrom(r dbsqlc.Audit) domain.AuditEntry {
	return domain.AuditEntry{Seq: r.Seq, At: r.At.UTC(), Actor: r.Actor, Action: r.Action,
		AgentID: r.AgentID, Decision: r.Decision, Data: rawJSON(r.Data), PrevHash: r.PrevHash, Hash: r.Hash}
}

// appendAudit extends the chain inside tx. The advisory lock, held until tx
// ends, serialises appends across connections and instances, so two appends
// never read the same tail.
func appendAudit(ctx context.Context, tx pgx.Tx, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockAudit); err != nil {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	q := dbsqlc.New(tx)
	tail, err := q.AuditTail(ctx)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	e, err := storeutil.AuditEntry(tail.Seq+1, tail.Hash, at, r)
	if err != nil {
		return domain.AuditEntry{}, err
	}
	err = q.InsertAudit(ctx, dbsqlc.InsertAuditParams{Seq: e.Seq, At: e.At, Actor: e.Actor, Action: e.Action,
		AgentID: e.AgentID, Decision: e.Decision, Data: nullJSON(e.Data), PrevHash: e.PrevHash, Hash: e.Hash})
	if err != nil {
		return domain.AuditEntry{}, mapErr("append audit", err)
	}
	return e, nil
}

// AppendAudit implements store.Store (design: Audit chain).
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
	rows, err := s.q.ListAudit(ctx, dbsqlc.ListAuditParams{AfterSeq: p.AfterSeq, AgentID: p.AgentID, Lim: limitArg(p.Limit)})
	return storeutil.All(rows, mapErr("list audit", err), auditFrom)
}

// VerifyAudit implements store.Store (design: Audit chain; verify): it streams the
// whole chain, in one statement snapshot, through domain.AuditVerifier.
func (s *Store) VerifyAudit(ctx context.Context, p store.VerifyAuditParams) (domain.AuditVerifyResult, error) {
	// Hand-written: it streams the chain; a generated :many would hold it all.
	rows, err := s.pool.Query(ctx, `SELECT seq, at, actor, action, agent_id, decision, data, prev_hash, hash
		FROM audit ORDER BY seq`)
	if err != nil {
		return domain.AuditVerifyResult{}, mapErr("verify audit", err)
	}
	defer rows.Close()
	v := domain.NewAuditVerifier(p.Scoped, p.AgentIDs)
	for rows.Next() {
		var r dbsqlc.Audit
		if err := rows.Scan(&r.Seq, &r.At, &r.Actor, &r.Action, &r.AgentID, &r.Decision, &r.Data,
			&r.PrevHash, &r.Hash); err != nil {
			return domain.AuditVerifyResult{}, mapErr("verify audit", err)
		}
		v.Add(auditFrom(r))
	}
	if err := rows.Err(); err != nil {
		return domain.AuditVerifyResult{}, mapErr("verify audit", err)
	}
	return v.Result(), nil
}
