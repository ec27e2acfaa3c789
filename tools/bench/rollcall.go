package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// benchAdminToken is the bootstrap admin token of every Rollcall the harness
// starts (each on a fresh store, on loopback).
const benchAdminToken = "rcp_bench-admin-token-0123456789abcdef0123456789abcd"

// buildRollcall builds ./cmd/rollcall of the repository at root into dir,
// the binary users run.
func buildRollcall(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "rollcall")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/rollcall")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building rollcall: %w", err)
	}
	return bin, nil
}

// rollcall is one fresh `rollcall serve` on loopback.
type rollcall struct {
	*harness.Proc
	url    string
	dir    string
	dropDB func()
	http   *http.Client
}

// startRollcall starts bin on a fresh store: a new SQLite file when pgURL is
// "", else a new database created on the PostgreSQL server of pgURL (dropped
// again by stop).
func startRollcall(ctx context.Context, bin, pgURL string, logw io.Writer) (*rollcall, error) {
	dir, err := os.MkdirTemp("", "rollcall-bench")
	if err != nil {
		return nil, err
	}
	r := &rollcall{dir: dir, dropDB: func() {}, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	store := "sqlite:" + filepath.Join(dir, "bench.db")
	if pgURL != "" {
		u, drop, err := freshDatabase(ctx, pgURL, "rollcall_bench")
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		store, r.dropDB = u, drop
	}
	// No per-address connection cap: the idle workloads open thousands of
	// connections from four loopback addresses, and the cap (256 by
	// default) is there for stalling clients, not for this.
	args := []string{"serve", "--listen", "127.0.0.1:0", "--store", store, "--log.level", "warn", "--http.max_conns_per_client", "0"}
	s, u, err := harness.Start(ctx, bin, args, []string{"ROLLCALL_BOOTSTRAP_TOKEN=" + benchAdminToken}, logw, harness.ListeningRE, 60*time.Second)
	if err != nil {
		r.dropDB()
		os.RemoveAll(dir)
		return nil, err
	}
	r.Proc, r.url = s, u
	return r, nil
}

func (r *rollcall) stop() {
	r.Stop(stopGrace)
	r.http.CloseIdleConnections()
	r.dropDB()
	os.RemoveAll(r.dir)
}

// rest calls the REST API as the admin (harness.DoJSON).
func (r *rollcall) rest(ctx context.Context, method, path string, body, into any) error {
	return harness.DoJSON(ctx, r.http, r.url, benchAdminToken, method, path, body, into)
}

// agent is a vended agent: its handle, credential and MCP URL.
type agent = harness.Vended

// vend creates an agent with queue "q" and the work verbs (REST, as the CLI
// does).
func (r *rollcall) vend(ctx context.Context, handle string) (agent, error) {
	return harness.Vend(ctx, r.http, r.url, benchAdminToken, handle, []string{"q"})
}

// vendMany vends n agents named prefix-0 … prefix-(n-1), 8 at a time.
func (r *rollcall) vendMany(ctx context.Context, prefix string, n int) ([]agent, error) {
	as := make([]agent, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range as {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			as[i], errs[i] = r.vend(ctx, fmt.Sprintf("%s-%d", prefix, i))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return as, nil
}

// push creates a todo for handle in queue "q" (REST) and returns its id.
func (r *rollcall) push(ctx context.Context, handle, title string) (string, error) {
	var td struct {
		ID string `json:"id"`
	}
	err := r.rest(ctx, "POST", "/v1/agents/"+url.PathEscape(handle)+"/todos", map[string]any{"queue": "q", "title": title}, &td)
	return td.ID, err
}

// clientLog is the MCP clients' logger: silent unless -v (each closed
// stream logs an error at the end of a run; a failure that matters surfaces
// as the workload's error).
var clientLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// mcpSession is one mcp-go client session (mcp-go's LATEST_LEGACY_PROTOCOL_VERSION) with its
// GET notification stream open, as Claude Code holds it.
type mcpSession struct {
	c *mcpclient.Client
}

// openMCP initializes a session for a through hc (harness.DialMCPVia);
// onDoorbell, when set, receives the todo_id of every doorbell and the time
// it was read.
func openMCP(ctx context.Context, hc *http.Client, a agent, onDoorbell func(todoID string, at time.Time)) (*mcpSession, error) {
	var onBell func(harness.Bell)
	if onDoorbell != nil {
		onBell = func(b harness.Bell) { onDoorbell(b.TodoID(), b.Read) }
	}
	c, _, err := harness.DialMCPVia(ctx, hc, clientLog, a.MCPURL, a.Credential, "rollcall-bench", onBell)
	if err != nil {
		return nil, err
	}
	return &mcpSession{c: c}, nil
}

func (s *mcpSession) close() { s.c.Close() }

// call calls tool with args and returns the result's text; a tool error
// (isError) is returned as toolErr with its text.
func (s *mcpSession) call(ctx context.Context, tool string, args map[string]any) (string, error) {
	res, err := s.c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		return "", err
	}
	var text string
	for _, c := range res.Content {
		if t, ok := c.(mcp.TextContent); ok {
			text += t.Text
		}
	}
	if res.IsError {
		return "", toolErr(text)
	}
	return text, nil
}

type toolErr string

func (e toolErr) Error() string { return "tool error: " + string(e) }

// notFound reports a tool error of code not_found (claim_next on an empty
// queue).
func notFound(err error) bool {
	te, ok := err.(toolErr)
	return ok && strings.Contains(string(te), `"not_found"`)
}

// freshDatabase creates a new database on the server of base and returns
// its URL and a function that drops it.
func freshDatabase(ctx context.Context, base, prefix string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, nil
}
