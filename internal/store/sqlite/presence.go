package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// The presence part of the store port (design: Store contract): store.PresenceStore.
// Writes run on the one write connection (BEGIN IMMEDIATE), so a
// conditional update here is already exclusive; the hot statements (the
// transition claim, the digest mark, the sweep) are prepared once.
//
// Its statements are hand-written: the ring statements (SweepRing,
// RingMissed, FailoverRings, MarkDigestRung) splice the ring-delay CASE
// built from domain.SweepDelays and the todos_sweep predicate built from
// domain.MaxRings, which sqlc cannot; ListAgentsChangedSince carries an
// INDEXED BY hint (TestPresencePlans checks its plan); UpdatePresence is not
// in sql/ yet. ClaimTransition and PendingDoorbellTodos are generated
// (sql/queries.sql).

var _ store.PresenceStore = (*Store)(nil)

// sweepable is the todos_sweep index predicate, verbatim (alias d), so the
// planner can use the index: pending, push-eligible, ring budget left.
var sweepable = fmt.Sprintf(`d.state = 'pending' AND d.push_eligible AND d.ring_attempts < %d`, domain.MaxRings)

// UpdatePresence implements store.PresenceStore (design: Presence columns, Self verbs, Operator overrides):
// the shift and/or override columns, updated_at = Now and the audit
// entry in one transaction. A written override with Override "" clears all
// four override columns; a set override without OverrideSetAt is set at Now.
func (s *Store) UpdatePresence(ctx context.Context, p store.UpdatePresenceParams) (domain.Agent, error) {
	var a domain.Agent
	err := s.writeAudited(ctx, p.Now, p.Audit, func(tx *sql.Tx) error {
		if err := s.agentGate(ctx, tx, "update presence", p.AgentID); err != nil {
			return err
		}
		var override, until, setAt, by any
		if p.Override != "" {
			override, until, by = p.Override, microsPtr(p.OverrideUntil), nullText(p.OverrideBy)
			setAt = micros(p.Now)
			if p.OverrideSetAt != nil {
				setAt = micros(*p.OverrideSetAt)
			}
		}
		var gOverride, gSetAt, gBy any
		if g := p.Guard; g != nil {
			gOverride, gSetAt, gBy = nullText(g.Override), microsPtr(g.SetAt), nullText(g.By)
		}
		var err error
		a, err = scanAgent(tx.QueryRowContext(ctx, `UPDATE agents SET
				shift = CASE WHEN ?2 THEN ?3 ELSE shift END,
				presence_override = CASE WHEN ?4 THEN ?5 ELSE presence_override END,
				override_until = CASE WHEN ?4 THEN ?6 ELSE override_until END,
				override_set_at = CASE WHEN ?4 THEN ?7 ELSE override_set_at END,
				override_by = CASE WHEN ?4 THEN ?8 ELSE override_by END,
				self_in_stretch = CASE WHEN ?10 THEN ?11 ELSE self_in_stretch END,
				self_in_used = CASE WHEN ?10 THEN ?12 ELSE self_in_used END,
				self_clock_in_cap = CASE WHEN ?13 THEN ?14 ELSE self_clock_in_cap END,
				updated_at = ?9
			WHERE id = ?1 AND (NOT ?15 OR (presence_override IS ?16 AND override_set_at IS ?17 AND override_by IS ?18))
			RETURNING `+storeutil.AgentCols,
			p.AgentID, p.SetShift, nullText(p.Shift), p.SetOverride, override, until, setAt, by, micros(p.Now),
			p.SetBudget, microsPtr(p.SelfInStretch), int64(p.SelfInUsed/time.Second),
			p.SetCap, int64(p.SelfClockInCap/time.Second),
			p.Guard != nil, gOverride, gSetAt, gBy))
		if errors.Is(err, sql.ErrNoRows) && p.Guard != nil {
			return store.ErrPresenceChanged // agentGate found the row: the guard failed
		}
		if err != nil {
			return mapErr("update presence", err)
		}
		return nil
	})
	return a, err
}

// nullText maps "" to NULL for the optional text columns.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ClaimTransition implements store.PresenceStore (design: Transition claim): the
// conditional update of presence_seen; updated_at is left alone (a claimed
// transition is not a configuration change). An unknown agent claims
// nothing.
func (s *Store) ClaimTransition(ctx context.Context, p store.ClaimTransitionParams) (bool, error) {
	claimed := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		n, err := s.txq(tx).ClaimTransition(ctx, dbsqlc.ClaimTransitionParams{ID: p.AgentID, Seen: p.New,
			At: micros(p.At), By: sql.NullString{String: p.By, Valid: p.By != ""}})
		claimed = n > 0
		return mapErr("claim transition", err)
	})
	return claimed, err
}

