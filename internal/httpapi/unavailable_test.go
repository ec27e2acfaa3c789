package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store/postgres"
)

// A database outage answers 503 unavailable with Retry-After, on REST and
// for the errors a store returns while its database cannot be reached.

func TestUnavailableClassifiesStoreErrors(t *testing.T) {
	live := t.Context()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"net.OpError", live, fmt.Errorf("get agent: %w", refused), true},
		{"cut mid-answer", live, fmt.Errorf("list: %w", io.ErrUnexpectedEOF), true},
		{"connection exception 08006", live, fmt.Errorf("x: %w", &pgconn.PgError{Code: "08006"}), true},
		{"admin shutdown 57P01", live, &pgconn.PgError{Code: "57P01"}, true},
		{"cannot connect now 57P03", live, &pgconn.PgError{Code: "57P03"}, true},
		{"too many connections", live, &pgconn.PgError{Code: "53300"}, true},
		{"unique violation", live, &pgconn.PgError{Code: "23505"}, false},
		{"sqlite busy", live, fmt.Errorf("write: %w", liteErr(5)), true},
		{"sqlite busy snapshot", live, liteErr(5 | 2<<8), true},
		{"sqlite corrupt", live, liteErr(11), false},
		{"acquire deadline, request live", live, fmt.Errorf("acquire: %w", context.DeadlineExceeded), true},
		{"deadline of the request itself", done, context.DeadlineExceeded, false},
		{"client went away", live, context.Canceled, false},
		{"not found", live, domain.ErrNotFound, false},
		{"anything else", live, errors.New("boom"), false},
		{"nil", live, nil, false},
	} {
		if got := httpapi.Unavailable(c.ctx, c.err); got != c.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// liteErr has the shape of modernc.org/sqlite's *Error (Code() int).
type liteErr int

func (e liteErr) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e liteErr) Code() int     { return int(e) }

// TestDatabaseOutageAnswers503: a PostgreSQL store reached through a TCP
// relay; the relay is shut (listener and connections), so the database is
// unreachable: a push, a list and an authentication answer 503 with
// Retry-After, and the cause stays in the log.
func TestDatabaseOutageAnswers503(t *testing.T) {
	dbURL := pgtest.FreshDatabase(t)
	u, _ := url.Parse(dbURL)
	relay := newRelay(t, u.Host)
	u.Host = relay.addr
	st, err := postgres.Open(t.Context(), u.String()+"&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	svc := app.New(app.Options{Store: st, Clock: clockwork.NewFakeClockAt(time.Date(2026, 3, 2, 9, 30, 0, 0, time.UTC)),
		Log: slog.New(slog.DiscardHandler)})
	t.Cleanup(svc.Close)
	token, _, err := svc.Bootstrap(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, httpapi.Options{Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	e := &env{admin: token, spec: loadSpec(t)}
	do := func(method, path, body string) response {
		return doRaw(t, e, srv.URL, method, path, token, body)
	}
	if r := do("POST", "/v1/agents", `{"handle":"builder","queues":["q"]}`); r.status != 201 {
		t.Fatalf("vend while the database is up: %d %s", r.status, r.body)
	}
	relay.shut()
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/agents/builder/todos", `{"queue":"q","title":"during the outage"}`},
		{"GET", "/v1/agents", ""},
	} {
		r := do(c.method, c.path, c.body)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "5" {
			t.Fatalf("%s %s during the outage: %d Retry-After %q %s", c.method, c.path, r.status, r.header.Get("Retry-After"), r.body)
		}
		p := r.problem(t)
		if p.Code != "unavailable" || p.Type != httpapi.ProblemTypePrefix+"unavailable" || !strings.Contains(p.Detail, "retry after 5 s") ||
			strings.Contains(string(r.body), "127.0.0.1") {
			t.Fatalf("%s %s: problem %+v", c.method, c.path, p)
		}
	}
}

// doRaw sends one request to base and checks the answer against the spec.
func doRaw(t *testing.T, e *env, base, method, path, token, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	return e.roundTrip(t, hr)
}

// relay forwards TCP connections to target until shut.
type relay struct {
	addr  string
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{addr: ln.Addr().String(), ln: ln}
	t.Cleanup(r.shut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return r
}

// shut closes the listener (new connections are refused) and every relayed
// connection (the open ones are cut).
func (r *relay) shut() {
	_ = r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
}
