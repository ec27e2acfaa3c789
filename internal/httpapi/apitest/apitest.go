// Package apitest starts the real REST stack for tests: a SQLite store in a
// temporary file, app.Service on a fake clock, httpapi.New behind an
// httptest.Server, and a bootstrap admin token. The httpapi, client and cli
// tests share it, so all of them run against the same real stack (no mock
// store).
//
//	env := apitest.New(t)
//	c := client.New(env.URL, env.AdminToken)
package apitest

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/httpapi"
	"github.com/rollcall/rollcall/internal/store/sqlite"
)

// Env is one running stack. Everything is closed by t.Cleanup.
type Env struct {
	URL        string // base URL of the server, e.g. http://127.0.0.1:41234
	Server     *httptest.Server
	Service    *app.Service
	Store      *sqlite.Store
	Clock      *clockwork.FakeClock
	DBPath     string
	AdminToken string // the bootstrap admin's person token
}

// New starts a stack. Logs go nowhere unless testing.Verbose().
func New(t testing.TB) *Env {
	t.Helper()
	ctx := t.Context()
	dbPath := filepath.Join(t.TempDir(), "r.db")
	st, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		w := &testWriter{t: t}
		t.Cleanup(w.close) // runs after the service stopped (cleanups run last-in first-out)
		log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC))
	svc := app.New(app.Options{Store: st, Clock: clock, Log: log})
	// Stop the tracker's writers and background work before the store
	// closes, so nothing of this test writes or logs after it ended.
	t.Cleanup(func() {
		_ = svc.StopLiveness(context.Background())
		svc.Close()
	})
	token, created, err := svc.Bootstrap(ctx, "")
	if err != nil || !created {
		t.Fatalf("Bootstrap = %v, %v", created, err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Log: log}))
	t.Cleanup(srv.Close)
	svc.SetPublicURL(srv.URL)
	return &Env{URL: srv.URL, Server: srv, Service: svc, Store: st, Clock: clock, DBPath: dbPath, AdminToken: token}
}

// AddPerson creates a member through the use case (as the bootstrap admin)
// and returns its first token.
func (e *Env) AddPerson(t testing.TB, name string) string {
	t.Helper()
	admin, err := e.Service.AuthenticatePerson(t.Context(), e.AdminToken)
	if err != nil {
		t.Fatalf("AuthenticatePerson(admin): %v", err)
	}
	res, err := e.Service.CreatePerson(t.Context(), admin, app.PersonInput{Name: name, Role: "member"})
	if err != nil {
		t.Fatalf("CreatePerson(%s): %v", name, err)
	}
	return res.Token.Token
}

// Exec runs one SQL statement on the database file behind the store's back
// (to break it on purpose, or to create what the port cannot).
func (e *Env) Exec(t testing.TB, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.DBPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatalf("open %s: %v", e.DBPath, err)
	}
	defer func() { _ = db.Close() }()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// testWriter sends log lines to t.Log until the test's cleanup closes it;
// t.Log after the test ended panics.
type testWriter struct {
	mu     sync.Mutex
	t      testing.TB
	closed bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.t.Log(string(p))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
