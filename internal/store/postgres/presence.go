package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// The presence part of the store port (design: Store contract): store.PresenceStore.
// Several instances share the rows: the transition claim and the sweep are
// single conditional UPDATEs, so of two racing instances the second
// re-checks the row after the first commits and matches nothing.
//
// Its statements are hand-written: the ring statements (SweepRing,
// RingMissed, FailoverRings, MarkDigestRung) splice the ring-delay CASE
// built from domain.SweepDelays and the todos_sweep predicate built from
// domain.MaxRings, which sqlc cannot; UpdatePresence and
// ListAgentsChangedSince are not in sql/ yet. ClaimTransition and
// PendingDoorbellTodos are generated (sql/queries.sql).

var _ store.PresenceStore = (*Store)(nil)

// sweepable is the todos_sweep index predicate, verbatim, so the planner
// can prove the partial index applies: pending, push-eligible, ring budget
// left.
var sweepable = fmt.Sprintf(`state = 'pending' AND push_eligible AND ring_attempts < %d`, domain.MaxRings)

// UpdatePresence implements store.PresenceStore (design: Presence columns, Self verbs, Operator overrides):
// the shift and/or override columns, updated_at = Now and the audit
// entry in one transaction, under the agent's row lock. A written override
// with Override "" clears all four override columns; a set override
// without OverrideSetAt is set at Now.
func (s *Store) UpdatePresence(ctx context.Context, p store.UpdatePresenceParams) (domain.Agent, error) {
	var a domain.Agent
	err := s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		if err := agentGate(ctx, tx, "update presence", p.AgentID); err != nil {
			return err
		}
		var override, by *string
		var until, setAt *time.Time
		if p.Override != "" {
			override, by, until = &p.Override, textPtr(p.OverrideBy), storeutil.MicroPtr(p.OverrideUntil)
			setAt = storeutil.MicroPtr(p.OverrideSetAt)
			if setAt == nil {
				now := micro(p.Now)
				setAt = &now
			}
		}
		var gOverride, gBy *string
		var gSetAt *time.Time
		if g := p.Guard; g != nil {
			gOverride, gSetAt, gBy = textPtr(g.Override), storeutil.MicroPtr(g.SetAt), textPtr(g.By)
		}
		var err error
		a, err = scanAgent(tx.QueryRow(ctx, `UPDATE agents SET
				shift = CASE WHEN $2::boolean THEN $3::text ELSE shift END,
				presence_override = CASE WHEN $4::boolean THEN $5::text ELSE presence_override END,
				override_until = CASE WHEN $4 THEN $6::timestamptz ELSE override_until END,
				override_set_at = CASE WHEN $4 THEN $7::timestamptz ELSE override_set_at END,
				override_by = CASE WHEN $4 THEN $8::text ELSE override_by END,
				self_in_stretch = CASE WHEN $10::boolean THEN $11::timestamptz ELSE self_in_stretch END,
				self_in_used = CASE WHEN $10 THEN $12::bigint ELSE self_in_used END,
				self_clock_in_cap = CASE WHEN $13::boolean THEN $14::bigint ELSE self_clock_in_cap END,
				updated_at = $9
			WHERE id = $1 AND (NOT $15::boolean OR (presence_override IS NOT DISTINCT FROM $16::text
				AND override_set_at IS NOT DISTINCT FROM $17::timestamptz AND override_by IS NOT DISTINCT FROM $18::text))
			RETURNING `+storeutil.AgentCols,
			p.AgentID, p.SetShift, textPtr(p.Shift), p.SetOverride, override, until, setAt, by, micro(p.Now),
			p.SetBudget, storeutil.MicroPtr(p.SelfInStretch), int64(p.SelfInUsed/time.Second),
			p.SetCap, int64(p.SelfClockInCap/time.Second),
			p.Guard != nil, gOverride, gSetAt, gBy))
		if errors.Is(err, pgx.ErrNoRows) && p.Guard != nil {
			return store.ErrPresenceChanged // agentGate found the row: the guard failed
		}
		if err != nil {
			return mapErr("update presence", err)
		}
		return nil
	})
	return a, err
}

