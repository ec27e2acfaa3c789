// Package e2e holds the end-to-end tests: they build the real rollcall
// binary, start it as a process, drive it with its own CLI, and connect real
// MCP clients — the official MCP TypeScript SDK (run by node, e2e/tsclient)
// and mcp-go's Go client.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rollcall-e2e-bin")
	if err != nil {
		panic(err)
	}
	binPath = filepath.Join(dir, "rollcall")
	args := []string{"build", "-o", binPath}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "../cmd/rollcall")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building rollcall failed:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// wait is the bound for anything the tests wait for; reaching it fails the
// test (it is not a timing assertion).
const wait = 20 * time.Second

const adminToken = "rcp_e2e-admin-token-0123456789abcdef0123456789ab"

// server is one running `rollcall serve` process.
type server struct {
	URL    string
	cmd    *exec.Cmd
	mu     sync.Mutex
	output strings.Builder
	done   chan struct{}
}

var listenRE = regexp.MustCompile(`rollcall listening on (http://\S+)`)

// startServer runs `rollcall serve --listen 127.0.0.1:0 <args>` and waits for
// its URL line. The process is stopped with SIGTERM at cleanup.
func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = writerFunc(func(p []byte) { s.mu.Lock(); s.output.Write(p); s.mu.Unlock() })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.output.WriteString(line + "\n")
			s.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				urlc <- m[1]
			}
		}
	}()
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(wait):
			cmd.Process.Kill()
			<-s.done
		}
		if t.Failed() {
			t.Logf("server output:\n%s", s.Output())
		}
	})
	select {
	case s.URL = <-urlc:
	case <-s.done:
		t.Fatalf("server exited before listening:\n%s", s.Output())
	case <-time.After(wait):
		t.Fatalf("server did not print its URL:\n%s", s.Output())
	}
	return s
}

// Output returns what the server printed so far.
func (s *server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

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
type vendResult struct {
	Agent struct {
		ID     string `json:"id"`
		Handle string `json:"handle"`
	} `json:"agent"`
	Credential   string `json:"credential"`
	MCPURL       string `json:"mcp_url"`
	ClaudeMCPAdd string `json:"claude_mcp_add"`
}

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

// restGet GETs a path with the admin token and decodes the JSON body.
func restGet(t *testing.T, srv *server, path string, into any) int {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, b)
		}
	}
	return resp.StatusCode
}
