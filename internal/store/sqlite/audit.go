package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// The audit chain (design: Audit chain) over the generated queries
// (sql/queries.sql).

func auditFrom(r dbsqlc.Audit) domain.AuditEntry {
	return domain.AuditEntry{Seq: r.Seq, At: fromMicros(r.At), Actor: r.Actor, Action: r.Action,
		AgentID: r.AgentID, Decision: r.Decision, Data: rawJSON(r.Data), PrevHash: r.PrevHash, Hash: r.Hash}
}

// scanAudit scans a row of every audit column in table order.
func scanAudit(sc scanner) (domain.AuditEntry, error) {
	var r dbsqlc.Audit
	err := sc.Scan(&r.Seq, &r.At, &r.Actor, &r.Action, &r.AgentID, &r.Decision, &r.Data, &r.PrevHash, &r.Hash)
	return auditFrom(r), err
}

// appendAudit extends the chain inside tx. The single write connection and
// BEGIN IMMEDIATE serialise appends, so reading the tail here cannot fork.
func (s *Store) appendAudit(ctx context.Context, tx *sql.Tx, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	q := s.txq(tx)
	tail := func() (int64, string, error) { t, err := q.AuditTail(ctx); return t.Seq, t.Hash, err }
	return storeutil.AppendAudit(at, r, sql.ErrNoRows, mapErr, tail, func(e domain.AuditEntry) error {
		return q.InsertAudit(ctx, dbsqlc.InsertAuditParams{Seq: e.Seq, At: micros(e.At), Actor: e.Actor,
			Action: e.Action, AgentID: e.AgentID, Decision: e.Decision, Data: nullJSON(e.Data),
			PrevHash: e.PrevHash, Hash: e.Hash})
	})
}

// writeAudited runs fn in one write transaction (s.write) and, when fn
// succeeds, appends rec at at in the same transaction: the shape of every
// audited change (store conventions: the audit record commits with the
// change).
func (s *Store) writeAudited(ctx context.Context, at time.Time, rec domain.AuditRecord, fn func(tx *sql.Tx) error) error {
	return s.write(ctx, storeutil.Audited(fn, func(tx *sql.Tx) error {
		_, err := s.appendAudit(ctx, tx, at, rec)
		return err
	}))
}

// AppendAudit implements store.Store (design: Audit chain).
func (s *Store) AppendAudit(ctx context.Context, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	return storeutil.InTx(func(f func(*sql.Tx) error) error { return s.write(ctx, f) }, func(tx *sql.Tx) (domain.AuditEntry, error) {
		return s.appendAudit(ctx, tx, at, r)
	})
}

// ListAudit implements store.Store. Limit <= 0 means no limit.
func (s *Store) ListAudit(ctx context.Context, p store.ListAuditParams) ([]domain.AuditEntry, error) {
	rows, err := s.rq.ListAudit(ctx, dbsqlc.ListAuditParams{AfterSeq: p.AfterSeq, AgentID: p.AgentID, Lim: limit(p.Limit)})
	return storeutil.All(rows, mapErr("list audit", err), auditFrom)
}

// VerifyAudit implements store.Store (design: Audit chain; verify): it streams the
// whole chain, in one read snapshot, through domain.AuditVerifier.
func (s *Store) VerifyAudit(ctx context.Context, p store.VerifyAuditParams) (domain.AuditVerifyResult, error) {
	res, err := storeutil.VerifyQuery(func() (*sql.Rows, error) { return s.r.QueryContext(ctx, storeutil.AuditChainSQL) },
		func(rows *sql.Rows) { rows.Close() }, scanAudit, p.Scoped, p.AgentIDs)
	return res, mapErr("verify audit", err)
}