// textPtr maps "" to NULL for the optional text columns.
func textPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ClaimTransition implements store.PresenceStore (design: Transition claim): one
// conditional UPDATE of presence_seen. A racing claimer of another
// instance waits for the winner's row lock, re-checks presence_seen <> $2
// against the committed row and matches nothing, so exactly one claims.
// updated_at is left alone (a claimed transition is not a configuration
// change). An unknown agent claims nothing.
func (s *Store) ClaimTransition(ctx context.Context, p store.ClaimTransitionParams) (bool, error) {
	n, err := s.q.ClaimTransition(ctx, dbsqlc.ClaimTransitionParams{ID: p.AgentID, Seen: p.New, At: micro(p.At),
		By: textPtr(p.By)})
	if err != nil {
		return false, mapErr("claim transition", err)
	}
	return n > 0, nil
}

// The two queries of ListAgentsChangedSince: every unrevoked agent by id
// ($1 after id, $2 limit), and those changed since $1 ($2 after id, $3
// limit), which the agents_updated index serves.
const (
	unrevokedAgentsSQL = `SELECT ` + storeutil.AgentCols + ` FROM agents
		WHERE revoked_at IS NULL AND id > $1 ORDER BY id LIMIT $2`
	changedSinceSQL = `SELECT ` + storeutil.AgentCols + ` FROM agents
		WHERE updated_at >= $1 AND revoked_at IS NULL AND id > $2 ORDER BY id LIMIT $3`
)

