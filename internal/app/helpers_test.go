package app_test

import (
	"testing"

	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/testkit"
)

// openStore opens a fresh SQLite store in tb's temp dir, closed when tb ends.
func openStore(tb testing.TB) *sqlite.Store { return testkit.OpenSQLite(tb) }
