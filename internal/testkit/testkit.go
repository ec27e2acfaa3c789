// Package testkit drives the real rollcall binary from the outside for the
// end-to-end tests (e2e) and the fault suite (e2e/fault): it builds the
// binary (build.go), runs `rollcall serve` processes and waits for the URL
// they print (server.go), calls the REST API with a bearer token (rest.go), opens
// mcp-go sessions that record their doorbells (mcp.go), records the
// operator event stream (events.go), identifies on the gateway
// (gateway.go), starts a throwaway PostgreSQL
// cluster (cluster.go) and makes a private CA with a server certificate
// for TLS tests (tls.go); this file holds the bound and the poll they
// share. Only tests import it: those above and the in-process tests of
// internal/server, internal/claudecode and internal/cli.
package testkit

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Wait bounds everything this package waits for (a server's start and
// stop, a REST request, a session's set-up); reaching it fails the test,
// it is not a timing assertion.
const Wait = 30 * time.Second

// WriterFunc is an io.Writer calling itself with every write.
type WriterFunc func(p []byte)

func (f WriterFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// Eventually polls ok every 20 ms until it holds and returns when it
// first did; it fails the test after d.
func Eventually(t testing.TB, what string, d time.Duration, ok func() bool) time.Time {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond) // polling an observable state
	}
	return time.Now()
}

// SyncBuffer is a log sink safe for concurrent writes.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Log is the logger of a server a test runs in its own process: silent,
// or everything to stderr under go test -v.
func Log() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// LooseTempDir is a temporary directory removed at cleanup on a best-effort
// basis, for a store that goroutines may still touch after the test (a
// SQLite -shm file recreated while t.TempDir's cleanup runs would fail it).
func LooseTempDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "rollcall-test-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}
