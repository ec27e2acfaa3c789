// Package e2e holds the end-to-end tests: they build the real rollcall
// binary, start it as a process, drive it with its own CLI, and connect real
// MCP clients — the official MCP TypeScript SDK (run by node, e2e/tsclient)
// and mcp-go's Go client.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/testkit"
)

var binPath string

func TestMain(m *testing.M) {
	bin, remove, err := testkit.BuildRollcall(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binPath = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// wait is the bound for anything the tests wait for; reaching it fails the
// test (it is not a timing assertion).
const wait = testkit.Wait

const adminToken = "rcp_e2e-admin-token-0123456789abcdef0123456789ab"

// bootstrapEnv makes adminToken the first admin's token of a fresh store.
var bootstrapEnv = []string{"ROLLCALL_BOOTSTRAP_TOKEN=" + adminToken}

var allVerbs = testkit.WorkVerbs

// server is one running `rollcall serve` process.
type server = testkit.Server

// startServer runs `rollcall serve --listen 127.0.0.1:0 <args>` and waits for
// its URL line. The process is stopped with SIGTERM at cleanup.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return testkit.StartServer(t, binPath, "rollcall", env, args...)
}

// startSQLite starts a server on a fresh SQLite file with the admin token
// bootstrapped; args follow the store flag.
func startSQLite(t *testing.T, args ...string) *server {
	t.Helper()
	return startServer(t, bootstrapEnv, append([]string{"--store", "sqlite:" + filepath.Join(t.TempDir(), "rollcall.db")}, args...)...)
}

// cli runs the rollcall CLI against srv with the admin token and returns
// stdout; a non-zero exit fails the test.
func cli(t *testing.T, srv *server, args ...string) string {
	t.Helper()
	out, err := cliResult(srv, args...)
	if err != nil {
		t.Fatalf("rollcall %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func cliResult(srv *server, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = append(os.Environ(), "ROLLCALL_SERVER="+srv.URL, "ROLLCALL_TOKEN="+adminToken)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// vendResult is the JSON `rollcall agent vend --json` prints.
type vendResult = testkit.Vended

func vend(t *testing.T, srv *server, handle string, queues, verbs []string) vendResult {
	t.Helper()
	args := []string{"agent", "vend", "--handle", handle, "--json"}
	for _, q := range queues {
		args = append(args, "--queue", q)
	}
	for _, v := range verbs {
		args = append(args, "--verb", v)
	}
	var v vendResult
	out := cli(t, srv, args...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("vend output is not JSON: %v\n%s", err, out)
	}
	return v
}

// callTool calls an MCP tool on the session, bounded by wait, and fails t
// on a transport or tool error.
func callTool(t *testing.T, s *testkit.Session, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	r, err := s.Client().CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if r.IsError {
		t.Fatalf("%s returned a tool error: %+v", name, r.Content)
	}
	return r
}

// restGet GETs a path with the admin token and decodes the JSON body.
func restGet(t *testing.T, srv *server, path string, into any) int {
	t.Helper()
	code, err := testkit.REST(srv.URL, adminToken, "GET", path, nil, into)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return code
}

// restDo sends a JSON request with the admin token and decodes a JSON
// answer into into (when not nil); a failed request fails the test.
func restDo(t *testing.T, srv *server, method, path string, body, into any) int {
	t.Helper()
	code, err := testkit.REST(srv.URL, adminToken, method, path, body, into)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code
}

// waitFor polls ok until it holds, failing the test after wait.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	testkit.Eventually(t, what, wait, ok)
}
