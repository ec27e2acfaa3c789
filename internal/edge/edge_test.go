package edge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

const wait = 20 * time.Second // bound of "eventually" waits, not a speed assertion

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// authHandler answers 401 unless the bearer token is "rcp_good".
func authHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer rcp_good" && r.URL.Path != "/healthz" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rollcall", error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "client=%s host=%s proto=%s", ClientIP(r), r.Host, Scheme(r))
	})
}

// dial opens a TCP connection to addr whose reads and writes fail after
// wait; the caller closes it.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(wait))
	return c
}

func get(t *testing.T, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	return send(t, "GET", url, hdr)
}

// send sends a bodiless request with the headers hdr ("Host" sets the
// Host) and returns the answer and its body.
func send(t *testing.T, method, url string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// Past MaxFailures a request from the client IP whose credential does not
// verify (or that has none) is answered 429 with Retry-After until its
// window ends (fake clock), while a credential that verifies and the probes
// are served; the log names the IP and the reason but never the token.
func TestFailedAuthenticationsPerIP(t *testing.T) {
	clock := clockwork.NewFakeClock()
	var logs syncBuf
	e := New(Options{MaxFailures: 3, Clock: clock, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	srv := httptest.NewServer(e.Handler(authHandler()))
	defer srv.Close()
	bad := map[string]string{"Authorization": "Bearer rcp_wrong-secret-0123456789"}
	good := map[string]string{"Authorization": "Bearer rcp_good"}
	for i := range 3 {
		if resp, _ := get(t, srv.URL+"/v1/agents", bad); resp.StatusCode != 401 {
			t.Fatalf("failure %d: %d", i+1, resp.StatusCode)
		}
	}
	for _, hdr := range []map[string]string{bad, nil} {
		resp, body := get(t, srv.URL+"/v1/agents", hdr)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "60" || resp.Header.Get("WWW-Authenticate") != "" ||
			!strings.Contains(body, `"code":"rate_limited"`) {
			t.Fatalf("after 3 failures (%v): %d Retry-After %q %s", hdr, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if resp, body := get(t, srv.URL+"/v1/agents", good); resp.StatusCode != 200 || !strings.Contains(body, "client=127.0.0.1") {
		t.Fatalf("a good credential while the IP is limited: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, srv.URL+"/healthz", nil); resp.StatusCode != 200 {
		t.Fatalf("/healthz while limited: %d", resp.StatusCode)
	}
	clock.Advance(45 * time.Second)
	if resp, _ := get(t, srv.URL+"/v1/agents", bad); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "15" {
		t.Fatalf("45 s later: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	clock.Advance(15 * time.Second)
	if resp, _ := get(t, srv.URL+"/v1/agents", bad); resp.StatusCode != 401 {
		t.Fatalf("a bad credential after the window: %d", resp.StatusCode)
	}
	out := logs.String()
	if strings.Count(out, `msg="authentication refused"`) != 7 || strings.Count(out, "client=127.0.0.1 reason=invalid_token") != 4 ||
		strings.Count(out, "reason=rate_limited") != 3 || strings.Contains(out, "wrong-secret") || strings.Contains(out, "rcp_") {
		t.Fatalf("log:\n%s", out)
	}
}

// One credential tried from many client IPs (through a trusted proxy) is
// limited by its prefix; X-Forwarded-* from an untrusted peer are ignored.
func TestFailedAuthenticationsPerCredentialAndForwarded(t *testing.T) {
	e := New(Options{MaxFailures: 3, PublicURL: "https://rollcall.example.com", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(e.Handler(authHandler()))
	defer srv.Close()
	for i := range 4 {
		resp, _ := get(t, srv.URL+"/v1/agents", map[string]string{"Authorization": "Bearer rcp_stolen-0123456789", "X-Forwarded-For": fmt.Sprintf("198.51.100.%d", i+1)})
		want := 401
		if i == 3 {
			want = 429
		}
		if resp.StatusCode != want {
			t.Fatalf("attempt %d from its own IP: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	// Another credential from a fresh IP is not affected.
	if resp, body := get(t, srv.URL+"/", map[string]string{"Authorization": "Bearer rcp_good", "X-Forwarded-For": "203.0.113.9, 127.0.0.5",
		"X-Forwarded-Proto": "https", "X-Forwarded-Host": "rollcall.example.com"}); resp.StatusCode != 200 || body != "client=203.0.113.9 host=rollcall.example.com proto=https" {
		t.Fatalf("trusted forwarded: %d %q", resp.StatusCode, body)
	}

	untrusted := New(Options{Log: slog.New(slog.DiscardHandler)})
	srv2 := httptest.NewServer(untrusted.Handler(authHandler()))
	defer srv2.Close()
	if resp, body := get(t, srv2.URL+"/", map[string]string{"Authorization": "Bearer rcp_good", "X-Forwarded-For": "203.0.113.9",
		"X-Forwarded-Proto": "https", "X-Forwarded-Host": "127.0.0.1"}); resp.StatusCode != 200 || !strings.HasPrefix(body, "client=127.0.0.1 host=127.0.0.1:") || !strings.HasSuffix(body, "proto=http") {
		t.Fatalf("untrusted forwarded: %d %q", resp.StatusCode, body)
	}
}

// Host and Origin rules on a loopback listener, for every path.
func TestHostOrigin(t *testing.T) {
	e := New(Options{PublicURL: "https://rollcall.example.com", AllowedHosts: []string{"alias.example"}, AllowedOrigins: []string{"https://app.example"}, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(e.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:" + port, "", 200},
		{"localhost:" + port, "", 200},
		{"LOCALHOST", "", 200},
		{"[::1]:" + port, "", 200},
		{"rollcall.example.com", "", 200},
		{"Rollcall.Example.com:443", "", 200},
		{"alias.example:8080", "", 200},
		{"evil.example", "", 403},
		{"127.0.0.1:" + port, "http://localhost:" + port, 200},
		{"localhost:" + port, "http://127.0.0.1:" + port, 200},
		{"127.0.0.1:" + port, "http://localhost:1", 403},
		{"localhost:" + port, "http://[::1]:" + port, 200},
		{"[::1]:" + port, "http://LocalHost:" + port, 200},
		// Only localhost, 127.0.0.1 and [::1] count as one server.
		{"127.0.0.1:" + port, "http://127.0.0.2:" + port, 403},
		{"localhost:" + port, "http://foo.localhost:" + port, 403},
		{"foo.localhost:" + port, "http://localhost:" + port, 403},
		{"foo.localhost:" + port, "http://foo.localhost:" + port, 200},
		{"rollcall.example.com", "https://rollcall.example.com", 200},
		{"127.0.0.1:" + port, "https://app.example", 200},
		{"127.0.0.1:" + port, "https://evil.example", 403},
		{"127.0.0.1:" + port, "null", 403},
	} {
		for _, path := range []string{"/mcp", "/v1/agents", "/console/", "/healthz"} {
			hdr := map[string]string{"Host": tc.host}
			if tc.origin != "" {
				hdr["Origin"] = tc.origin
			}
			if resp, body := get(t, srv.URL+path, hdr); resp.StatusCode != tc.want {
				t.Errorf("%s Host %q Origin %q: %d %s, want %d", path, tc.host, tc.origin, resp.StatusCode, body, tc.want)
			}
		}
	}
}

// An HTTP/1.0 request without Host (a probe) passes the Host check.
func TestNoHostHTTP10(t *testing.T) {
	e := New(Options{Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(e.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	conn := dial(t, strings.TrimPrefix(srv.URL, "http://"))
	defer conn.Close()
	fmt.Fprint(conn, "GET /healthz HTTP/1.0\r\n\r\n")
	got, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(got), "HTTP/1.0 200") {
		t.Fatalf("%q", got)
	}
}

// A body that does not arrive within ReadTimeout is cut off and the
// connection closed; a complete body followed by a long streamed answer is
// neither cut nor cancelled.
func TestReadTimeout(t *testing.T) {
	const rt = 300 * time.Millisecond
	var canceled sync.Map
	e := New(Options{ReadTimeout: rt, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(e.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		rc := http.NewResponseController(w)
		for i := range 8 { // 8 × 150 ms = 4 read timeouts
			fmt.Fprintf(w, "data: %d\n\n", i)
			_ = rc.Flush()
			select {
			case <-r.Context().Done():
				canceled.Store(r.URL.Path, true)
				return
			case <-time.After(150 * time.Millisecond):
			}
		}
		fmt.Fprint(w, "data: end\n\n")
	})))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	// The slow body: 10 of 100 bytes, then nothing.
	conn := dial(t, addr)
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /slow HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":12345", addr)
	got, err := io.ReadAll(conn) // ends when the server closes the connection
	if err != nil {
		t.Fatalf("the server did not close the connection of a stalled body within %s: %v (read %q)", wait, err, got)
	}
	if el := time.Since(start); el < rt {
		t.Fatalf("closed after %s, before the read timeout %s", el, rt)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 408") {
		t.Fatalf("answer to a stalled body: %q", got)
	}

	// A complete body, then a stream outliving the read timeout.
	resp, err := http.Post(srv.URL+"/stream", "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	if _, c := canceled.Load("/stream"); c || len(lines) != 9 || lines[8] != "data: end" {
		t.Fatalf("stream after a complete body: canceled=%v lines=%q err=%v", c, lines, sc.Err())
	}

	// A bodiless GET stream is not cut either.
	resp2, err := http.Get(srv.URL + "/get")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if _, c := canceled.Load("/get"); c || !strings.HasSuffix(string(b), "data: end\n\n") {
		t.Fatalf("GET stream: canceled=%v %q", c, b)
	}
}

// The failure table stays bounded: expired windows are swept once it holds
// sweepAt keys, and it never exceeds hardCap.
func TestLimiterMemoryBounded(t *testing.T) {
	clock := clockwork.NewFakeClock()
	l := NewLimiter(3, time.Minute, clock)
	for i := range sweepAt {
		l.Fail(fmt.Sprintf("10.0.%d.%d", i/256, i%256), "")
	}
	if len(l.keys) != sweepAt {
		t.Fatalf("%d keys", len(l.keys))
	}
	clock.Advance(time.Minute)
	l.Fail("192.0.2.1", "rcp_abcdefgh")
	if len(l.keys) != 2 {
		t.Fatalf("after the sweep: %d keys, want 2", len(l.keys))
	}
	for i := range hardCap + 10 {
		l.Fail(fmt.Sprintf("k%d", i), "")
	}
	if len(l.keys) > hardCap {
		t.Fatalf("%d keys, over the cap %d", len(l.keys), hardCap)
	}
}

// IPv6 clients are counted per /64.
func TestLimiterIPv6PerSlash64(t *testing.T) {
	l := NewLimiter(2, time.Minute, clockwork.NewFakeClock())
	l.Fail("2001:db8:1:2::1", "")
	l.Fail("2001:db8:1:2:ffff::9", "")
	if _, blocked := l.Blocked("2001:db8:1:2::77", ""); !blocked {
		t.Fatal("another address of the same /64 is not limited")
	}
	if _, blocked := l.Blocked("2001:db8:1:3::1", ""); blocked {
		t.Fatal("another /64 is limited")
	}
	if _, blocked := l.Blocked("192.0.2.1", ""); blocked {
		t.Fatal("an IPv4 client is limited")
	}
}

// A request the edge refuses (foreign Origin, foreign Host on a loopback
// listener, a bad credential over the failed-auth limit) that announces a
// body and never sends it is answered and its connection closed at once:
// 1000 such connections, all closed within the bound.
func TestRefusalsDoNotHoldConnections(t *testing.T) {
	e := New(Options{MaxFailures: 1, MaxConnsPerClient: -1, Log: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(e.Handler(authHandler()))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if resp, _ := get(t, srv.URL+"/v1/agents", map[string]string{"Authorization": "Bearer rcp_wrong-0123456789"}); resp.StatusCode != 401 {
		t.Fatalf("first failure: %d", resp.StatusCode)
	}
	kinds := []struct{ req, want string }{
		{"POST /v1/agents HTTP/1.1\r\nHost: " + addr + "\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n", "HTTP/1.1 403"},
		{"POST /v1/agents HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n", "HTTP/1.1 403"},
		{"POST /v1/agents HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer rcp_wrong-0123456789\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n", "HTTP/1.1 429"},
	}
	const n = 1000
	deadline := time.Now().Add(wait)
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := kinds[i%len(kinds)]
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(deadline)
			if _, err := io.WriteString(conn, k.req); err != nil {
				errs <- err.Error()
				return
			}
			got, err := io.ReadAll(conn) // ends when the server closes
			switch {
			case err != nil:
				errs <- fmt.Sprintf("connection %d still open: %v (read %q)", i, err, got)
			case !strings.HasPrefix(string(got), k.want) || !strings.Contains(string(got), "Connection: close"):
				errs <- fmt.Sprintf("connection %d answered %q, want %s with Connection: close", i, got, k.want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	var failed []string
	for e := range errs {
		failed = append(failed, e)
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d refused connections not answered and closed within %s; first: %s", len(failed), n, wait, failed[0])
	}
}

// A flood of one-off failures from distinct IPv6 /64s (each with its own
// credential prefix) fills the table, but the eviction removes one-off
// entries, never the blocked client and its credential prefix.
func TestLimiterEvictionKeepsBlockedClients(t *testing.T) {
	l := NewLimiter(20, time.Minute, clockwork.NewFakeClock())
	for range 20 {
		l.Fail("192.0.2.7", "rcp_attacker")
	}
	for i := range 50_000 {
		l.Fail(fmt.Sprintf("2001:db8:%x:%x::1", i>>16, i&0xffff), fmt.Sprintf("rcp_%08d", i))
	}
	if _, blocked := l.Blocked("192.0.2.7", ""); !blocked {
		t.Fatal("the blocked client was unblocked by 50 000 failures from other addresses")
	}
	if _, blocked := l.Blocked("198.51.100.1", "rcp_attacker"); !blocked {
		t.Fatal("the blocked credential prefix was unblocked by 50 000 failures from other addresses")
	}
	if len(l.keys) > hardCap {
		t.Fatalf("%d keys, over the cap %d", len(l.keys), hardCap)
	}
	if _, blocked := l.Blocked("2001:db8:0:c350::1", ""); blocked {
		t.Fatal("a one-off address is limited")
	}
}

// A client address holds at most MaxConnsPerClient connections: the next
// one is answered 429 and closed before any request; a closed connection
// frees its place; trusted proxies are not capped.
func TestListenerCapsConnectionsPerClient(t *testing.T) {
	serve := func(opts Options) string {
		t.Helper()
		opts.Log, opts.ReadTimeout = slog.New(slog.DiscardHandler), -1 // the stalled bodies stay stalled
		e := New(opts)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: e.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			fmt.Fprint(w, "ok")
		})), ReadHeaderTimeout: wait}
		go srv.Serve(e.Listener(ln))
		t.Cleanup(func() { srv.Close() })
		return ln.Addr().String()
	}
	stall := func(addr string) net.Conn { // headers, then a body that never comes
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /console/signin HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n", addr)
		return c
	}
	ask := func(addr string) string { // one GET on a fresh connection
		t.Helper()
		c := dial(t, addr)
		defer c.Close()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr)
		got, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("no answer: %v (read %q)", err, got)
		}
		return string(got)
	}

	addr := serve(Options{MaxConnsPerClient: 3})
	held := []net.Conn{stall(addr), stall(addr), stall(addr)}
	// The three are counted once accepted; a fourth is refused.
	deadline := time.Now().Add(wait)
	for got := ask(addr); !strings.HasPrefix(got, "HTTP/1.1 429"); got = ask(addr) {
		if time.Now().After(deadline) {
			t.Fatalf("a 4th connection was served: %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := ask(addr); !strings.Contains(got, "Connection: close") || !strings.Contains(got, `"code":"rate_limited"`) {
		t.Fatalf("refusal: %q", got)
	}
	held[0].Close()
	for got := ask(addr); !strings.HasPrefix(got, "HTTP/1.1 200"); got = ask(addr) {
		if time.Now().After(deadline) {
			t.Fatalf("the place of a closed connection was not given back: %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}

	proxied := serve(Options{MaxConnsPerClient: 1, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	stall(proxied)
	stall(proxied)
	if got := ask(proxied); !strings.HasPrefix(got, "HTTP/1.1 200") {
		t.Fatalf("a trusted proxy was capped: %q", got)
	}
}

// With a verifier, a client over the limit has its credential checked
// before the handler (design: Failed-authentication limit): one that does not
// verify is answered 429 without the handler running or its body being
// read, and the connection ends; one that verifies is served; a request
// without Authorization goes to the handler, whose 401 becomes 429. A client
// under the limit is never verified by the edge.
func TestVerifierDecidesBeforeTheHandler(t *testing.T) {
	var mu sync.Mutex
	verified, handled := map[string]int{}, 0
	e := New(Options{MaxFailures: 2, MaxConnsPerClient: -1, Log: slog.New(slog.DiscardHandler),
		Verify: func(_ context.Context, token string) bool {
			mu.Lock()
			defer mu.Unlock()
			verified[token]++
			return token == "rcp_good"
		}})
	inner := authHandler()
	srv := httptest.NewServer(e.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		handled++
		mu.Unlock()
		inner.ServeHTTP(w, r)
	})))
	defer srv.Close()
	bad := map[string]string{"Authorization": "Bearer rcp_wrong-0123456789"}
	for i := range 2 {
		if resp, _ := get(t, srv.URL+"/v1/agents", bad); resp.StatusCode != 401 {
			t.Fatalf("failure %d: %d", i+1, resp.StatusCode)
		}
	}
	mu.Lock()
	if len(verified) != 0 || handled != 2 {
		t.Fatalf("under the limit: verified %v, handled %d; want the handler alone", verified, handled)
	}
	mu.Unlock()
	for _, c := range []struct {
		hdr     map[string]string
		status  int
		handled int
	}{
		{bad, 429, 0},
		{map[string]string{"Authorization": "Basic Zm9vOmJhcg=="}, 429, 0},
		{map[string]string{"Authorization": "Bearer rcp_good"}, 200, 1},
		{nil, 429, 1},
	} {
		mu.Lock()
		before := handled
		mu.Unlock()
		resp, body := get(t, srv.URL+"/v1/agents", c.hdr)
		mu.Lock()
		ran := handled - before
		mu.Unlock()
		if resp.StatusCode != c.status || ran != c.handled {
			t.Fatalf("over the limit with %v: %d (handler ran %d times) %s; want %d, handler %d", c.hdr, resp.StatusCode, ran, body, c.status, c.handled)
		}
		if c.status == 429 && (resp.Header.Get("Retry-After") == "" || !resp.Close) {
			t.Fatalf("over the limit with %v: Retry-After %q, connection kept %v", c.hdr, resp.Header.Get("Retry-After"), !resp.Close)
		}
	}
	mu.Lock()
	if verified["rcp_wrong-0123456789"] != 1 || verified["rcp_good"] != 1 || len(verified) != 2 {
		t.Fatalf("verifier calls %v; want one per bearer credential over the limit", verified)
	}
	mu.Unlock()

	// A wrong credential that announces a body it never sends is answered
	// at once and its connection closed.
	addr := strings.TrimPrefix(srv.URL, "http://")
	conn := dial(t, addr)
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/agents HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer rcp_wrong-0123456789\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n", addr)
	got, err := io.ReadAll(conn)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 429") || !strings.Contains(string(got), "Connection: close") {
		t.Fatalf("stalled body over the limit: %v %q", err, got)
	}
}

// A signed route's 401s (a webhook delivery with a bad signature) do not
// count against the client address, and a client over the limit still has
// its deliveries answered by the handler: one hook with a rotated secret
// cannot lock out the other hooks (or persons) behind a sender's address.
func TestSignedRoutesAreNotCounted(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := New(Options{MaxFailures: 3, Clock: clock, Verify: func(context.Context, string) bool { return false },
		Signed: func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, "/deliveries") }})
	srv := httptest.NewServer(e.Handler(authHandler()))
	defer srv.Close()
	bad := map[string]string{"Authorization": "Bearer rcp_wrong-secret-0123456789"}
	for i := range 10 {
		if resp, _ := get(t, srv.URL+"/v1/hooks/h1/deliveries", nil); resp.StatusCode != 401 {
			t.Fatalf("bad delivery %d: %d, want the handler's 401", i+1, resp.StatusCode)
		}
	}
	for i := range 3 {
		if resp, _ := get(t, srv.URL+"/v1/agents", bad); resp.StatusCode != 401 {
			t.Fatalf("bearer failure %d after 10 bad deliveries: %d, want 401 (deliveries counted?)", i+1, resp.StatusCode)
		}
	}
	if resp, _ := get(t, srv.URL+"/v1/agents", bad); resp.StatusCode != 429 {
		t.Fatalf("the 4th bearer failure: %d, want 429", resp.StatusCode)
	}
	if resp, _ := get(t, srv.URL+"/v1/hooks/h2/deliveries", nil); resp.StatusCode != 401 {
		t.Fatalf("a delivery from a limited address: %d, want the handler's answer", resp.StatusCode)
	}
}