// ListAgentsChangedSince implements store.PresenceStore (design: Presence evaluator).
// With Since set the agents_updated index finds the few changed rows; with
// Since zero it pages by id over the primary key. Limit <= 0 means no limit.
func (s *Store) ListAgentsChangedSince(ctx context.Context, p store.ListChangedParams) ([]domain.Agent, error) {
	var rows pgx.Rows
	var err error
	if p.Since.IsZero() {
		rows, err = s.pool.Query(ctx, unrevokedAgentsSQL, p.AfterID, limitArg(p.Limit))
	} else {
		rows, err = s.pool.Query(ctx, changedSinceSQL, micro(p.Since), p.AfterID, limitArg(p.Limit))
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
	rows, err := s.q.PendingDoorbellTodos(ctx, dbsqlc.PendingDoorbellTodosParams{AgentID: p.AgentID,
		ExcludeQueues: storeutil.Strings(p.ExcludeQueues), Lim: limitArg(p.Limit)})
	if err != nil {
		return nil, mapErr("pending doorbell todos", err)
	}
	out := make([]store.PendingTodo, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.PendingTodo{ID: r.ID, Queue: r.Queue, CreatedAt: r.CreatedAt.UTC()})
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
	// Every hosting instance marks the same todos after its own digest
	// (design: Digest on return); locking the rows in id order first keeps two such
	// updates from deadlocking.
	tag, err := s.pool.Exec(ctx, `UPDATE todos
		SET last_ringed_at = $3, next_ring_at = $3::timestamptz + `+ring.DelayNow+`
		WHERE id IN (SELECT id FROM todos
			WHERE (agent_id = $1 OR (agent_id IS NULL AND ring_agent_id = $1)) AND id = ANY ($2::text[]) AND state = 'pending'
			ORDER BY id FOR UPDATE)
		AND state = 'pending'`,
		p.AgentID, p.IDs, micro(p.At))
	if err != nil {
		return 0, mapErr("mark digest rung", err)
	}
	return int(tag.RowsAffected()), nil
}

// sweepRingSQL is the sweep (design: Sweep) as one statement that selects
// and rings. $1 receivers (agent ids), $2 excluded "<agent_id>:<queue>"
// pairs, $3 now, $4 per agent, $5 limit (NULL: none).
//
// For each receiver (unnest) a LATERAL subquery is one range scan of the
// todos_sweep index — (agent_id, next_ring_at) over pending, push-eligible
// todos with ring budget left — taking that agent's due todos oldest due
// first, at most $4. row_number() numbers each agent's picks, and ordering
// by that turn takes every agent's first before anyone's second, at most $5
// in all. Rows another instance's sweep (a receiver of both) or a claim is
// writing are skipped (FOR UPDATE SKIP LOCKED): a sweep never waits on a
// row lock, so racing sweeps cannot deadlock, and the rows it locks are
// re-checked against their committed versions, so none is rung twice. The
// picks are a MATERIALIZED CTE, evaluated once: an IN subquery with LIMIT and
// SKIP LOCKED may be rescanned, and a rescan takes rows past the limit. The
// outer UPDATE repeats the due condition as a second guard.
var sweepRingSQL = `WITH pick AS MATERIALIZED (
		SELECT pick.id AS pick_id FROM (
			SELECT due.id, due.next_ring_at,
			       row_number() OVER (PARTITION BY r.agent ORDER BY due.next_ring_at, due.id) AS turn
			FROM unnest($1::text[]) AS r(agent)
			CROSS JOIN LATERAL (
				SELECT id, next_ring_at FROM todos
				WHERE agent_id = r.agent AND ` + sweepable + `
				  AND next_ring_at <= $3 AND r.agent || ':' || queue <> ALL ($2::text[])
				ORDER BY next_ring_at
				LIMIT $4
				FOR UPDATE SKIP LOCKED
			) AS due
		) AS pick
		ORDER BY pick.turn, pick.next_ring_at, pick.id
		LIMIT $5)
	UPDATE todos
	` + ringSet("$3") + `
	FROM pick
	WHERE todos.id = pick.pick_id AND ` + sweepable + ` AND next_ring_at <= $3
	RETURNING ` + storeutil.TodoCols

// SweepRing implements store.PresenceStore (design: Sweep) with
// sweepRingSQL. Duplicate receivers count once; PerAgent and Limit <= 0
// mean no bound. The rows come back in no particular order.
func (s *Store) SweepRing(ctx context.Context, p store.SweepParams) ([]domain.Todo, error) {
	return s.ringTodos(ctx, "sweep ring", sweepRingSQL, p.Receivers, p.Excluded,
		micro(p.Now), limitArg(p.PerAgent), limitArg(p.Limit))
}

// ringTodos runs a ring statement returning storeutil.TodoCols: $1 the
// receivers (each once), $2 the excluded "<agent_id>:<queue>" pairs, then
// args. It returns the todos it rang; no receivers ring none.
func (s *Store) ringTodos(ctx context.Context, what, query string, receivers, excluded []string, args ...any) ([]domain.Todo, error) {
	if len(receivers) == 0 {
		return []domain.Todo{}, nil
	}
	args = append([]any{storeutil.SortedUnique(receivers), storeutil.Strings(excluded)}, args...)
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, mapErr(what, err)
	}
	out, err := collectTodos(rows)
	if err != nil {
		return nil, mapErr(what, err)
	}
	return out, nil
}

// ringMissedSQL is the catch-up ring of RingMissed as one statement. $1
// receivers, $2 excluded "<agent_id>:<queue>" pairs, $3 since, $4 now, $5
// limit (NULL: none). The picks are a MATERIALIZED CTE, evaluated once (an
// IN subquery may be rescanned per outer row, and a rescan skips the rows
// this statement already updated and takes the next ones past LIMIT). The
// todos_sweep index serves the per-agent scan; rows another caller is
// ringing are skipped (FOR UPDATE SKIP LOCKED) and the UPDATE re-checks
// "never rung" on the committed row.
var ringMissedSQL = `WITH pick AS MATERIALIZED (
		SELECT id AS pick_id FROM todos
		WHERE agent_id = ANY ($1::text[]) AND ` + sweepable + `
		  AND ring_attempts = 0 AND last_ringed_at IS NULL AND created_at >= $3
		  AND agent_id || ':' || queue <> ALL ($2::text[])
		ORDER BY created_at, id
		LIMIT $5
		FOR UPDATE SKIP LOCKED)
	UPDATE todos
	` + ringSet("$4") + `
	FROM pick
	WHERE todos.id = pick.pick_id AND todos.state = 'pending' AND todos.ring_attempts = 0 AND todos.last_ringed_at IS NULL
	RETURNING ` + storeutil.TodoCols

