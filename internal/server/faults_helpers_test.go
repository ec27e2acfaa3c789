package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus/pgbus"
	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/server"
	"github.com/rollcall/rollcall/internal/store/postgres"

	"github.com/rollcall/rollcall/internal/testkit"
)

// wait bounds every "eventually" of these tests; reaching it fails the
// test (it is not a timing assertion).
const wait = 20 * time.Second

// instance is one in-process `rollcall serve`.
type instance struct {
	srv   *server.Server
	base  string
	admin domain.Person
	token string
}

const adminToken = "rcp_faults-test-admin-token-000000000000000000000"

// startInstance opens and serves one server on the store URL, with the
// given extra environment (ROLLCALL_… = value), until the test ends.
func startInstance(t *testing.T, storeURL string, env ...string) *instance {
	t.Helper()
	return startInstanceWith(t, storeURL, server.Options{}, env...)
}

// startInstanceWith is startInstance with server options (its Log is the
// test log).
func startInstanceWith(t *testing.T, storeURL string, opts server.Options, env ...string) *instance {
	t.Helper()
	environ := append([]string{"ROLLCALL_STORE=" + storeURL, "ROLLCALL_LISTEN=127.0.0.1:0", "ROLLCALL_BOOTSTRAP_TOKEN=" + adminToken}, env...)
	cfg, err := config.Load(nil, environ)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opts.Log = testkit.Log()
	srv, err := server.Open(ctx, cfg, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait):
			t.Error("server did not shut down")
		}
	})
	in := &instance{srv: srv, base: srv.URL, token: adminToken}
	if in.admin, err = srv.Service.AuthenticatePerson(context.Background(), adminToken); err != nil {
		t.Fatal(err)
	}
	return in
}

// readyz returns the status of GET /readyz.
func (in *instance) readyz(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(in.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// eventually polls cond until it holds, failing after wait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, what, wait, cond)
}

// agentSession is a real mcp-go client on one MCP session with its GET
// stream open.
type agentSession struct {
	*testkit.Session
	id string
}

func openSession(t *testing.T, in *instance, agentID, cred string) *agentSession {
	t.Helper()
	s := &agentSession{Session: testkit.OpenSession(t, in.base+"/mcp", cred, "faults", nil)}
	s.id = s.Client().GetSessionId()
	eventually(t, "the session's GET stream is open", func() bool {
		for _, si := range in.srv.MCP.AgentSessions(agentID) {
			if si.ID == s.id && si.Streaming {
				return true
			}
		}
		return false
	})
	return s
}

// next returns the next channel notification's meta. A reconnect digest
// is skipped: the stream's opening may race the test's first push.
func (s *agentSession) next(what string) map[string]string {
	for {
		m := s.Next(what, wait).Meta
		if m["kind"] != "digest" || m["reason"] != "reconnect" {
			return m
		}
	}
}

func vend(t *testing.T, in *instance, handle string) app.VendResult {
	t.Helper()
	res, err := in.srv.Service.Vend(context.Background(), in.admin, app.VendInput{Handle: handle, Queues: []string{"q1"}, Verbs: domain.ScopeVerbs})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func push(t *testing.T, in *instance, handle, title string) domain.Todo {
	t.Helper()
	td, created, err := in.srv.Service.PushTodo(context.Background(), in.admin, handle, app.PushInput{Queue: "q1", Title: title})
	if err != nil || !created {
		t.Fatalf("PushTodo: %v %v", created, err)
	}
	return td
}

// pair is two instances A and B sharing a fresh PostgreSQL database, as
// the listener-outage tests start them.
type pair struct {
	a, b           *instance
	shared, dbName string
	bbus           *pgbus.Bus
}

func startPair(t *testing.T) *pair {
	t.Helper()
	shared := pgtest.AdminURL(t)
	dbURL := pgtest.WithDatabase(t, shared, pgtest.CreateDatabase(t, shared))
	u, _ := url.Parse(dbURL)
	p := &pair{shared: shared, dbName: strings.TrimPrefix(u.Path, "/"), a: startInstance(t, dbURL), b: startInstance(t, dbURL)}
	p.bbus = p.b.srv.Bus.(*pgbus.Bus)
	return p
}

// warm makes each instance's connection pool hold n open connections: the
// outage refuses new connections only, so what the test and the instances'
// own loops do meanwhile must find one open (without it an instance that
// happened to hold two dialed a third and failed).
func (p *pair) warm(t *testing.T, n int) {
	t.Helper()
	for _, in := range []*instance{p.a, p.b} {
		pool := in.srv.Store.(*postgres.Store).Pool()
		conns := make([]*pgxpool.Conn, 0, n)
		for range n {
			c, err := pool.Acquire(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for _, c := range conns {
			c.Release()
		}
	}
}

// listenerOutage closes the database to new connections, terminates B's
// LISTEN connection and waits until B notices, runs act, then reopens the
// database (also when act fails the test) and waits until B listens again.
// It returns when the database was reopened.
func (p *pair) listenerOutage(t *testing.T, act func()) (reopenedAt time.Time) {
	t.Helper()
	p.warm(t, 8)
	pgtest.Exec(t, p.shared, "ALTER DATABASE "+p.dbName+" ALLOW_CONNECTIONS false")
	reopened := false
	reopen := func() {
		if !reopened {
			reopened = true
			pgtest.Exec(t, p.shared, "ALTER DATABASE "+p.dbName+" ALLOW_CONNECTIONS true")
			reopenedAt = time.Now()
		}
	}
	defer reopen()
	pid := p.bbus.ListenerPID()
	if pid == 0 {
		t.Fatal("B has no listener")
	}
	pgtest.Exec(t, p.shared, "SELECT pg_terminate_backend($1)", int32(pid))
	eventually(t, "B notices its listener is gone", func() bool { return p.bbus.Listening() != nil })
	act()
	reopen()
	eventually(t, "B's listener is back", func() bool { return p.bbus.Listening() == nil })
	return reopenedAt
}
