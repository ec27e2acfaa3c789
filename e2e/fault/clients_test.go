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
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ---- MCP sessions (mcp-go) ----

// doorbell is one notifications/claude/channel a session received.
type doorbell struct {
	TodoID string
	Kind   string // meta.kind: the todo's kind, or "digest"
	Read   time.Time
}

// session is one mcp-go client session with its GET stream open, in this
// process.
type session struct {
	c  *mcpclient.Client
	mu sync.Mutex
	in []doorbell
}

// dialMCP opens an MCP session (initialize, tools/list, GET stream) and
// reports every channel notification to onBell.
func dialMCP(ctx context.Context, mcpURL, cred string, onBell func(doorbell)) (*mcpclient.Client, error) {
	//lint:ignore SA1019 sessions of 2025-06-18/2025-11-25 receive doorbells on the GET stream (design: MCP sessions)
	tr, err := transport.NewStreamableHTTP(mcpURL, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + cred}), transport.WithContinuousListening())
	if err != nil {
		return nil, err
	}
	c := mcpclient.NewClient(tr, mcpclient.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/claude/channel" {
			return
		}
		m, _ := n.Params.AdditionalFields["meta"].(map[string]any)
		id, _ := m["todo_id"].(string)
		kind, _ := m["kind"].(string)
		onBell(doorbell{TodoID: id, Kind: kind, Read: time.Now()})
	})
	if err := c.Start(context.Background()); err != nil {
		return nil, err
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION, ClientInfo: mcp.Implementation{Name: "fault", Version: "1"}}}); err != nil {
		c.Close()
		return nil, err
	}
	// A request round trip after initialize lets the GET stream attach.
	if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func openSession(t *testing.T, srv *server, a vended) *session {
	t.Helper()
	return openSessionOpts(t, srv, a, false)
}

// openClaimingSession is a session whose client acts like a working agent:
// it claims every todo it is rung for (in the background).
func openClaimingSession(t *testing.T, srv *server, a vended) *session {
	t.Helper()
	return openSessionOpts(t, srv, a, true)
}

func openSessionOpts(t *testing.T, srv *server, a vended, claim bool) *session {
	t.Helper()
	s := &session{}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var ready atomic.Pointer[mcpclient.Client]
	c, err := dialMCP(ctx, srv.URL+"/mcp", a.Credential, func(d doorbell) {
		s.mu.Lock()
		s.in = append(s.in, d)
		s.mu.Unlock()
		if c := ready.Load(); claim && c != nil && d.TodoID != "" {
			go func() {
				cctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"todo_id": d.TodoID}}})
			}()
		}
	})
	ready.Store(c)
	if err != nil {
		t.Fatalf("MCP session of %s on %s: %v", a.Handle, srv.Name, err)
	}
	s.c = c
	t.Cleanup(func() { c.Close() })
	return s
}

// bell returns the first doorbell of todoID, if any came.
func (s *session) bell(todoID string) (doorbell, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.in {
		if d.TodoID == todoID {
			return d, true
		}
	}
	return doorbell{}, false
}

// bellWithin waits up to d for the doorbell of todoID.
func (s *session) bellWithin(d time.Duration, todoID string) (doorbell, bool) {
	deadline := time.Now().Add(d)
	for {
		if b, ok := s.bell(todoID); ok {
			return b, true
		}
		if time.Now().After(deadline) {
			return doorbell{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// missing waits up to d in all for the doorbells of ids and returns how
// many did not come.
func (s *session) missing(d time.Duration, ids []string) int {
	deadline := time.Now().Add(d)
	n := 0
	for _, id := range ids {
		if _, ok := s.bellWithin(time.Until(deadline), id); !ok {
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
	_, err := dialMCP(ctx, os.Getenv("ROLLCALL_FAULT_URL"), os.Getenv("ROLLCALL_FAULT_TOKEN"), func(d doorbell) {
		mu.Lock()
		fmt.Printf("doorbell %s\n", d.TodoID)
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

// gatewayAgent keeps one gateway connection for a, sending a heartbeat
// (state online, billing mode api: the first one is an audited report)
// every period, until ctx ends; it reconnects after any close, counting
// 4009 closes apart.
func gatewayAgent(ctx context.Context, srv *server, a vended, period time.Duration, st *gatewayStats) {
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/gateway"
	for ctx.Err() == nil {
		err := gatewayOnce(ctx, wsURL, a.Credential, period, st)
		if ctx.Err() != nil {
			return
		}
		if websocket.CloseStatus(err) == 4009 {
			st.closes4009.Add(1)
		} else {
			st.closes.Add(1)
		}
		st.mu.Lock()
		st.lastClose = fmt.Sprint(err)
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
