package e2e

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// interopCycles is how many sessions each client opens and ends before the
// doorbell check: twice the default failed-auth limit, so a close the
// server counted as a failed authentication would lock the host out.
const interopCycles = 40

// interopServer starts a server and vends the agent the interop tests use.
func interopServer(t *testing.T, handle string) (*server, vendResult) {
	t.Helper()
	srv := startSQLite(t)
	return srv, vend(t, srv, handle, []string{"reviews"}, allVerbs)
}

// checkClosesHonoured asserts that the server ended at least n sessions on
// the client's DELETE, counted no failed authentication, and still serves
// the admin's REST calls from the same address.
func checkClosesHonoured(t *testing.T, srv *server, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for strings.Count(srv.Output(), `reason="deleted by the client"`) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions ended by the client's DELETE, want %d", strings.Count(srv.Output(), `reason="deleted by the client"`), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out := srv.Output(); strings.Contains(out, `msg="authentication refused"`) {
		t.Fatalf("a session close was counted as a failed authentication:\n%s", out)
	}
	if code := restGet(t, srv, "/v1/agents", nil); code != http.StatusOK {
		t.Fatalf("admin REST call after the cycles: %d", code)
	}
}

// mcpGoClient opens an mcp-go session configured as mcp-go's README shows:
// the credential in transport.WithHTTPHeaders (which its Close does not
// send on the DELETE).
func mcpGoClient(t *testing.T, ctx context.Context, v vendResult, listen bool, onNote func(mcp.JSONRPCNotification)) *mcpclient.Client {
	t.Helper()
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + v.Credential}),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler))}
	if listen {
		//lint:ignore SA1019 sessions of 2025-06-18/2025-11-25 receive doorbells on the GET stream (design: MCP sessions)
		opts = append(opts, transport.WithContinuousListening())
	}
	tr, err := transport.NewStreamableHTTP(v.MCPURL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := mcpclient.NewClient(tr, mcpclient.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	if onNote != nil {
		c.OnNotification(onNote)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION,
		ClientInfo: mcp.Implementation{Name: "e2e-interop-mcp-go", Version: "1"}}}); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

// mcp-go (credential in WithHTTPHeaders, as its README shows): 40
// connect/initialize/Close cycles on one agent end 40 sessions without a
// failed authentication, then a fresh session receives the doorbell of a
// todo the admin pushes.
func TestE2EInteropMCPGo(t *testing.T) {
	srv, v := interopServer(t, "interop-mcp-go")
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	for i := range interopCycles {
		c := mcpGoClient(t, ctx, v, false, nil)
		if c.GetSessionId() == "" {
			t.Fatalf("cycle %d: no session id", i+1)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", i+1, err)
		}
	}
	checkClosesHonoured(t, srv, interopCycles)

	got := make(chan map[string]any, 10)
	c := mcpGoClient(t, ctx, v, true, func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/claude/channel" {
			meta, _ := n.Params.AdditionalFields["meta"].(map[string]any)
			got <- meta
		}
	})
	defer c.Close()
	if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil { // lets the GET stream attach
		t.Fatal(err)
	}
	id := pushTodo(t, srv, "interop-mcp-go", "reviews", "After 40 sessions")
	for {
		select {
		case meta := <-got:
			if meta["todo_id"] == id {
				return
			}
		case <-time.After(wait):
			t.Fatal("no doorbell for the todo within the wait bound")
		}
	}
}

// The official TypeScript SDK: 40 cycles of connect, terminateSession and
// close (e2e/tsclient --cycles), then a fresh session receives the doorbell.
func TestE2EInteropTypeScript(t *testing.T) {
	srv, v := interopServer(t, "interop-ts")
	c, _ := startTSClient(t, v.MCPURL, v.Credential, "--cycles=40") // "ready" comes after the 40 cycles
	checkClosesHonoured(t, srv, interopCycles)
	id := pushTodo(t, srv, "interop-ts", "reviews", "After 40 sessions")
	deadline := time.After(wait)
	for {
		if func() bool {
			for _, n := range c.channelNotifications() {
				if n.Params.Meta["todo_id"] == id {
					return true
				}
			}
			return false
		}() {
			break
		}
		select {
		case <-deadline:
			t.Fatal("no doorbell for the todo within the wait bound")
		case <-time.After(20 * time.Millisecond):
		}
	}
	c.close()
}

// sseTap records what a client's HTTP transport reads from the server's
// event streams, for the doorbell check of a client whose API does not
// surface a custom notification method (the Go SDK drops unknown ones).
type sseTap struct {
	base  http.RoundTripper
	token string
	mu    sync.Mutex
	seen  bytes.Buffer
}

func (t *sseTap) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	resp, err := t.base.RoundTrip(r)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = tapBody{ReadCloser: resp.Body, t: t}
	}
	return resp, err
}

func (t *sseTap) contains(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Contains(t.seen.Bytes(), []byte(s))
}

type tapBody struct {
	io.ReadCloser
	t *sseTap
}

func (b tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.t.mu.Lock()
	b.t.seen.Write(p[:n])
	b.t.mu.Unlock()
	return n, err
}

// The official Go SDK (credential from the HTTP client's round tripper, the
// way its transport takes headers): 40 Connect/Close cycles, then a fresh
// session's event stream carries the doorbell and the session still works.
func TestE2EInteropGoSDK(t *testing.T) {
	srv, v := interopServer(t, "interop-go-sdk")
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	tap := &sseTap{base: http.DefaultTransport, token: v.Credential}
	connect := func(standalone bool) *gosdk.ClientSession {
		t.Helper()
		c := gosdk.NewClient(&gosdk.Implementation{Name: "e2e-interop-go-sdk", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &gosdk.StreamableClientTransport{Endpoint: v.MCPURL, HTTPClient: &http.Client{Transport: tap},
			DisableStandaloneSSE: !standalone, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		return cs
	}
	for i := range interopCycles {
		cs := connect(false)
		if cs.ID() == "" {
			t.Fatalf("cycle %d: no session id", i+1)
		}
		if err := cs.Close(); err != nil {
			t.Fatalf("cycle %d: close: %v", i+1, err)
		}
	}
	checkClosesHonoured(t, srv, interopCycles)

	cs := connect(true)
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	id := pushTodo(t, srv, "interop-go-sdk", "reviews", "After 40 sessions")
	deadline := time.Now().Add(wait)
	for !tap.contains(`"todo_id":"` + id + `"`) {
		if time.Now().After(deadline) {
			t.Fatal("no doorbell for the todo on the Go SDK session's stream within the wait bound")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("the session after the doorbell: %v", err)
	}
}
