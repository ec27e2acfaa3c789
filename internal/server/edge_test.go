package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/rollcall/rollcall/internal/config"
)

const testAdmin = "rcp_edge-test-admin-0123456789abcdef0123"

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// start runs a real server on a loopback port with the given extra
// environment and returns its URL and log.
func start(t *testing.T, env ...string) (string, *lockedBuf) {
	t.Helper()
	env = append([]string{"ROLLCALL_LISTEN=127.0.0.1:0", "ROLLCALL_STORE=sqlite:" + filepath.Join(t.TempDir(), "r.db"), "ROLLCALL_BOOTSTRAP_TOKEN=" + testAdmin}, env...)
	cfg, err := config.Load(nil, env)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuf{}
	s, err := Open(context.Background(), cfg, Options{Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + s.ln.Addr().String(), logs
}

func do(t *testing.T, method, url, token string, body io.Reader, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// Wrong tokens on REST and /mcp count towards one limit per client IP; the
// 21st request is answered 429 with Retry-After, whatever it carries; each
// refusal is logged at info with IP and reason and never the token.
func TestServerLimitsFailedAuthentications(t *testing.T) {
	url, logs := start(t, "ROLLCALL_AUTH_MAX_FAILURES=20")
	for i := range 20 {
		path, tok := "/v1/agents", fmt.Sprintf("rcp_wrong%02d-secretsecretsecret", i)
		if i%2 == 1 {
			path, tok = "/mcp", fmt.Sprintf("rca_wrong%02d-secretsecretsecret", i)
		}
		method := "GET"
		var body io.Reader
		if path == "/mcp" {
			method, body = "POST", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		}
		if resp := do(t, method, url+path, tok, body); resp.StatusCode != 401 {
			t.Fatalf("failure %d on %s: %d", i+1, path, resp.StatusCode)
		}
	}
	resp := do(t, "GET", url+"/v1/agents", testAdmin, nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("21st request (a good token): %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := do(t, "GET", url+"/healthz", "", nil); resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	out := logs.String()
	if n := strings.Count(out, `level=INFO msg="authentication refused" client=127.0.0.1`); n != 21 {
		t.Fatalf("%d refusals logged at info with the client, want 21:\n%s", n, out)
	}
	if strings.Contains(out, "secretsecret") || strings.Contains(out, "wrong0") {
		t.Fatalf("a token reached the log:\n%s", out)
	}
}

// A stalled body on a REST route is cut off after http.read_timeout and its
// connection closed.
func TestServerReadTimeout(t *testing.T) {
	url, _ := start(t, "ROLLCALL_HTTP_READ_TIMEOUT=300ms")
	addr := strings.TrimPrefix(url, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/agents HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"handle\":", addr, testAdmin)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("connection not closed: %v (read %q)", err, got)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 4") {
		t.Fatalf("answer: %q", got)
	}
	// The server still serves.
	if resp := do(t, "GET", url+"/v1/agents", testAdmin, nil); resp.StatusCode != 200 {
		t.Fatalf("after: %d", resp.StatusCode)
	}
}

// public_url's host passes the Host check of every route on a loopback
// listener; other hosts do not unless allowed_hosts names them.
func TestServerHostCheck(t *testing.T) {
	url, _ := start(t, "ROLLCALL_PUBLIC_URL=https://rollcall.example.com", "ROLLCALL_ALLOWED_HOSTS=alias.example")
	for host, want := range map[string]int{"rollcall.example.com": 200, "alias.example": 200, "localhost": 200, "evil.example": 403} {
		for _, path := range []string{"/v1/agents", "/healthz", "/console/"} {
			if resp := do(t, "GET", url+path, testAdmin, nil, "Host", host); (resp.StatusCode == 403) != (want == 403) {
				t.Errorf("%s Host %s: %d", path, host, resp.StatusCode)
			}
		}
	}
	if resp := do(t, "GET", url+"/v1/agents", testAdmin, nil, "Origin", "https://rollcall.example.com"); resp.StatusCode != 200 {
		t.Errorf("Origin public_url: %d", resp.StatusCode)
	}
}

// /favicon.ico is an icon, not a 404.
func TestServerFavicon(t *testing.T) {
	url, _ := start(t)
	resp, err := http.Get(url + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/x-icon" || len(b) < 22 || !bytes.HasPrefix(b, []byte{0, 0, 1, 0}) {
		t.Fatalf("/favicon.ico: %d %s %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
	}
}

// A refused gateway identify (after the WebSocket upgrade, so no 401)
// counts towards the same limit; past it the upgrade itself is a 429.
func TestServerGatewayIdentifyFailuresCount(t *testing.T) {
	url, logs := start(t, "ROLLCALL_AUTH_MAX_FAILURES=3")
	ws := "ws" + strings.TrimPrefix(url, "http") + "/v1/gateway"
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, _, err := websocket.Dial(ctx, ws, nil)
		if err != nil {
			cancel()
			t.Fatalf("dial %d: %v", i+1, err)
		}
		_, _, _ = c.Read(ctx) // hello
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"rca_wrongwrongwrongwrongwrongwrongwrongwrongwro"}}`))
		_, _, err = c.Read(ctx)
		if websocket.CloseStatus(err) != 4004 {
			t.Fatalf("identify %d: %v, want close 4004", i+1, err)
		}
		c.CloseNow()
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, ws, nil)
	if err == nil || resp == nil || resp.StatusCode != 429 {
		t.Fatalf("4th dial: %v %v, want 429", err, resp)
	}
	if out := logs.String(); strings.Count(out, `msg="authentication refused" client=127.0.0.1 reason=invalid_token method=GET path=/v1/gateway`) != 3 || strings.Contains(out, "rca_wrong") {
		t.Fatalf("log:\n%s", out)
	}
}

// X-Forwarded-Proto makes console cookies Secure only from a trusted proxy.
func TestServerForwardedProtoOnlyFromTrustedProxies(t *testing.T) {
	secure := func(url string) bool {
		t.Helper()
		resp := do(t, "GET", url+"/console/signin", "", nil, "X-Forwarded-Proto", "https")
		for _, c := range resp.Cookies() {
			if c.Name == "rollcall_signin" {
				return c.Secure
			}
		}
		t.Fatalf("no sign-in cookie (status %d)", resp.StatusCode)
		return false
	}
	untrusted, _ := start(t)
	if secure(untrusted) {
		t.Fatal("an untrusted X-Forwarded-Proto made the cookie Secure")
	}
	trusted, _ := start(t, "ROLLCALL_TRUSTED_PROXIES=127.0.0.1/32")
	if !secure(trusted) {
		t.Fatal("X-Forwarded-Proto: https from a trusted proxy did not make the cookie Secure")
	}
}
