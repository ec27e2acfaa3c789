package storetest

import (
	"context"
	"database/sql"
	"io/fs"
	"testing"

	"github.com/pressly/goose/v3"
)

// Helpers for an adapter's own tests (beside the contract suite): opening
// the adapter under test and writing rows of an older schema.

// OpenT opens the adapter at where with open (the adapter's Open) on tb's
// context and closes it in tb.Cleanup; a failed open ends the test.
func OpenT[S interface{ Close() error }](tb testing.TB, open func(context.Context, string) (S, error), where string) S {
	tb.Helper()
	s, err := open(tb.Context(), where)
	if err != nil {
		tb.Fatalf("Open(%s): %v", where, err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// Exec returns a function that runs a statement on db, ending the test on
// its error: what a migration test writes its older rows with.
func Exec(t *testing.T, db *sql.DB) func(q string, args ...any) {
	return func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// Unmigrated opens the database dsn with driver and a goose provider of
// migrations in dialect on it, for the migration tests; t.Cleanup closes
// the handle. A failure ends the test.
func Unmigrated(t *testing.T, driver, dsn string, dialect goose.Dialect, migrations fs.FS) (*sql.DB, *goose.Provider) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	p, err := goose.NewProvider(dialect, db, migrations)
	if err != nil {
		t.Fatal(err)
	}
	return db, p
}
