package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/server"

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
	environ := append([]string{"ROLLCALL_STORE=" + storeURL, "ROLLCALL_LISTEN=127.0.0.1:0", "ROLLCALL_BOOTSTRAP_TOKEN=" + adminToken}, env...)
	cfg, err := config.Load(nil, environ)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Open(ctx, cfg, server.Options{Log: log})
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

// throwawayCluster starts a PostgreSQL cluster of its own (never the shared
// one) from the Debian binaries, on a free loopback port, and returns its
// URL and stop/start controls. Skipped when the binaries are missing.
type cluster struct {
	t       *testing.T
	bin     string
	dir     string
	port    int
	URL     string
	asPG    []string
	stopped bool
}

func throwawayCluster(t *testing.T) *cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		if os.Getenv("ROLLCALL_REQUIRE_POSTGRES") == "1" {
			t.Fatal("no PostgreSQL binaries (/usr/lib/postgresql/*/bin) for a throwaway cluster")
		}
		t.Skip("no PostgreSQL binaries for a throwaway cluster")
	}
	sort.Strings(bins)
	c := &cluster{t: t, bin: filepath.Dir(bins[len(bins)-1])}
	dir, err := os.MkdirTemp("", "rollcall-doorbell-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	if os.Getuid() == 0 {
		if err := exec.Command("chown", "postgres", dir).Run(); err != nil {
			t.Fatal(err)
		}
		c.asPG = []string{"runuser", "-u", "postgres", "--"}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c.run("initdb", "-A", "trust", "-U", "postgres", "-D", filepath.Join(dir, "data"))
	c.Start()
	t.Cleanup(func() {
		_ = c.cmd("pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "stop").Run()
		os.RemoveAll(dir)
	})
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	return c
}

func (c *cluster) cmd(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, c.asPG...), filepath.Join(c.bin, name)), args...)
	return exec.Command(argv[0], argv[1:]...)
}

func (c *cluster) run(name string, args ...string) {
	c.t.Helper()
	if out, err := c.cmd(name, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// Start starts (or restarts) the cluster and waits until it accepts
// connections.
func (c *cluster) Start() {
	c.t.Helper()
	c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-l", filepath.Join(c.dir, "pg.log"), "-w",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=100", c.port, c.dir), "start")
	c.stopped = false
}

// Stop stops the cluster (fast shutdown: every backend is terminated).
func (c *cluster) Stop() {
	c.t.Helper()
	c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "stop")
	c.stopped = true
}
