package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/testkit"
)

// tsEvent is one line the TypeScript client prints.
type tsEvent struct {
	Event        string          `json:"event"`
	ID           *int            `json:"id"`
	Session      string          `json:"session"`
	Protocol     string          `json:"protocol"`
	Server       json.RawMessage `json:"server"`
	Capabilities json.RawMessage `json:"capabilities"`
	Instructions string          `json:"instructions"`
	Tools        []string        `json:"tools"`
	Method       string          `json:"method"`
	Params       struct {
		Content string            `json:"content"`
		Meta    map[string]string `json:"meta"`
	} `json:"params"`
	Result  json.RawMessage `json:"result"`
	Message string          `json:"message"`
	URL     string          `json:"url"`      // authorize (--oauth)
	Iss     string          `json:"iss"`      // callback (--oauth)
	StateOK bool            `json:"state_ok"` // callback (--oauth)
}

// tsClient drives e2e/tsclient/client.mjs (the official MCP TypeScript SDK).
type tsClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan tsEvent
	nextID int

	mu            sync.Mutex
	notifications []tsEvent
	stderr        []byte
}

// startTSClient runs the client and waits for its session; extra are its
// flags (--cycles=N).
func startTSClient(t *testing.T, mcpURL, token string, extra ...string) (*tsClient, tsEvent) {
	t.Helper()
	c := launchTSClient(t, mcpURL, token, extra...)
	return c, c.next("ready")
}

// launchTSClient runs the client without waiting for anything.
func launchTSClient(t *testing.T, mcpURL, token string, extra ...string) *tsClient {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is required for the TypeScript MCP client test")
	}
	script, _ := filepath.Abs("tsclient/client.mjs")
	if _, err := os.Stat("tsclient/node_modules/@modelcontextprotocol/sdk"); err != nil {
		t.Fatal("run `npm ci` in e2e/tsclient first (scripts/test.sh does)")
	}
	cmd := exec.Command("node", append([]string{script, mcpURL, token}, extra...)...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	c := &tsClient{t: t, cmd: cmd, stdin: stdin, events: make(chan tsEvent, 100)}
	cmd.Stderr = testkit.WriterFunc(func(p []byte) { c.mu.Lock(); c.stderr = append(c.stderr, p...); c.mu.Unlock() })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev tsEvent
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				continue
			}
			if ev.Event == "notification" {
				c.mu.Lock()
				c.notifications = append(c.notifications, ev)
				c.mu.Unlock()
			}
			c.events <- ev
		}
		close(c.events)
	}()
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(wait):
			cmd.Process.Kill()
		}
		if t.Failed() {
			c.mu.Lock()
			t.Logf("ts client stderr:\n%s", c.stderr)
			c.mu.Unlock()
		}
	})
	return c
}

// next returns the next event of the given kind, skipping others.
func (c *tsClient) next(kind string) tsEvent {
	c.t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				c.t.Fatalf("ts client exited while waiting for %q", kind)
			}
			if ev.Event == kind {
				return ev
			}
			if ev.Event == "error" && kind != "error" {
				c.t.Fatalf("ts client error while waiting for %q: %s", kind, ev.Message)
			}
		case <-deadline:
			c.t.Fatalf("no %q event from the ts client within %s", kind, wait)
		}
	}
}

// call calls a tool and returns its result JSON.
func (c *tsClient) call(name string, args any) json.RawMessage {
	c.t.Helper()
	c.nextID++
	b, _ := json.Marshal(map[string]any{"id": c.nextID, "cmd": "call", "name": name, "args": args})
	c.stdin.Write(append(b, '\n'))
	for {
		ev := c.next("result")
		if ev.ID != nil && *ev.ID == c.nextID {
			return ev.Result
		}
	}
}

// close ends the session (DELETE) and waits for the client to exit.
func (c *tsClient) close() {
	c.t.Helper()
	io.WriteString(c.stdin, `{"cmd":"close"}`+"\n")
	c.next("closed")
}

// channelNotifications returns every notifications/claude/channel seen.
func (c *tsClient) channelNotifications() []tsEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]tsEvent(nil), c.notifications...)
}

// TestE2ETypeScriptRESTClient runs the tests of the public TypeScript REST
// client (clients/typescript, generated from api/openapi.yaml) against the
// real binary on SQLite with the bootstrapped admin token: vend, push and
// list todos, paging, and RFC 9457 problems read through the generated
// types. Like the MCP TypeScript SDK tests it fails, never skips, when node
// or the client's node_modules are missing (scripts/test.sh runs npm ci).
func TestE2ETypeScriptRESTClient(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is required for the TypeScript REST client test")
	}
	const dir = "../clients/typescript"
	if _, err := os.Stat(dir + "/node_modules/tsx"); err != nil {
		t.Fatal("run `npm ci` in clients/typescript first (scripts/test.sh does)")
	}
	srv := startSQLite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "test", "--silent")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ROLLCALL_URL="+srv.URL, "ROLLCALL_TOKEN="+adminToken)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test in clients/typescript: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
