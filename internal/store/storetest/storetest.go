// Package storetest is the one behavioural contract suite of the store port
// (design: Store contract): every adapter runs Run, and an adapter is done when the
// suite passes. A bug fixed in one adapter gets a test here, so every
// adapter runs it (the River riverdrivertest pattern).
//
//	func TestContract(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T) storetest.Instance {
//				s := openFreshStore(t) // empty, migrated; closed by t.Cleanup
//				return storetest.Instance{Store: s, Tamper: func(t *testing.T, seq int64) { … }}
//			},
//			Empty: func(t *testing.T) storetest.EmptyDatabase { … }, // for the migration tests
//		})
//	}
//
// Every time the suite passes is derived from Base; nothing reads the clock.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"github.com/pressly/goose/v3"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Base is the fixed instant the suite's times are derived from.
var Base = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Instance is one fresh store under test.
type Instance struct {
	// Store is empty and migrated; the harness closes it in t.Cleanup.
	Store store.Store
	// Tamper overwrites the data of the audit entry seq with raw SQL,
	// bypassing the chain, so VerifyAudit must report the entry.
	Tamper func(t *testing.T, seq int64)
	// Twin, when the adapter can, opens a second Store on the same
	// database (PostgreSQL: a second pool, as a second instance would),
	// closed by t.Cleanup; the races then run across the two. nil (SQLite
	// refuses a second handle on one file): they drive Store from many
	// goroutines.
	Twin func(t *testing.T) store.Store
}

// EmptyDatabase is an empty database for the migration tests.
type EmptyDatabase struct {
	// Migrations is a goose provider of the adapter's migrations on it.
	Migrations *goose.Provider
	// Open opens the adapter on it (applying what is pending); the harness
	// closes the Store in t.Cleanup.
	Open func(t *testing.T) store.Store
}

// Harness adapts one store adapter to the suite.
type Harness struct {
	// New returns a fresh Instance for one subtest.
	New func(t *testing.T) Instance
	// Empty returns an empty database, not migrated (required).
	Empty func(t *testing.T) EmptyDatabase
	// Parallel runs the subtests in parallel (t.Parallel); each still gets
	// its own store.
	Parallel bool
}

type contractTest struct {
	name string
	fn   func(t *testing.T, in Instance)
}

// ---- fixtures -----------------------------------------------------------------

const ownerID = "0b6f7a44-0000-4000-8000-000000000001"

func at(d time.Duration) time.Time { return Base.Add(d) }

func newAgent(handle, owner string, queues ...string) domain.Agent {
	return domain.Agent{
		ID:           uuid.NewString(),
		Handle:       handle,
		OwnerID:      owner,
		Name:         "Agent " + handle,
		Active:       true,
		Scope:        domain.Scope{Queues: queues, Verbs: domain.ScopeVerbs},
		BillingMode:  "subscription",
		BillingModes: []string{"subscription", "api"},
		ToolClass:    "claude-code",
		CreatedAt:    Base,
		UpdatedAt:    Base,
		// CreateAgent leaves self_clock_in_cap at its default (design: Self clock-in cap).
		SelfClockInCap: domain.ClockInCap(8 * time.Hour),
	}
}

// vended is an agent created through CreateAgent with its credential.
type vended struct {
	domain.Agent
	CredID, CredHash string
}

func vendParams(a domain.Agent) (store.CreateAgentParams, vended) {
	v := vended{Agent: a, CredID: uuid.NewString(), CredHash: "cred-" + uuid.NewString()}
	return store.CreateAgentParams{
		Agent:          a,
		CredentialID:   v.CredID,
		CredentialHash: v.CredHash,
		Audit: domain.AuditRecord{
			Actor: "operator:" + a.OwnerID, Action: "agent.vend", AgentID: a.ID,
			Data: map[string]any{"handle": a.Handle},
		},
	}, v
}

// withAlpha is in's store with agent alpha of ownerID vended on queue
// build: the fixture most contract tests start from.
func withAlpha(t *testing.T, in Instance) (store.Store, context.Context, vended) {
	t.Helper()
	return in.Store, t.Context(), vend(t, in.Store, newAgent("alpha", ownerID, "build"))
}

func vend(t *testing.T, s store.Store, a domain.Agent) vended {
	t.Helper()
	p, v := vendParams(a)
	if err := s.CreateAgent(t.Context(), p); err != nil {
		t.Fatalf("CreateAgent(%s): %v", a.Handle, err)
	}
	return v
}

func newTodo(agentID, queue string, created time.Time) domain.Todo {
	return domain.Todo{
		ID:           uuid.NewString(),
		AgentID:      agentID,
		Queue:        queue,
		Title:        "todo in " + queue,
		PushEligible: true,
		CreatedBy:    "operator:" + ownerID,
		State:        domain.TodoPending,
		MaxAttempts:  domain.DefaultMaxAttempts,
		CreatedAt:    created,
		UpdatedAt:    created,
	}
}

func push(t *testing.T, s store.Store, td domain.Todo) domain.Todo {
	t.Helper()
	got, created, err := s.CreateTodo(t.Context(), store.CreateTodoParams{Todo: td})
	if err != nil || !created {
		t.Fatalf("CreateTodo(%s) = created %v, %v; want created", td.ID, created, err)
	}
	return got
}

