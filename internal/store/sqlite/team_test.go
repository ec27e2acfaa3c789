package sqlite

import (
	"testing"

	"github.com/rollcall/rollcall/internal/store/storetest"
)

// TestMigrationMovesPersonTokens applies 00003 to a database whose persons
// hold one token each: the token becomes the person's "bootstrap" token,
// the person keeps its role; down restores the column, up again works.
func TestMigrationMovesPersonTokens(t *testing.T) {
	ctx := t.Context()
	db, p, _ := oldDatabase(t, 2)
	at := micros(storetest.Base)
	if _, err := db.ExecContext(ctx, `INSERT INTO persons (id, name, admin, token_hash, created_at) VALUES
		('p1', 'root', 1, 'h1', ?1), ('p2', 'bob', 0, 'h2', ?1)`, at); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	var person, name string
	var admin bool
	var updated int64
	err := db.QueryRowContext(ctx, `SELECT t.person_id, t.name, p.admin, p.updated_at FROM person_tokens t
		JOIN persons p ON p.id = t.person_id WHERE t.hash = 'h2' AND t.revoked_at IS NULL`).Scan(&person, &name, &admin, &updated)
	if err != nil || person != "p2" || name != "bootstrap" || admin || updated != at {
		t.Fatalf("after up: %s %s admin=%v updated=%d err=%v", person, name, admin, updated, err)
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