// The two queries of ListAgentsChangedSince: every unrevoked agent by id
// (?1 after id, ?2 limit), and those changed since ?1 (?2 after id, ?3
// limit) through the agents_updated index.
const (
	unrevokedAgentsSQL = `SELECT ` + storeutil.AgentCols + ` FROM agents
		WHERE revoked_at IS NULL AND id > ?1 ORDER BY id LIMIT ?2`
	changedSinceSQL = `SELECT ` + storeutil.AgentCols + ` FROM agents INDEXED BY agents_updated
		WHERE updated_at >= ?1 AND revoked_at IS NULL AND id > ?2 ORDER BY id LIMIT ?3`
)

// ListAgentsChangedSince implements store.PresenceStore (design: Presence evaluator).
// With Since set the agents_updated index finds the few changed rows (the
// INDEXED BY keeps the planner, which has no statistics, from walking the
// primary key in id order instead); with Since zero it pages by id. Limit
// <= 0 means no limit.
func (s *Store) ListAgentsChangedSince(ctx context.Context, p store.ListChangedParams) ([]domain.Agent, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1
	}
	var rows *sql.Rows
	var err error
	if p.Since.IsZero() {
		rows, err = s.read().QueryContext(ctx, unrevokedAgentsSQL, p.AfterID, limit)
	} else {
		rows, err = s.read().QueryContext(ctx, changedSinceSQL, micros(p.Since), p.AfterID, limit)
	}
	if err != nil {
		return nil, mapErr("list changed agents", err)
	}
	defer rows.Close()
	out, err := storeutil.Collect(rows, scanAgent)
	return out, mapErr("list changed agents", err)
}

// PendingDoorbellTodos implements store.PresenceStore (design: Digest on return):
// oldest first (created_at, then id); Limit <= 0 means no limit.
func (s *Store) PendingDoorbellTodos(ctx context.Context, p store.PendingParams) ([]store.PendingTodo, error) {
	rows, err := s.rq.PendingDoorbellTodos(ctx, dbsqlc.PendingDoorbellTodosParams{AgentID: p.AgentID,
		ExcludeQueues: encodeList(p.ExcludeQueues), Lim: limit(p.Limit)})
	if err != nil {
		return nil, mapErr("pending doorbell todos", err)
	}
	out := make([]store.PendingTodo, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.PendingTodo{ID: r.ID, Queue: r.Queue, CreatedAt: fromMicros(r.CreatedAt)})
	}
	return out, nil
}

// MarkDigestRung implements store.PresenceStore (design: Digest on return):
// last_ringed_at = At and next_ring_at = domain.NextRingAt(ring_attempts,
// At) on the listed todos of the agent that are still pending.
func (s *Store) MarkDigestRung(ctx context.Context, p store.MarkDigestParams) (int, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	changed := 0
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.in(tx).ExecContext(ctx, `UPDATE todos
			SET last_ringed_at = ?3, next_ring_at = ?3 + `+ring.DelayNow+`
			WHERE (agent_id = ?1 OR (agent_id IS NULL AND ring_agent_id = ?1)) AND id IN (SELECT value FROM json_each(?2)) AND state = 'pending'`,
			p.AgentID, encodeList(p.IDs), micros(p.At))
		if err != nil {
			return mapErr("mark digest rung", err)
		}
		n, err := res.RowsAffected()
		changed = int(n)
		return mapErr("mark digest rung", err)
	})
	return changed, err
}

// sweepRingSQL is the sweep (design: Sweep) as one statement that selects
// and rings. ?1 receivers (JSON array of agent ids), ?2 excluded
// "<agent_id>:<queue>" pairs (JSON array), ?3 now, ?4 per agent, ?5 limit
// (-1: none). For each receiver (json_each) a correlated subquery walks the
// todos_sweep index over that agent's due todos, oldest due first, at most
// ?4; row_number() numbers each agent's picks, and ordering by that turn
// takes every agent's first before anyone's second, at most ?5 in all.
var sweepRingSQL = `UPDATE todos
	` + ringSet("?3") + `
	WHERE rowid IN (
		SELECT rid FROM (
			SELECT t.rowid AS rid, t.next_ring_at AS due, t.id AS id,
			       row_number() OVER (PARTITION BY t.agent_id ORDER BY t.next_ring_at, t.id) AS turn
			FROM json_each(?1) AS r
			JOIN todos AS t ON t.rowid IN (
				SELECT d.rowid FROM todos AS d
				WHERE d.agent_id = r.value AND ` + sweepable + `
				  AND d.next_ring_at <= ?3
				  AND d.agent_id || ':' || d.queue NOT IN (SELECT value FROM json_each(?2))
				ORDER BY d.next_ring_at, d.id LIMIT ?4)
		)
		ORDER BY turn, due, id LIMIT ?5)
	RETURNING ` + storeutil.TodoCols

