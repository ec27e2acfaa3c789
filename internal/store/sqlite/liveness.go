package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The liveness part of the store port (DESIGN.md §5.2): store.LivenessStore.
// Every write runs on the one write connection in a BEGIN IMMEDIATE
// transaction, which is exclusive: that is the SQLite equivalent of the row
// lock PostgreSQL takes with SELECT … FOR UPDATE.

var _ store.LivenessStore = (*Store)(nil)

// ListLiveAgents implements store.LivenessStore (D-M2-20-6).
func (s *Store) ListLiveAgents(ctx context.Context, p store.ListLiveAgentsParams) ([]domain.Agent, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+agentCols+` FROM agents
		WHERE state IN ('online', 'degraded') AND id > ? ORDER BY id LIMIT ?`, p.AfterID, limit)
	if err != nil {
		return nil, mapErr("list live agents", err)
	}
	defer rows.Close()
	out := []domain.Agent{}
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, mapErr("list live agents", err)
		}
		out = append(out, a)
	}
	return out, mapErr("list live agents", rows.Err())
}

// PersistHeartbeats implements store.LivenessStore: one transaction,
// ascending agent id, monotone last_heartbeat_at (D-M2-20-5).
func (s *Store) PersistHeartbeats(ctx context.Context, p store.PersistHeartbeatsParams) (int, error) {
	if len(p.Rows) == 0 {
		return 0, nil
	}
	rows := lvSorted(p.Rows)
	written := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		written = 0
		withReport, err := tx.PrepareContext(ctx, `UPDATE agents SET state = ?2, last_heartbeat_at = ?3,
				reported_runtime_version = ?4, reported_state = ?5
			WHERE id = ?1 AND (last_heartbeat_at IS NULL OR last_heartbeat_at <= ?3)`)
		if err != nil {
			return mapErr("persist heartbeats", err)
		}
		defer withReport.Close()
		stateOnly, err := tx.PrepareContext(ctx, `UPDATE agents SET state = ?2, last_heartbeat_at = ?3
			WHERE id = ?1 AND (last_heartbeat_at IS NULL OR last_heartbeat_at <= ?3)`)
		if err != nil {
			return mapErr("persist heartbeats", err)
		}
		defer stateOnly.Close()
		for _, r := range rows {
			var res sql.Result
			if r.HasReport {
				res, err = withReport.ExecContext(ctx, r.AgentID, r.State, micros(r.LastHeartbeatAt), r.RuntimeVersion, lvText(r.ReportedState))
			} else {
				res, err = stateOnly.ExecContext(ctx, r.AgentID, r.State, micros(r.LastHeartbeatAt))
			}
			if err != nil {
				return mapErr("persist heartbeats", err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return mapErr("persist heartbeats", err)
			}
			written += int(n)
		}
		return nil
	})
	return written, err
}

// lvSorted returns the rows ordered by agent id (a copy; the caller's
// slice is left alone).
func lvSorted(in []store.HeartbeatRow) []store.HeartbeatRow {
	rows := slices.Clone(in)
	slices.SortStableFunc(rows, func(a, b store.HeartbeatRow) int { return strings.Compare(a.AgentID, b.AgentID) })
	return rows
}

// ApplyReportedChange implements store.LivenessStore (D-M2-20-3). The
// BEGIN IMMEDIATE transaction holds the database's write lock from its
// first statement, so the compare below cannot race another writer.
func (s *Store) ApplyReportedChange(ctx context.Context, p store.ApplyReportedChangeParams) (bool, error) {
	wrote := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		wrote = false
		var mode, class sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT reported_billing_mode, reported_tool_class FROM agents WHERE id = ?`, p.AgentID).
			Scan(&mode, &class)
		if err != nil {
			return mapErr("apply reported change", err)
		}
		old := store.ReportedPair{BillingMode: lvStr(mode), ToolClass: lvStr(class)}
		if lvSame(old.BillingMode, p.BillingMode) && lvSame(old.ToolClass, p.ToolClass) {
			return nil
		}
		hb := micros(p.HeartbeatAt)
		_, err = tx.ExecContext(ctx, `UPDATE agents SET
				reported_billing_mode = ?2, reported_tool_class = ?3,
				reported_runtime_version = ?4, reported_state = ?5, state = ?6,
				last_heartbeat_at = max(coalesce(last_heartbeat_at, ?7), ?7)
			WHERE id = ?1`,
			p.AgentID, p.BillingMode, p.ToolClass, p.RuntimeVersion, lvText(p.ReportedState), p.State, hb)
		if err != nil {
			return mapErr("apply reported change", err)
		}
		if _, err := s.appendAudit(ctx, tx, p.HeartbeatAt, p.Audit(old)); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	return wrote, err
}

// ApplyReportedChanges implements store.LivenessStore: one BEGIN IMMEDIATE
// transaction (one commit for the whole batch), each element compared,
// written and audited in the order given.
func (s *Store) ApplyReportedChanges(ctx context.Context, ps []store.ApplyReportedChangeParams) ([]bool, error) {
	wrote := make([]bool, len(ps))
	if len(ps) == 0 {
		return wrote, nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		clear(wrote)
		for i, p := range ps {
			var mode, class sql.NullString
			err := tx.QueryRowContext(ctx, `SELECT reported_billing_mode, reported_tool_class FROM agents WHERE id = ?`, p.AgentID).
				Scan(&mode, &class)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return mapErr("apply reported changes", err)
			}
			old := store.ReportedPair{BillingMode: lvStr(mode), ToolClass: lvStr(class)}
			if lvSame(old.BillingMode, p.BillingMode) && lvSame(old.ToolClass, p.ToolClass) {
				continue
			}
			hb := micros(p.HeartbeatAt)
			_, err = tx.ExecContext(ctx, `UPDATE agents SET
					reported_billing_mode = ?2, reported_tool_class = ?3,
					reported_runtime_version = ?4, reported_state = ?5, state = ?6,
					last_heartbeat_at = max(coalesce(last_heartbeat_at, ?7), ?7)
				WHERE id = ?1`,
				p.AgentID, p.BillingMode, p.ToolClass, p.RuntimeVersion, lvText(p.ReportedState), p.State, hb)
			if err != nil {
				return mapErr("apply reported changes", err)
			}
			if _, err := s.appendAudit(ctx, tx, p.HeartbeatAt, p.Audit(old)); err != nil {
				return err
			}
			wrote[i] = true
		}
		return nil
	})
	if err != nil {
		return make([]bool, len(ps)), err
	}
	return wrote, nil
}

// DBNow implements store.LivenessStore. SQLite runs inside this process:
// the database's clock is the operating system's (SQLite's 'now' reads it
// too), whatever clock the service was given.
func (s *Store) DBNow(context.Context) (time.Time, error) { return time.Now().UTC(), nil }

// ApplyProjectReadiness implements store.LivenessStore (D-M2-20-10).
func (s *Store) ApplyProjectReadiness(ctx context.Context, p store.ApplyProjectReadinessParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE agents SET project_readiness = ?2, updated_at = ?3 WHERE id = ?1`,
			p.AgentID, lvText(p.Readiness), micros(p.Now))
		if err != nil {
			return mapErr("apply project readiness", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return mapErr("apply project readiness", err)
		}
		if n == 0 {
			return mapErr("apply project readiness", sql.ErrNoRows)
		}
		return nil
	})
}

func lvText(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func lvStr(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}

func lvSame(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
