package storetest

import (
	"database/sql"
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

// CheckPersonTokensMigration runs migration 00003 on db, which is at
// version 2 and holds persons p1 (admin, token_hash h1) and p2 (member,
// h2): up moves each person's token into person_tokens as its "bootstrap"
// token and keeps the role; afterUp, when not nil, checks more at that
// point; down restores persons.token_hash; up again works.
func CheckPersonTokensMigration(t *testing.T, db *sql.DB, p *goose.Provider, afterUp func(t *testing.T)) {
	t.Helper()
	ctx := t.Context()
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	var person, name string
	var admin bool
	err := db.QueryRowContext(ctx, `SELECT t.person_id, t.name, p.admin FROM person_tokens t
		JOIN persons p ON p.id = t.person_id WHERE t.hash = 'h2' AND t.revoked_at IS NULL`).Scan(&person, &name, &admin)
	if err != nil || person != "p2" || name != "bootstrap" || admin {
		t.Fatalf("after up: %s %s admin=%v err=%v", person, name, admin, err)
	}
	if afterUp != nil {
		afterUp(t)
	}
	if _, err := p.DownTo(ctx, 2); err != nil {
		t.Fatalf("down to 2: %v", err)
	}
	var hash string
	if err := db.QueryRowContext(ctx, `SELECT token_hash FROM persons WHERE id = 'p1'`).Scan(&hash); err != nil || hash != "h1" {
		t.Fatalf("after down: %q %v", hash, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