// SweepRing implements store.PresenceStore (design: Sweep) with
// sweepRingSQL. Duplicate receivers count once; PerAgent and Limit <= 0
// mean no bound. The rows come back in no particular order.
func (s *Store) SweepRing(ctx context.Context, p store.SweepParams) ([]domain.Todo, error) {
	return s.ringTodos(ctx, "sweep ring", sweepRingSQL, p.Receivers, p.Excluded,
		micros(p.Now), limit(p.PerAgent), limit(p.Limit))
}

// ringTodos runs a ring statement returning storeutil.TodoCols in one
// write transaction: ?1 the receivers (each once), ?2 the excluded
// "<agent_id>:<queue>" pairs (JSON arrays), then args. It returns the todos
// it rang; no receivers ring none.
func (s *Store) ringTodos(ctx context.Context, what, query string, receivers, excluded []string, args ...any) ([]domain.Todo, error) {
	if len(receivers) == 0 {
		return []domain.Todo{}, nil
	}
	args = append([]any{encodeList(storeutil.SortedUnique(receivers)), encodeList(excluded)}, args...)
	return writeRows(ctx, s, what, scanTodo, query, args...)
}

// writeRows runs query in one write transaction and reads every row it
// returns with scan: a non-nil slice, or nil and the error (named by what).
func writeRows[T any](ctx context.Context, s *Store, what string, scan func(storeutil.Scanner) (T, error), query string, args ...any) ([]T, error) {
	var out []T
	err := s.write(ctx, func(tx *sql.Tx) error {
		rows, err := s.in(tx).QueryContext(ctx, query, args...)
		if err != nil {
			return mapErr(what, err)
		}
		defer rows.Close()
		out, err = storeutil.Collect(rows, scan)
		return mapErr(what, err)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ringMissedSQL is the catch-up ring of RingMissed as one statement. ?1
// receivers (JSON array), ?2 excluded "<agent_id>:<queue>" pairs (JSON
// array), ?3 since, ?4 now, ?5 limit (-1: none). Writes are serialised, so
// the outer re-check is enough for racing callers.
var ringMissedSQL = `UPDATE todos
	` + ringSet("?4") + `
	WHERE rowid IN (
		SELECT d.rowid FROM todos AS d
		WHERE d.agent_id IN (SELECT value FROM json_each(?1)) AND ` + sweepable + `
		  AND d.ring_attempts = 0 AND d.last_ringed_at IS NULL AND d.created_at >= ?3
		  AND d.agent_id || ':' || d.queue NOT IN (SELECT value FROM json_each(?2))
		ORDER BY d.created_at, d.id LIMIT ?5)
	  AND state = 'pending' AND ring_attempts = 0 AND last_ringed_at IS NULL
	RETURNING ` + storeutil.TodoCols

// RingMissed implements store.PresenceStore (design: Catch-up after a lost listener) with
// ringMissedSQL. The rows come back in no particular order.
func (s *Store) RingMissed(ctx context.Context, p store.MissedRingParams) ([]domain.Todo, error) {
	return s.ringTodos(ctx, "ring missed", ringMissedSQL, p.Receivers, p.Excluded,
		micros(p.Since), micros(p.Now), limit(p.Limit))
}

// FailoverRings implements store.PresenceStore (design: Doorbell failover): one
// UPDATE over the batch, given as a JSON array of [id, rung_at] pairs.
func (s *Store) FailoverRings(ctx context.Context, p store.FailoverRingsParams) ([]string, error) {
	if len(p.Rings) == 0 {
		return []string{}, nil
	}
	pairs := make([][2]any, len(p.Rings))
	for i, r := range p.Rings {
		pairs[i] = [2]any{r.TodoID, micros(r.RungAt)}
	}
	batch, err := json.Marshal(pairs)
	if err != nil {
		return nil, err
	}
	return writeRows(ctx, s, "failover rings", storeutil.ScanString, `UPDATE todos
		`+ringSet("?2")+`
		WHERE rowid IN (
			SELECT d.rowid FROM json_each(?1) AS f
			JOIN todos AS d ON d.id = json_extract(f.value, '$[0]')
			WHERE `+sweepable+` AND (d.last_ringed_at IS NULL OR d.last_ringed_at <= json_extract(f.value, '$[1]')))
		RETURNING id`, string(batch), micros(p.At))
}

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
		if old.Equal(p.Reported()) {
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
			if old.Equal(p.Reported()) {
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
