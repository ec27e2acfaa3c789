package testkit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
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

// OpenSQLiteLoose opens a fresh SQLite store in a LooseTempDir and returns
// it with its file's path. It is not closed at cleanup: goroutines the
// presence evaluator starts per bus signal may still read it, and
// sqlite.Store.Close is not safe against concurrent reads (it clears its
// handles). Such a goroutine may also recreate the -shm file while
// t.TempDir's cleanup runs, hence LooseTempDir.
func OpenSQLiteLoose(tb testing.TB) (*sqlite.Store, string) {
	tb.Helper()
	path := filepath.Join(LooseTempDir(tb), "r.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		tb.Fatal(err)
	}
	return st, path
}

// Bootstrapper is the part of an in-process *app.Service BootstrapAdmin
// uses (testkit does not import app).
type Bootstrapper interface {
	Bootstrap(ctx context.Context, token string) (string, bool, error)
	AuthenticatePerson(ctx context.Context, token string) (domain.Person, error)
}

// BootstrapAdmin bootstraps the first admin on svc (design: Bootstrap
// admin) and returns them authenticated by their personal token, and the
// token; a failure fails tb.
func BootstrapAdmin(tb testing.TB, svc Bootstrapper) (domain.Person, string) {
	tb.Helper()
	tok, _, err := svc.Bootstrap(context.Background(), "")
	if err != nil {
		tb.Fatalf("bootstrap: %v", err)
	}
	admin, err := svc.AuthenticatePerson(context.Background(), tok)
	if err != nil {
		tb.Fatalf("authenticate the bootstrap admin: %v", err)
	}
	return admin, tok
}
