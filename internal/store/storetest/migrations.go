package storetest

import (
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// NextRingCase is a todo of agent "a" as a release before migration 00002
// wrote it (no next_ring_at column yet), created at Base: the adapters'
// TestMigrationBackfillsNextRing inserts each with raw SQL, migrates, and
// checks the backfill with CheckNextRingBackfill.
type NextRingCase struct {
	ID, State string
	Rings     int
	Last      *time.Time // last_ringed_at
	Retry     *time.Time // retry_at
	Backfill  bool       // whether 00002 gives it a next_ring_at
}

// NextRingCases returns the todos of the backfill test: every todo that is
// or may again be pending is backfilled; finished ones are not, and a spent
// ring budget backfills to NULL.
func NextRingCases() []NextRingCase {
	last, retry := Base.Add(10*time.Minute), Base.Add(time.Hour)
	return []NextRingCase{
		{"fresh", domain.TodoPending, 0, nil, nil, true},
		{"rung-twice", domain.TodoPending, 2, &last, nil, true},
		{"spent", domain.TodoPending, domain.MaxRings, &last, nil, true},
		{"claimed", domain.TodoClaimed, 1, &last, nil, true},
		{"retrying", domain.TodoFailed, 0, nil, &retry, true},
		{"done", domain.TodoDone, 1, &last, nil, false},
		{"dead", domain.TodoFailed, 0, nil, nil, false},
	}
}

// CheckNextRingBackfill checks s, opened on the migrated database, against
// cases: next_ring_at = domain.NextRingAt(Rings, Last or Base) for a
// backfilled todo, none otherwise; and agent "a" reads with the presence
// and liveness defaults (seen "in", state "unknown").
func CheckNextRingBackfill(t *testing.T, s store.Store, cases []NextRingCase) {
	t.Helper()
	ctx := t.Context()
	for _, c := range cases {
		got, err := s.GetTodo(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		var want *time.Time
		if c.Backfill {
			from := Base
			if c.Last != nil {
				from = *c.Last
			}
			if next, ok := domain.NextRingAt(c.Rings, from); ok {
				want = &next
			}
		}
		if (want == nil) != (got.NextRingAt == nil) || (want != nil && !want.Equal(*got.NextRingAt)) {
			t.Errorf("%s: next_ring_at = %v, want %v", c.ID, got.NextRingAt, want)
		}
	}
	a, err := s.GetAgent(ctx, store.AgentRef{ID: "a"})
	if err != nil || a.Presence.Seen != "in" || a.Liveness.State != "unknown" {
		t.Errorf("migrated agent: presence %+v liveness %+v, %v; want seen in, state unknown", a.Presence, a.Liveness, err)
	}
}

// UpDownUp migrates p up, down to version and up again: a migration test's
// round trip after it wrote its rows at version.
func UpDownUp(t *testing.T, p *goose.Provider, version int64) {
	t.Helper()
	ctx := t.Context()
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		t.Fatalf("down to %d: %v", version, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}

// MigrateTo migrates p up to version, the schema of an older release.
func MigrateTo(t *testing.T, p *goose.Provider, version int64) {
	t.Helper()
	if _, err := p.UpTo(t.Context(), version); err != nil {
		t.Fatalf("up to %d: %v", version, err)
	}
}
