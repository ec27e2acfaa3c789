package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/rollcall/rollcall/internal/config"

	"github.com/rollcall/rollcall/internal/testkit"
)

const testAdmin = "rcp_edge-test-admin-0123456789abcdef0123"

// openSQLite opens (without serving) a server on a fresh SQLite file and a
// loopback port with testAdmin bootstrapped and the given extra
// environment; it logs to log.
func openSQLite(tb testing.TB, log *slog.Logger, env ...string) (*Server, config.Config) {
	tb.Helper()
	env = append([]string{"ROLLCALL_LISTEN=127.0.0.1:0", "ROLLCALL_STORE=sqlite:" + filepath.Join(tb.TempDir(), "r.db"), "ROLLCALL_BOOTSTRAP_TOKEN=" + testAdmin}, env...)
	cfg, err := config.Load(nil, env)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Open(context.Background(), cfg, Options{Log: log})
	if err != nil {
		tb.Fatal(err)
	}
	return s, cfg
}

// start runs a real server (openSQLite) until the test ends and returns
// its URL and log.
func start(t *testing.T, env ...string) (string, *testkit.SyncBuffer) {
	t.Helper()
	logs := &testkit.SyncBuffer{}
	s, _ := openSQLite(t, slog.New(slog.NewTextHandler(logs, nil)), env...)
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

// Wrong tokens on REST and /mcp count towards one limit per client IP; past
// it a wrong token is answered 429 with Retry-After while a good one is
// served; each refusal is logged at info with IP and reason and never the
// token.
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
	resp := do(t, "GET", url+"/v1/agents", "rcp_wrong20-secretsecretsecret", nil)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("21st wrong token: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := do(t, "GET", url+"/v1/agents", testAdmin, nil); resp.StatusCode != 200 {
		t.Fatalf("a good token past the limit: %d", resp.StatusCode)
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

// readBody does a request like do and returns the response and its body.
func readBody(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

// vendREST vends an agent with the admin token and returns its credential.
func vendREST(t *testing.T, url, handle string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url+"/v1/agents", strings.NewReader(`{"handle":"`+handle+`","queues":["q1"],"verbs":["claim","complete"]}`))
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	req.Header.Set("Content-Type", "application/json")
	resp, b := readBody(t, req)
	var v struct {
		Credential string `json:"credential"`
	}
	if err := json.Unmarshal(b, &v); err != nil || resp.StatusCode != 201 || v.Credential == "" {
		t.Fatalf("vend %s: %d %v %s", handle, resp.StatusCode, err, b)
	}
	return v.Credential
}

// The failed-auth limit never refuses a credential that verifies (the
// design's "The failed-auth limit"): after 100 failures from 127.0.0.1 an
// admin's REST call, an agent's MCP initialize and a console sign-in from
// 127.0.0.1 are served, while the 101st wrong token is 429.
func TestServerValidCredentialsServedPastTheLimit(t *testing.T) {
	url, _ := start(t)
	cred := vendREST(t, url, "limited")
	for i := range 100 {
		resp := do(t, "GET", url+"/v1/agents", fmt.Sprintf("rcp_wrong%03d-secretsecretsecret", i), nil)
		if want := map[bool]int{true: 401, false: 429}[i < 20]; resp.StatusCode != want {
			t.Fatalf("failure %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if resp := do(t, "GET", url+"/v1/agents", testAdmin, nil); resp.StatusCode != 200 {
		t.Fatalf("admin REST call: %d", resp.StatusCode)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(initialize))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if resp, b := readBody(t, req); resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" || !bytes.Contains(b, []byte(`"serverInfo"`)) {
		t.Fatalf("agent initialize: %d %s", resp.StatusCode, b)
	}
	page, _ := readBody(t, mustRequest(t, "GET", url+"/console/signin", nil))
	var csrf string
	for _, c := range page.Cookies() {
		if c.Name == "rollcall_signin" {
			csrf = c.Value
		}
	}
	form := "csrf=" + csrf + "&token=" + testAdmin
	req = mustRequest(t, "POST", url+"/console/signin", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "rollcall_signin", Value: csrf})
	resp, b := readBody(t, req)
	signedIn := false
	for _, c := range resp.Cookies() {
		signedIn = signedIn || (c.Name == "rollcall_session" && c.Value != "")
	}
	if resp.StatusCode != http.StatusSeeOther || !signedIn {
		t.Fatalf("console sign-in: %d cookies %v %s", resp.StatusCode, resp.Cookies(), b)
	}
	if resp := do(t, "GET", url+"/v1/agents", "rcp_wrong100-secretsecretsecret", nil); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("101st wrong token: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func mustRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
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
// counts towards the same limit. The upgrade carries no credential, so past
// the limit it is still served: a wrong identify is refused (4004) and
// counted, a good one is ready.
func TestServerGatewayIdentifyFailuresCount(t *testing.T) {
	url, logs := start(t, "ROLLCALL_AUTH_MAX_FAILURES=3")
	cred := vendREST(t, url, "gw")
	ws := "ws" + strings.TrimPrefix(url, "http") + "/v1/gateway"
	identify := func(token string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, _, err := websocket.Dial(ctx, ws, nil)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.CloseNow()
		_, _, _ = c.Read(ctx) // hello
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+token+`"}}`))
		_, b, err := c.Read(ctx)
		if err == nil && !bytes.Contains(b, []byte(`"op":"ready"`)) {
			t.Fatalf("identify answered %s", b)
		}
		return err
	}
	for i := range 4 {
		if err := identify("rca_wrongwrongwrongwrongwrongwrongwrongwrongwro"); websocket.CloseStatus(err) != 4004 {
			t.Fatalf("identify %d: %v, want close 4004", i+1, err)
		}
	}
	if err := identify(cred); err != nil {
		t.Fatalf("a good identify past the limit: %v", err)
	}
	if out := logs.String(); strings.Count(out, `msg="authentication refused" client=127.0.0.1 reason=invalid_token method=GET path=/v1/gateway`) != 4 || strings.Contains(out, "rca_wrong") {
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
