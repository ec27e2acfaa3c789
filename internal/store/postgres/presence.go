package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
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
		_, err = appendAudit(ctx, tx, p.Now, p.Audit)
		return err
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
		SET last_ringed_at = $3, next_ring_at = $3::timestamptz + `+ringDelayNow+`
		WHERE id IN (SELECT id FROM todos
			WHERE agent_id = $1 AND id = ANY ($2::text[]) AND state = 'pending'
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
	if len(p.Receivers) == 0 {
		return []domain.Todo{}, nil
	}
	return s.ringTodos(ctx, "sweep ring", sweepRingSQL, storeutil.SortedUnique(p.Receivers),
		storeutil.Strings(p.Excluded), micro(p.Now), limitArg(p.PerAgent), limitArg(p.Limit))
}

// ringTodos runs a ring statement returning storeutil.TodoCols: the todos
// it rang.
func (s *Store) ringTodos(ctx context.Context, what, query string, args ...any) ([]domain.Todo, error) {
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
	if len(p.Receivers) == 0 {
		return []domain.Todo{}, nil
	}
	return s.ringTodos(ctx, "ring missed", ringMissedSQL, storeutil.SortedUnique(p.Receivers),
		storeutil.Strings(p.Excluded), micro(p.Since), micro(p.Now), limitArg(p.Limit))
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
