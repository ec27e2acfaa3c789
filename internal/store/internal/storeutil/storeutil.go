// Package storeutil holds the few pure helpers both store adapters share:
// time normalisation, slice normalisation, mapping generated rows (rows.go),
// building a chained audit entry and streaming the chain to its verifier
// (design: Retries and dead letter; audit log) and the sweep backoff as SQL (design: Ring budget).
// It does no I/O of its own (Batches runs the adapter's deletes, Migrate
// runs goose on the adapter's handle, migrate.go).
package storeutil

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// Micro returns t in UTC truncated to the microsecond, the precision both
// stores keep. Rounding is never used, so both adapters agree.
func Micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// MicroPtr is Micro for an optional time; nil stays nil.
func MicroPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	m := Micro(*t)
	return &m
}

// Strings returns s, or an empty non-nil slice when s is nil, so stored
// lists read back as [] rather than null.
func Strings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Lease returns d, or domain.DefaultLease when d is not positive.
func Lease(d time.Duration) time.Duration {
	if d <= 0 {
		return domain.DefaultLease
	}
	return d
}

// ClaimBatch bounds a claim's N to 1..domain.MaxClaimBatch (design:
// Claiming in batches): N <= 1 is one.
func ClaimBatch(n int) int { return min(max(n, 1), domain.MaxClaimBatch) }

// FirstClaim is ClaimNext's answer from a batch of one (ClaimNextN with
// N 1): its todo, or domain.ErrNotFound when nothing was claimable.
func FirstClaim(ts []domain.Todo, err error) (domain.Todo, error) {
	if err == nil && len(ts) == 0 {
		err = fmt.Errorf("claim next: %w", domain.ErrNotFound)
	}
	if err != nil {
		return domain.Todo{}, err
	}
	return ts[0], nil
}

