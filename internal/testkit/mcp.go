package testkit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// Bell is one doorbell a session received: the notification's meta and
// when the test read it.
type Bell = harness.Bell

// DialMCP opens an mcp-go session on mcpURL with the default HTTP client
// (harness.DialMCPVia).
func DialMCP(ctx context.Context, mcpURL, cred, name string, onBell func(Bell)) (*mcpclient.Client, *mcp.InitializeResult, error) {
	return harness.DialMCPVia(ctx, nil, nil, mcpURL, cred, name, onBell)
}

// Session is an mcp-go session (DialMCP) that records its doorbells in
// the order they came.
type Session struct {
	Server mcp.Implementation // the serverInfo of initialize

	t      testing.TB
	client atomic.Pointer[mcpclient.Client]

	mu      sync.Mutex
	bells   []Bell
	read    int           // how many bells Next has returned
	arrived chan struct{} // a signal per bell, capacity 1
}

// OpenSession opens a Session as client name, closed at cleanup; onBell,
// when not nil, is called with every doorbell after it was recorded.
func OpenSession(t testing.TB, mcpURL, cred, name string, onBell func(*Session, Bell)) *Session {
	t.Helper()
	s := &Session{t: t, arrived: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	c, init, err := DialMCP(ctx, mcpURL, cred, name, func(b Bell) {
		s.mu.Lock()
		s.bells = append(s.bells, b)
		s.mu.Unlock()
		select {
		case s.arrived <- struct{}{}:
		default:
		}
		if onBell != nil {
			onBell(s, b)
		}
	})
	if err != nil {
		t.Fatalf("MCP session on %s: %v", mcpURL, err)
	}
	s.client.Store(c)
	s.Server = init.ServerInfo
	t.Cleanup(func() { c.Close() })
	return s
}

// Client is the session's mcp-go client (nil while OpenSession runs).
func (s *Session) Client() *mcpclient.Client { return s.client.Load() }

// Next returns the oldest doorbell Next has not returned yet, waiting up
// to d for it; it fails the test after d.
func (s *Session) Next(what string, d time.Duration) Bell {
	s.t.Helper()
	deadline := time.After(d)
	for {
		s.mu.Lock()
		if s.read < len(s.bells) {
			b := s.bells[s.read]
			s.read++
			s.mu.Unlock()
			return b
		}
		s.mu.Unlock()
		select {
		case <-s.arrived:
		case <-deadline:
			s.t.Fatalf("no doorbell (%s) within %s", what, d)
			return Bell{}
		}
	}
}

// Bells returns every doorbell so far.
func (s *Session) Bells() []Bell {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Bell(nil), s.bells...)
}

// Bell returns the first doorbell of todoID, waiting up to d for it.
func (s *Session) Bell(todoID string, d time.Duration) (Bell, bool) {
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		for _, b := range s.bells {
			if b.TodoID() == todoID {
				s.mu.Unlock()
				return b, true
			}
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			return Bell{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
