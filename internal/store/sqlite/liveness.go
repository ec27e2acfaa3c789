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
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// The liveness part of the store port (design: Store contract): store.LivenessStore.
// Every write runs on the one write connection in a BEGIN IMMEDIATE
// transaction, which is exclusive: that is the SQLite equivalent of the row
// lock PostgreSQL takes with SELECT … FOR UPDATE.

var _ store.LivenessStore = (*Store)(nil)

// ListLiveAgents implements store.LivenessStore (design: Start rule).
func (s *Store) ListLiveAgents(ctx context.Context, p store.ListLiveAgentsParams) ([]domain.Agent, error) {
	rows, err := s.rq.ListLiveAgents(ctx, dbsqlc.ListLiveAgentsParams{AfterID: p.AfterID, Lim: limit(p.Limit)})
	out, err := storeutil.AllErr(rows, err, agentFrom)
	return out, mapErr("list live agents", err)
}

// PersistHeartbeats implements store.LivenessStore: one transaction,
// ascending agent id, monotone last_heartbeat_at (design: Flush loop).
func (s *Store) PersistHeartbeats(ctx context.Context, p store.PersistHeartbeatsParams) (int, error) {
	if len(p.Rows) == 0 {
		return 0, nil
	}
	rows := lvSorted(p.Rows)
	written := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		written = 0
		q := s.txq(tx)
		for _, r := range rows {
			var n int64
			var err error
			if r.HasReport {
				n, err = q.PersistHeartbeatReport(ctx, dbsqlc.PersistHeartbeatReportParams{ID: r.AgentID, State: r.State,
					HeartbeatAt: micros(r.LastHeartbeatAt), RuntimeVersion: toNullStr(r.RuntimeVersion),
					ReportedState: nullJSON(r.ReportedState)})
			} else {
				n, err = q.PersistHeartbeatState(ctx, dbsqlc.PersistHeartbeatStateParams{ID: r.AgentID, State: r.State,
					HeartbeatAt: micros(r.LastHeartbeatAt)})
			}
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

// ApplyReportedChange implements store.LivenessStore (design: Billing-mode audit). The
// BEGIN IMMEDIATE transaction holds the database's write lock from its
// first statement, so the compare below cannot race another writer.
func (s *Store) ApplyReportedChange(ctx context.Context, p store.ApplyReportedChangeParams) (bool, error) {
	wrote := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		wrote = false
		q := s.txq(tx)
		cur, err := q.ReportedPair(ctx, p.AgentID)
		if err != nil {
			return mapErr("apply reported change", err)
		}
		old := store.ReportedPair{BillingMode: nullStr(cur.ReportedBillingMode), ToolClass: nullStr(cur.ReportedToolClass)}
		if lvSame(old.BillingMode, p.BillingMode) && lvSame(old.ToolClass, p.ToolClass) {
			return nil
		}
		if err := q.ApplyReportedChange(ctx, reportedChange(p)); err != nil {
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
		q := s.txq(tx)
		for i, p := range ps {
			cur, err := q.ReportedPair(ctx, p.AgentID)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			}
			if err != nil {
				return mapErr("apply reported changes", err)
			}
			old := store.ReportedPair{BillingMode: nullStr(cur.ReportedBillingMode), ToolClass: nullStr(cur.ReportedToolClass)}
			if lvSame(old.BillingMode, p.BillingMode) && lvSame(old.ToolClass, p.ToolClass) {
				continue
			}
			if err := q.ApplyReportedChange(ctx, reportedChange(p)); err != nil {
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

// ApplyProjectReadiness implements store.LivenessStore (design: Project readiness).
func (s *Store) ApplyProjectReadiness(ctx context.Context, p store.ApplyProjectReadinessParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		n, err := s.txq(tx).ApplyProjectReadiness(ctx, dbsqlc.ApplyProjectReadinessParams{ID: p.AgentID,
			Readiness: nullJSON(p.Readiness), Now: micros(p.Now)})
		if err != nil {
			return mapErr("apply project readiness", err)
		}
		if n == 0 {
			return mapErr("apply project readiness", sql.ErrNoRows)
		}
		return nil
	})
}

// reportedChange is the row write of an accepted reported change; the
// heartbeat time only moves forward.
func reportedChange(p store.ApplyReportedChangeParams) dbsqlc.ApplyReportedChangeParams {
	return dbsqlc.ApplyReportedChangeParams{ID: p.AgentID, BillingMode: toNullStr(p.BillingMode),
		ToolClass: toNullStr(p.ToolClass), RuntimeVersion: toNullStr(p.RuntimeVersion),
		ReportedState: nullJSON(p.ReportedState), State: p.State, HeartbeatAt: micros(p.HeartbeatAt)}
}

func lvSame(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