// RingMissed implements store.PresenceStore (design: Catch-up after a lost listener) with
// ringMissedSQL. The rows come back in no particular order.
func (s *Store) RingMissed(ctx context.Context, p store.MissedRingParams) ([]domain.Todo, error) {
	return s.ringTodos(ctx, "ring missed", ringMissedSQL, p.Receivers, p.Excluded,
		micro(p.Since), micro(p.Now), limitArg(p.Limit))
}

// FailoverRings implements store.PresenceStore (design: Doorbell failover): one
// UPDATE joined with the batch (unnest of ids and ring times); a todo
// listed twice joins twice but is updated once.
func (s *Store) FailoverRings(ctx context.Context, p store.FailoverRingsParams) ([]string, error) {
	if len(p.Rings) == 0 {
		return []string{}, nil
	}
	ids := make([]string, len(p.Rings))
	rungAt := make([]time.Time, len(p.Rings))
	for i, r := range p.Rings {
		ids[i], rungAt[i] = r.TodoID, micro(r.RungAt)
	}
	rows, err := s.pool.Query(ctx, `UPDATE todos
		`+ringSet("$3")+`
		FROM unnest($1::text[], $2::timestamptz[]) AS f(id, rung_at)
		WHERE todos.id = f.id AND todos.state = 'pending' AND todos.push_eligible AND todos.ring_attempts < `+strconv.Itoa(domain.MaxRings)+`
		  AND (todos.last_ringed_at IS NULL OR todos.last_ringed_at <= f.rung_at)
		RETURNING todos.id`, ids, rungAt, micro(p.At))
	if err != nil {
		return nil, mapErr("failover rings", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr("failover rings", err)
	}
	return out, nil
}

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
		if old.Equal(p.Reported()) {
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
			if !ok || old.Equal(p.Reported()) {
				continue
			}
			records = append(records, p.Audit(old))
			ats = append(ats, p.HeartbeatAt)
			stored[p.AgentID] = p.Reported()
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
// under one acquisition of the chain's lock, with one INSERT (auditInsert).
func appendAudits(ctx context.Context, tx pgx.Tx, at []time.Time, rs []domain.AuditRecord) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockAudit); err != nil {
		return mapErr("append audit", err)
	}
	var seq int64
	var prev string
	err := tx.QueryRow(ctx, auditTailSQL).Scan(&seq, &prev)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return mapErr("append audit", err)
	}
	sql, args, err := auditInsert(seq, prev, at, rs)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, sql, args...)
	return mapErr("append audit", err)
}

// auditInsert is the one INSERT of the entries of rs (at[i] is record i's
// time) extending the chain whose tail is (seq, prev): its statement and
// arguments.
func auditInsert(seq int64, prev string, at []time.Time, rs []domain.AuditRecord) (string, []any, error) {
	// Hand-written: a group-commit batch, set-based over unnest() arrays.
	n := len(rs)
	seqs, ts := make([]int64, n), make([]time.Time, n)
	actors, actions, agents, decisions := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	data, prevs, hashes := make([]*string, n), make([]string, n), make([]string, n)
	for i, r := range rs {
		e, err := storeutil.AuditEntry(seq+1, prev, at[i], r)
		if err != nil {
			return "", nil, err
		}
		seqs[i], ts[i], actors[i], actions[i], agents[i], decisions[i] = e.Seq, e.At, e.Actor, e.Action, e.AgentID, e.Decision
		data[i], prevs[i], hashes[i] = nullJSON(e.Data), e.PrevHash, e.Hash
		seq, prev = e.Seq, e.Hash
	}
	return `INSERT INTO audit (seq, at, actor, action, agent_id, decision, data, prev_hash, hash)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])`,
		[]any{seqs, ts, actors, actions, agents, decisions, data, prevs, hashes}, nil
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
