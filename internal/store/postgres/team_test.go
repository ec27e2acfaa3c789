package postgres

import (
	"testing"

	"github.com/rollcall/rollcall/internal/store/storetest"
)

// TestMigrationMovesPersonTokens applies 00003 to a database whose persons
// hold one token each: the token becomes the person's "bootstrap" token;
// down restores the column, up again works.
func TestMigrationMovesPersonTokens(t *testing.T) {
	ctx := t.Context()
	db, p, _ := oldDatabase(t, 2)
	if _, err := db.ExecContext(ctx, `INSERT INTO persons (id, name, admin, token_hash, created_at) VALUES
		('p1', 'root', true, 'h1', $1), ('p2', 'bob', false, 'h2', $1)`, storetest.Base); err != nil {
		t.Fatal(err)
	}
	storetest.CheckPersonTokensMigration(t, db, p, nil)
}
