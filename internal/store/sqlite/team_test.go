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
	storetest.CheckPersonTokensMigration(t, db, p, func(t *testing.T) {
		var updated int64
		if err := db.QueryRowContext(ctx, `SELECT updated_at FROM persons WHERE id = 'p2'`).Scan(&updated); err != nil || updated != at {
			t.Fatalf("after up: updated_at = %d, %v; want %d", updated, err, at)
		}
	})
}
