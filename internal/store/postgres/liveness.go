package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// The liveness part of the store port (design: Store contract): store.LivenessStore.

var _ store.LivenessStore = (*Store)(nil)

// persistChunk bounds the rows of one PersistHeartbeats statement (the
// arrays travel as parameters; the whole pass is still one transaction).
const persistChunk = 2000

// ListLiveAgents implements store.LivenessStore (design: Start rule).
func (s *Store) ListLiveAgents(ctx context.Context, p store.ListLiveAgentsParams) ([]domain.Agent, error) {
	rows, err := s.q.ListLiveAgents(ctx, dbsqlc.ListLiveAgentsParams{AfterID: p.AfterID, Lim: limitArg(p.Limit)})
	out, err := storeutil.AllErr(rows, err, agentFrom)
	return out, mapErr("list live agents", err)
}

// PersistHeartbeats implements store.LivenessStore: one transaction that
// first locks the rows in ascending id order (SELECT … ORDER BY id FOR
// UPDATE, so two instances flushing overlapping sets cannot deadlock), then
// writes them with one set-based UPDATE per chunk under the monotone
// condition (design: Flush loop).
func (s *Store) PersistHeartbeats(ctx context.Context, p store.PersistHeartbeatsParams) (int, error) {
	// Hand-written: a group-commit batch, set-based over unnest() arrays.
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

// ApplyReportedChange implements store.LivenessStore (design: Billing-mode audit): the row
// lock (FOR UPDATE) serialises racing heartbeats of every instance, so
// exactly one of them sees the old values and audits the change. The row
// lock is taken before the audit chain's advisory lock, the order every
// audited agent change uses.
func (s *Store) ApplyReportedChange(ctx context.Context, p store.ApplyReportedChangeParams) (bool, error) {
	wrote := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		wrote = false
		q := dbsqlc.New(tx)
		cur, err := q.LockReportedPair(ctx, p.AgentID)
		if err != nil {
			return mapErr("apply reported change", err)
		}
		old := store.ReportedPair{BillingMode: cur.ReportedBillingMode, ToolClass: cur.ReportedToolClass}
		if lvSame(old.BillingMode, p.BillingMode) && lvSame(old.ToolClass, p.ToolClass) {
			return nil
		}
		err = q.ApplyReportedChange(ctx, dbsqlc.ApplyReportedChangeParams{ID: p.AgentID, BillingMode: p.BillingMode,
			ToolClass: p.ToolClass, RuntimeVersion: p.RuntimeVersion, ReportedState: nullJSON(p.ReportedState),
			State: p.State, HeartbeatAt: micro(p.HeartbeatAt)})
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

// ApplyReportedChanges implements store.LivenessStore: one transaction of
// a fixed number of statements whatever the batch size — lock the rows in
// ascending id order (as PersistHeartbeats does, so they cannot deadlock
// with each other), compare each element with the locked values in the
// order given, write the changed rows with one set-based UPDATE, and
// append their audit entries with one INSERT after one acquisition of the
// audit chain's advisory lock (the chain is computed here from its last
// entry, read under that lock).
func (s *Store) ApplyReportedChanges(ctx context.Context, ps []store.ApplyReportedChangeParams) ([]bool, error) {
	// Hand-written: a group-commit batch, set-based over unnest() arrays.
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
		// Compare in order; the last change of an id is what its row gets.
		var records []domain.AuditRecord
		var ats []time.Time
		last := map[string]int{}
		for i, p := range ps {
			old, ok := stored[p.AgentID]
			if !ok || (lvSame(old.BillingMode, p.BillingMode) && lvSame(old.ToolClass, p.ToolClass)) {
				continue
			}
			records = append(records, p.Audit(old))
			ats = append(ats, p.HeartbeatAt)
			stored[p.AgentID] = store.ReportedPair{BillingMode: p.BillingMode, ToolClass: p.ToolClass}
			last[p.AgentID] = i
			wrote[i] = true
		}
		if len(records) == 0 {
			return nil
		}
		n := len(last)
		uid, modes, classes := make([]string, 0, n), make([]*string, 0, n), make([]*string, 0, n)
		rvs, rss, states, hbs := make([]*string, 0, n), make([]*string, 0, n), make([]string, 0, n), make([]time.Time, 0, n)
		for i, p := range ps {
			if j, ok := last[p.AgentID]; !ok || j != i {
				continue
			}
			uid, modes, classes = append(uid, p.AgentID), append(modes, p.BillingMode), append(classes, p.ToolClass)
			rvs, rss = append(rvs, p.RuntimeVersion), append(rss, nullJSON(p.ReportedState))
			states, hbs = append(states, p.State), append(hbs, micro(p.HeartbeatAt))
		}
		if _, err := tx.Exec(ctx, `UPDATE agents a SET
				reported_billing_mode = r.mode, reported_tool_class = r.class,
				reported_runtime_version = r.rv, reported_state = r.rs, state = r.state,
				last_heartbeat_at = GREATEST(a.last_heartbeat_at, r.hb)
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
				AS r(id, mode, class, rv, rs, state, hb)
			WHERE a.id = r.id`, uid, modes, classes, rvs, rss, states, hbs); err != nil {
			return mapErr("apply reported changes", err)
		}
		return appendAudits(ctx, tx, ats, records)
	})
	if err != nil {
		return make([]bool, len(ps)), err
	}
	return wrote, nil
}

// appendAudits appends the records in order (at[i] is record i's time)
// under one acquisition of the chain's lock, with one INSERT.
func appendAudits(ctx context.Context, tx pgx.Tx, at []time.Time, rs []domain.AuditRecord) error {
	// Hand-written: a group-commit batch, set-based over unnest() arrays.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockAudit); err != nil {
		return mapErr("append audit", err)
	}
	var seq int64
	var prev string
	err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&seq, &prev)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return mapErr("append audit", err)
	}
	n := len(rs)
	seqs, ts := make([]int64, n), make([]time.Time, n)
	actors, actions, agents, decisions := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	data, prevs, hashes := make([]*string, n), make([]string, n), make([]string, n)
	for i, r := range rs {
		e, err := storeutil.AuditEntry(seq+1, prev, at[i], r)
		if err != nil {
			return err
		}
		seqs[i], ts[i], actors[i], actions[i], agents[i], decisions[i] = e.Seq, e.At, e.Actor, e.Action, e.AgentID, e.Decision
		data[i], prevs[i], hashes[i] = nullJSON(e.Data), e.PrevHash, e.Hash
		seq, prev = e.Seq, e.Hash
	}
	_, err = tx.Exec(ctx, `INSERT INTO audit (seq, at, actor, action, agent_id, decision, data, prev_hash, hash)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])`,
		seqs, ts, actors, actions, agents, decisions, data, prevs, hashes)
	return mapErr("append audit", err)
}

// DBNow implements store.LivenessStore: the server's clock_timestamp() (the
// real time, not the transaction's start).
func (s *Store) DBNow(ctx context.Context) (time.Time, error) {
	t, err := s.q.DBNow(ctx)
	if err != nil {
		return time.Time{}, mapErr("database clock", err)
	}
	return t.UTC(), nil
}

// ApplyProjectReadiness implements store.LivenessStore (design: Project readiness).
func (s *Store) ApplyProjectReadiness(ctx context.Context, p store.ApplyProjectReadinessParams) error {
	n, err := s.q.ApplyProjectReadiness(ctx, dbsqlc.ApplyProjectReadinessParams{ID: p.AgentID,
		Readiness: nullJSON(p.Readiness), Now: micro(p.Now)})
	if err != nil {
		return mapErr("apply project readiness", err)
	}
	if n == 0 {
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
