package edge

import (
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
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(wait))
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
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	fmt.Fprintf(conn, "POST /v1/agents HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer rcp_wrong-0123456789\r\nContent-Type: application/json\r\nContent-Length: 10000\r\n\r\n", addr)
	got, err := io.ReadAll(conn)
	if err != nil || !strings.HasPrefix(string(got), "HTTP/1.1 429") || !strings.Contains(string(got), "Connection: close") {
		t.Fatalf("stalled body over the limit: %v %q", err, got)
	}
}
