package fault

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/testkit"
)

// ---- MCP sessions (mcp-go) ----

// session is one mcp-go client session with its GET stream open, in this
// process.
type session struct{ *testkit.Session }

func openSession(t *testing.T, srv *server, a vended) *session {
	t.Helper()
	return &session{testkit.OpenSession(t, srv.URL+"/mcp", a.Credential, "fault", nil)}
}

// openClaimingSession is a session whose client acts like a working agent:
// it claims every todo it is rung for (in the background).
func openClaimingSession(t *testing.T, srv *server, a vended) *session {
	t.Helper()
	return &session{testkit.OpenSession(t, srv.URL+"/mcp", a.Credential, "fault", func(s *testkit.Session, b testkit.Bell) {
		if c := s.Client(); c != nil && b.TodoID() != "" {
			go func() {
				cctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"todo_id": b.TodoID()}}})
			}()
		}
	})}
}

// bellWithin waits up to d for the doorbell of todoID.
func (s *session) bellWithin(d time.Duration, todoID string) (testkit.Bell, bool) {
	return s.Bell(todoID, d)
}

// missing waits up to d in all for the doorbells of ids and returns how
// many did not come.
func (s *session) missing(d time.Duration, ids []string) int {
	deadline := time.Now().Add(d)
	n := 0
	for _, id := range ids {
		if _, ok := s.Bell(id, time.Until(deadline)); !ok {
			n++
		}
	}
	return n
}

// ---- an MCP client in a child process (to freeze and kill) ----

const childEnv = "ROLLCALL_FAULT_CHILD"

// childMain is this test binary re-executed as an MCP client: it opens one
// session on $ROLLCALL_FAULT_URL with $ROLLCALL_FAULT_TOKEN, prints "ready"
// and then "doorbell <todo_id>" per channel notification, until killed.
func childMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	var mu sync.Mutex
	_, _, err := testkit.DialMCP(ctx, os.Getenv("ROLLCALL_FAULT_URL"), os.Getenv("ROLLCALL_FAULT_TOKEN"), "fault", func(b testkit.Bell) {
		mu.Lock()
		fmt.Printf("doorbell %s\n", b.TodoID())
		mu.Unlock()
	})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	mu.Lock()
	fmt.Println("ready")
	mu.Unlock()
	select {}
}

// child is an MCP client process.
type child struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	seen []string // todo ids it printed
	done chan struct{}
}

func startChild(t *testing.T, srv *server, a vended) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=mcp", "ROLLCALL_FAULT_URL="+srv.URL+"/mcp", "ROLLCALL_FAULT_TOKEN="+a.Credential)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	readyc := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "ready":
				close(readyc)
			case strings.HasPrefix(line, "doorbell "):
				c.mu.Lock()
				c.seen = append(c.seen, strings.TrimPrefix(line, "doorbell "))
				c.mu.Unlock()
			}
		}
	}()
	go func() { cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	select {
	case <-readyc:
	case <-c.done:
		t.Fatalf("MCP client process exited: %s", stderr.String())
	case <-time.After(wait):
		t.Fatal("MCP client process not ready")
	}
	return c
}

func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to the client: %v", sig, err)
	}
}

// ---- gateway agents ----

// gatewayStats counts what the gateway clients saw.
type gatewayStats struct {
	closes4009 atomic.Int64
	closes     atomic.Int64 // every other close or error (reconnected)
	acks       atomic.Int64
	mu         sync.Mutex
	lastClose  string
}

// unexpected is every close of the connection the agent saw, 4009 or
// another (a close code, a reset, a failed dial), and the last one's text;
// 0 and "" when the connection stayed up for the whole run.
func (st *gatewayStats) unexpected() (int64, string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.closes4009.Load() + st.closes.Load(), st.lastClose
}

// gatewayAgent keeps one gateway connection for a, sending a heartbeat
// (state online, billing mode api: the first one is an audited report)
// every period, until ctx ends; it reconnects after any close, counting
// 4009 closes apart. The end of ctx is not a close.
func gatewayAgent(ctx context.Context, srv *server, a vended, period time.Duration, st *gatewayStats) {
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/gateway"
	for ctx.Err() == nil {
		err := gatewayOnce(ctx, wsURL, a.Credential, period, st)
		if ctx.Err() != nil {
			return
		}
		st.mu.Lock()
		if websocket.CloseStatus(err) == 4009 {
			st.closes4009.Add(1)
		} else {
			st.closes.Add(1)
		}
		st.lastClose = fmt.Sprintf("close status %d: %v", websocket.CloseStatus(err), err)
		st.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func gatewayOnce(ctx context.Context, wsURL, cred string, period time.Duration, st *gatewayStats) error {
	dctx, cancel := context.WithTimeout(ctx, wait)
	c, _, err := websocket.Dial(dctx, wsURL, nil)
	cancel()
	if err != nil {
		return err
	}
	defer c.CloseNow()
	if _, _, err := c.Read(ctx); err != nil { // hello
		return err
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+cred+`"}}`)); err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	readErr := make(chan error, 1)
	go func() { // ready, acks, errors; a close ends the connection
		defer stop()
		for {
			_, b, err := c.Read(rctx)
			if err != nil {
				readErr <- err
				return
			}
			if strings.Contains(string(b), `"heartbeat_ack"`) {
				st.acks.Add(1)
			}
		}
	}()
	for rctx.Err() == nil {
		if err := c.Write(rctx, websocket.MessageText, []byte(`{"op":"heartbeat","d":{"agent":{"state":"online","billing_mode":"api"}}}`)); err != nil {
			break
		}
		select {
		case <-rctx.Done():
		case <-time.After(period):
		}
	}
	select {
	case err := <-readErr:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return errors.New("gateway: write failed and the read did not end")
	}
}
