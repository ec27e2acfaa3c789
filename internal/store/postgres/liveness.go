package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The liveness part of the store port (DESIGN.md §5.2): store.LivenessStore.

var _ store.LivenessStore = (*Store)(nil)

// persistChunk bounds the rows of one PersistHeartbeats statement (the
// arrays travel as parameters; the whole pass is still one transaction).
const persistChunk = 2000

// ListLiveAgents implements store.LivenessStore (D-M2-20-6).
func (s *Store) ListLiveAgents(ctx context.Context, p store.ListLiveAgentsParams) ([]domain.Agent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentCols+` FROM agents
		WHERE state IN ('online', 'degraded') AND id > $1 ORDER BY id LIMIT $2`, p.AfterID, limitArg(p.Limit))
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

// PersistHeartbeats implements store.LivenessStore: one transaction that
// first locks the rows in ascending id order (SELECT … ORDER BY id FOR
// UPDATE, so two instances flushing overlapping sets cannot deadlock), then
// writes them with one set-based UPDATE per chunk under the monotone
// condition (D-M2-20-5).
func (s *Store) PersistHeartbeats(ctx context.Context, p store.PersistHeartbeatsParams) (int, error) {
	if len(p.Rows) == 0 {
		return 0, nil
	}
	rows := slices.Clone(p.Rows)
	slices.SortStableFunc(rows, func(a, b store.HeartbeatRow) int { return strings.Compare(a.AgentID, b.AgentID) })
	written := 0
	err := s.tx(ctx, func(tx pgx.Tx) error {
		written = 0
		for start := 0; start < len(rows); start += persistChunk {
			chunk := rows[start:min(start+persistChunk, len(rows))]
			n := len(chunk)
			ids, states := make([]string, n), make([]string, n)
			hbs, has := make([]time.Time, n), make([]bool, n)
			rvs, rss := make([]*string, n), make([]*string, n)
			for i, r := range chunk {
				ids[i], states[i], hbs[i], has[i] = r.AgentID, r.State, micro(r.LastHeartbeatAt), r.HasReport
				rvs[i], rss[i] = r.RuntimeVersion, nullJSON(r.ReportedState)
			}
			if _, err := tx.Exec(ctx, `SELECT 1 FROM agents WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids); err != nil {
				return mapErr("persist heartbeats", err)
			}
			tag, err := tx.Exec(ctx, `UPDATE agents a SET
					state = r.state,
					last_heartbeat_at = r.hb,
					reported_runtime_version = CASE WHEN r.has THEN r.rv ELSE a.reported_runtime_version END,
					reported_state = CASE WHEN r.has THEN r.rs ELSE a.reported_state END
				FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::boolean[], $5::text[], $6::text[])
					AS r(id, state, hb, has, rv, rs)
				WHERE a.id = r.id AND (a.last_heartbeat_at IS NULL OR a.last_heartbeat_at <= r.hb)`,
				ids, states, hbs, has, rvs, rss)
			if err != nil {
				return mapErr("persist heartbeats", err)
			}
			written += int(tag.RowsAffected())
		}
		return nil
	})
	return written, err
}

// ApplyReportedChange implements store.LivenessStore (D-M2-20-3): the row
// lock (FOR UPDATE) serialises racing heartbeats of every instance, so
// exactly one of them sees the old values and audits the change. The row
// lock is taken before the audit chain's advisory lock, the order every
// audited agent change uses.
func (s *Store) ApplyReportedChange(ctx context.Context, p store.ApplyReportedChangeParams) (bool, error) {
	wrote := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		wrote = false
		var old store.ReportedPair
		err := tx.QueryRow(ctx, `SELECT reported_billing_mode, reported_tool_class FROM agents WHERE id = $1 FOR UPDATE`, p.AgentID).
			Scan(&old.BillingMode, &old.ToolClass)
		if err != nil {
			return mapErr("apply reported change", err)
		}
		if lvSame(old.BillingMode, p.BillingMode) && lvSame(old.ToolClass, p.ToolClass) {
			return nil
		}
		hb := micro(p.HeartbeatAt)
		_, err = tx.Exec(ctx, `UPDATE agents SET
				reported_billing_mode = $2, reported_tool_class = $3,
				reported_runtime_version = $4, reported_state = $5, state = $6,
				last_heartbeat_at = GREATEST(last_heartbeat_at, $7)
			WHERE id = $1`,
			p.AgentID, p.BillingMode, p.ToolClass, p.RuntimeVersion, nullJSON(p.ReportedState), p.State, hb)
		if err != nil {
			return mapErr("apply reported change", err)
		}
		if _, err := appendAudit(ctx, tx, p.HeartbeatAt, p.Audit(old)); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	return wrote, err
}

// ApplyReportedChanges implements store.LivenessStore: one transaction
// that locks the rows in ascending id order (as PersistHeartbeats does, so
// they cannot deadlock with each other), then compares, writes and audits
// each element in the order given; the audit chain's advisory lock is
// taken once for the whole batch.
func (s *Store) ApplyReportedChanges(ctx context.Context, ps []store.ApplyReportedChangeParams) ([]bool, error) {
	wrote := make([]bool, len(ps))
	if len(ps) == 0 {
		return wrote, nil
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.AgentID
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		clear(wrote)
		rows, err := tx.Query(ctx, `SELECT id, reported_billing_mode, reported_tool_class FROM agents
			WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
		if err != nil {
			return mapErr("apply reported changes", err)
		}
		stored := make(map[string]store.ReportedPair, len(ps))
		for rows.Next() {
			var id string
			var old store.ReportedPair
			if err := rows.Scan(&id, &old.BillingMode, &old.ToolClass); err != nil {
				rows.Close()
				return mapErr("apply reported changes", err)
			}
			stored[id] = old
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return mapErr("apply reported changes", err)
		}
		for i, p := range ps {
			old, ok := stored[p.AgentID]
			if !ok || (lvSame(old.BillingMode, p.BillingMode) && lvSame(old.ToolClass, p.ToolClass)) {
				continue
			}
			_, err = tx.Exec(ctx, `UPDATE agents SET
					reported_billing_mode = $2, reported_tool_class = $3,
					reported_runtime_version = $4, reported_state = $5, state = $6,
					last_heartbeat_at = GREATEST(last_heartbeat_at, $7)
				WHERE id = $1`,
				p.AgentID, p.BillingMode, p.ToolClass, p.RuntimeVersion, nullJSON(p.ReportedState), p.State, micro(p.HeartbeatAt))
			if err != nil {
				return mapErr("apply reported changes", err)
			}
			if _, err := appendAudit(ctx, tx, p.HeartbeatAt, p.Audit(old)); err != nil {
				return err
			}
			stored[p.AgentID] = store.ReportedPair{BillingMode: p.BillingMode, ToolClass: p.ToolClass}
			wrote[i] = true
		}
		return nil
	})
	if err != nil {
		return make([]bool, len(ps)), err
	}
	return wrote, nil
}

// DBNow implements store.LivenessStore: the server's clock_timestamp() (the
// real time, not the transaction's start).
func (s *Store) DBNow(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t); err != nil {
		return time.Time{}, mapErr("database clock", err)
	}
	return t.UTC(), nil
}

// ApplyProjectReadiness implements store.LivenessStore (D-M2-20-10).
func (s *Store) ApplyProjectReadiness(ctx context.Context, p store.ApplyProjectReadinessParams) error {
	tag, err := s.pool.Exec(ctx, `UPDATE agents SET project_readiness = $2, updated_at = $3 WHERE id = $1`,
		p.AgentID, nullJSON(p.Readiness), micro(p.Now))
	if err != nil {
		return mapErr("apply project readiness", err)
	}
	if tag.RowsAffected() == 0 {
		return mapErr("apply project readiness", pgx.ErrNoRows)
	}
	return nil
}

func lvSame(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