// SortTodos orders claimed todos oldest first (created_at, then id), the
// order of every todo list (an UPDATE … RETURNING returns them in none).
func SortTodos(ts []domain.Todo) {
	slices.SortFunc(ts, func(a, b domain.Todo) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// AuditEntry builds the entry that follows prevHash at seq: At truncated to
// µs in UTC, Decision "" → "allow", Data marshalled with encoding/json (nil
// → no data), Hash = domain.AuditHash. Error: Data cannot be marshalled.
func AuditEntry(seq int64, prevHash string, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error) {
	e := domain.AuditEntry{
		Seq:      seq,
		At:       Micro(at),
		Actor:    r.Actor,
		Action:   r.Action,
		AgentID:  r.AgentID,
		Decision: r.Decision,
		PrevHash: prevHash,
	}
	if e.Decision == "" {
		e.Decision = "allow"
	}
	if r.Data != nil {
		b, err := json.Marshal(r.Data)
		if err != nil {
			return domain.AuditEntry{}, fmt.Errorf("audit %s: marshal data: %w", r.Action, err)
		}
		e.Data = b
	}
	e.Hash = domain.AuditHash(e)
	return e, nil
}

// NextRingAt is the next_ring_at a store writes for t on insert:
// domain.NextRingAt(t.RingAttempts, t.LastRingedAt, or t.CreatedAt when
// never rung), in µs UTC; nil once the ring budget is spent (design: Ring budget).
func NextRingAt(t domain.Todo) *time.Time {
	last := t.CreatedAt
	if t.LastRingedAt != nil {
		last = *t.LastRingedAt
	}
	next, ok := domain.NextRingAt(t.RingAttempts, last)
	if !ok {
		return nil
	}
	next = Micro(next)
	return &next
}

// AsRead is t as a store returns it: a todo that will never ring again
// (done, or dead-lettered: not Todo.Live) has no NextRingAt, whatever the
// stored column still holds (design: Ring budget). A claimed todo, or a failed one
// with a retry scheduled, keeps it: it can be pending again.
func AsRead(t domain.Todo) domain.Todo {
	if !t.Live() {
		t.NextRingAt = nil
	}
	return t
}

// RingDelayCase renders domain.SweepDelays as a SQL CASE over the ring
// count expression count, each delay written by the dialect's render:
//
//	CASE <count> WHEN 0 THEN <render(5m)> … WHEN 4 THEN <render(6h)> END
//
// The CASE is NULL for a count at or over domain.MaxRings, so
// `<now> + RingDelayCase(…)` is NULL once the ring budget is spent: the SQL
// form of domain.NextRingAt, generated from the one Go source
// (design: Ring budget).
func RingDelayCase(count string, render func(time.Duration) string) string {
	var b strings.Builder
	b.WriteString("CASE ")
	b.WriteString(count)
	for n, d := range domain.SweepDelays() {
		fmt.Fprintf(&b, " WHEN %d THEN %s", n, render(d))
	}
	b.WriteString(" END")
	return b.String()
}

// RingSQL is the sweep backoff of domain.SweepDelays in one dialect's SQL
// (RingDelayCase, each delay written by the dialect's render): added to a
// time it gives next_ring_at, and NULL once the ring budget is spent
// (design: Ring budget).
type RingSQL struct {
	// DelayNow is the delay for the current count (MarkDigestRung).
	DelayNow string
	// DelayAfterRing is the delay after a ring that raises ring_attempts
	// by one (MarkRungBatch, SweepRing: in a SET clause ring_attempts is the old
	// count).
	DelayAfterRing string
	cast           string // what makes the parameter a time in a sum ("::timestamptz")
}

// NewRingSQL renders the backoff with render; cast follows the ring time's
// parameter where it is added to a delay.
func NewRingSQL(render func(time.Duration) string, cast string) RingSQL {
	return RingSQL{DelayNow: RingDelayCase("ring_attempts", render),
		DelayAfterRing: RingDelayCase("ring_attempts + 1", render), cast: cast}
}

// Set is the SET clause of a ring rung at the parameter at (MarkRungBatch,
// SweepRing, RingMissed, FailoverRings): one more attempt, last_ringed_at =
// at, next_ring_at = at + the delay after it (NULL once the budget is spent).
func (r RingSQL) Set(at string) string {
	return "SET ring_attempts = ring_attempts + 1, last_ringed_at = " + at +
		", next_ring_at = " + at + r.cast + " + " + r.DelayAfterRing
}

// SortedUnique returns the distinct values of ids in ascending order (a
// copy), e.g. the sweep's receivers, so a duplicate never takes a second
// share of a pass.
func SortedUnique(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return Strings(slices.Compact(out))
}

// Qualify prefixes every column of the comma-separated list cols with
// alias and a dot: Qualify("a", "id, handle") = "a.id, a.handle".
func Qualify(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// AgentCols is every column of agents in table order, the same in both
// dialects' schemas and what each adapter's dbsqlc.Agent holds; the
// hand-written agent reads select it.
const AgentCols = `id, handle, owner_id, name, active, revoked_at, queues, verbs,
	billing_mode, billing_modes, tool_class, created_at, updated_at,
	shift, presence_override, override_until, override_set_at, override_by,
	presence_seen, presence_changed_at, presence_changed_by,
	state, last_heartbeat_at, reported_billing_mode, reported_tool_class,
	reported_runtime_version, reported_state, project_readiness,
	handoff, self_clock_in_cap, self_in_stretch, self_in_used, first_stream_at`

// TodoCols is every column of todos in table order, the same in both
// dialects' schemas and what each adapter's dbsqlc.Todo holds; the
// hand-written todo statements return it.
const TodoCols = `id, agent_id, queue, title, payload, kind, source, idempotency_key,
	push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
	ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
	finished_at, next_ring_at, pool_id, ring_agent_id`

// Batches runs del with lim = batch (<= 0: defaultBatch) until it deletes
// fewer than lim rows, and returns the total deleted: the loop of a pruning
// done in bounded statements. ctx ending stops it between batches with
// ctx's error; del's error stops it at once.
func Batches(ctx context.Context, batch, defaultBatch int, del func(lim int) (int64, error)) (int64, error) {
	if batch <= 0 {
		batch = defaultBatch
	}
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := del(batch)
		total += n
		if err != nil || n < int64(batch) {
			return total, err
		}
	}
}

// AuditChainSQL reads the whole audit chain in seq order, every column in
// table order (what each adapter's scanAudit scans), the same in both
// dialects. It is hand-written: VerifyAudit streams it, where a generated
// :many would hold the chain in memory.
const AuditChainSQL = `SELECT seq, at, actor, action, agent_id, decision, data, prev_hash, hash
		FROM audit ORDER BY seq`

// VerifyChain streams rows of AuditChainSQL, read by scan, through a
// domain.AuditVerifier (scoped to agentIDs when scoped) and returns its
// result, holding no entry (design: Audit chain; verify). Error: the first
// of scan or rows.
func VerifyChain(rows Rows, scan func(Scanner) (domain.AuditEntry, error), scoped bool, agentIDs []string) (domain.AuditVerifyResult, error) {
	v := domain.NewAuditVerifier(scoped, agentIDs)
	if err := Each(rows, scan, v.Add); err != nil {
		return domain.AuditVerifyResult{}, err
	}
	return v.Result(), nil
}
