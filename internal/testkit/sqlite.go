package testkit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rollcall/rollcall/internal/store/sqlite"
)

// OpenSQLite opens a fresh SQLite store in tb's temp dir, closed when tb
// ends.
func OpenSQLite(tb testing.TB) *sqlite.Store {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "r.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}