func claim(t *testing.T, s store.Store, agent vended, todoID string, lease time.Duration, now time.Time) domain.Todo {
	t.Helper()
	got, err := s.ClaimTodo(t.Context(), store.ClaimTodoParams{
		AgentID: agent.ID, TodoID: todoID, Queues: agent.Scope.Queues, Lease: lease, Now: now,
	})
	if err != nil {
		t.Fatalf("ClaimTodo(%s) at %s: %v", todoID, now.Format(time.RFC3339Nano), err)
	}
	return got
}

func getTodo(t *testing.T, s store.Store, id string) domain.Todo {
	t.Helper()
	got, err := s.GetTodo(t.Context(), id)
	if err != nil {
		t.Fatalf("GetTodo(%s): %v", id, err)
	}
	return got
}

func auditCount(t *testing.T, s store.Store) int {
	t.Helper()
	es, err := s.ListAudit(t.Context(), store.ListAuditParams{})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	return len(es)
}

// ---- assertions ---------------------------------------------------------------

func ptr[T any](v T) *T { return &v }

// micro is what a store returns for t: UTC, truncated to the microsecond.
func micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func microPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	return ptr(micro(*t))
}

// wantAgent is a as a store returns it: times in µs UTC, lists non-nil,
// and unset presence and liveness columns at their defaults (presence_seen
// "in", state "unknown"; design: Presence columns, Liveness states).
func wantAgent(a domain.Agent) domain.Agent {
	a.CreatedAt, a.UpdatedAt, a.RevokedAt = micro(a.CreatedAt), micro(a.UpdatedAt), microPtr(a.RevokedAt)
	a.Scope.Queues, a.Scope.Verbs, a.BillingModes = nonNil(a.Scope.Queues), nonNil(a.Scope.Verbs), nonNil(a.BillingModes)
	if a.Presence.Seen == "" {
		a.Presence.Seen = "in"
	}
	if a.Liveness.State == "" {
		a.Liveness.State = "unknown"
	}
	return a
}

// wantTodo is td as a store returns it: times in µs UTC, and, when td has
// none, next_ring_at as a store computes it on insert (design: Ring budget).
func wantTodo(td domain.Todo) domain.Todo {
	if td.NextRingAt == nil {
		last := td.CreatedAt
		if td.LastRingedAt != nil {
			last = *td.LastRingedAt
		}
		if next, ok := domain.NextRingAt(td.RingAttempts, last); ok {
			td.NextRingAt = &next
		}
	}
	td.CreatedAt, td.UpdatedAt = micro(td.CreatedAt), micro(td.UpdatedAt)
	td.LeaseExpiresAt, td.RetryAt, td.LastRingedAt = microPtr(td.LeaseExpiresAt), microPtr(td.RetryAt), microPtr(td.LastRingedAt)
	td.ClaimedAt, td.FinishedAt, td.NextRingAt = microPtr(td.ClaimedAt), microPtr(td.FinishedAt), microPtr(td.NextRingAt)
	return td
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// utcOption compares times by instant and requires both to be in UTC.
var utcOption = cmp.Comparer(func(a, b time.Time) bool {
	return a.Equal(b) && a.Location() == time.UTC && b.Location() == time.UTC
})

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got, utcOption); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error = %v, want %v", what, err, target)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func sameTime(t *testing.T, what string, got *time.Time, want time.Time) {
	t.Helper()
	if got == nil || !got.Equal(micro(want)) || got.Location() != time.UTC {
		t.Errorf("%s = %v, want %v (UTC)", what, got, micro(want))
	}
}

func isNil(t *testing.T, what string, got *time.Time) {
	t.Helper()
	if got != nil {
		t.Errorf("%s = %v, want nil", what, got)
	}
}

// sameJSON checks that got is valid JSON with exactly the bytes of want.
func sameJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Errorf("%s = %s, want none", what, got)
		}
		return
	}
	if !json.Valid(got) || string(got) != string(want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// parallel runs fn(i) for i in [0,n) on n goroutines released together and
// returns their errors.
func parallel(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	start := make(chan struct{})
	done := make(chan struct{})
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	for range n {
		<-done
	}
	return errs
}

func ctxOf(t *testing.T) context.Context { return t.Context() }

func seqs(es []domain.AuditEntry) string {
	s := "["
	for i, e := range es {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprint(e.Seq)
	}
	return s + "]"
}

// idsOf returns the id of each item, in order (non-nil, empty for none).
func idsOf[T any](items []T, id func(T) string) []string {
	ids := make([]string, 0, len(items))
	for _, it := range items {
		ids = append(ids, id(it))
	}
	return ids
}

// Outcome counts what racing calls returned: wins (nil) and conflicts
// (domain.ErrConflict); the first other error is returned.
func Outcome(errs []error) (wins, conflicts int, err error) {
	for _, e := range errs {
		switch {
		case e == nil:
			wins++
		case errors.Is(e, domain.ErrConflict):
			conflicts++
		case err == nil:
			err = e
		}
	}
	return wins, conflicts, err
}

// markOne is MarkRungBatch of one mark: whether it changed the todo.
func markOne(ctx context.Context, s store.Store, m store.MarkRungParams) (bool, error) {
	n, err := s.MarkRungBatch(ctx, []store.MarkRungParams{m})
	return n > 0, err
}
