package edge

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// CORS (design: Browser clients): a public route takes any Origin and
// gets Access-Control-Allow-Origin: *; a bearer route only the listed
// origins, each named back; preflights are answered by the edge without
// the handler or the failed-auth count; everything else keeps the Origin
// rule, and the Host rule holds on every route.
func TestCORS(t *testing.T) {
	var served atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.URL.Path == "/bearer" && r.Header.Get("Authorization") != "Bearer rcp_good" {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	e := New(Options{MaxFailures: 1, Log: slog.New(slog.DiscardHandler), CORS: CORS{
		Public:  func(r *http.Request) bool { return r.URL.Path == "/public" },
		Bearer:  func(r *http.Request) bool { return r.URL.Path == "/bearer" },
		Origins: []string{"https://App.example/", "HTTP://Local.Example:80", "http://[::1]:8080"},
	}})
	srv := httptest.NewServer(e.Handler(next))
	defer srv.Close()
	do := func(method, path string, hdr map[string]string) *http.Response {
		t.Helper()
		resp, _ := send(t, method, srv.URL+path, hdr)
		return resp
	}
	pre := func(origin string) map[string]string {
		return map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
	}

	// Public: any origin, preflight at the edge, never credentials.
	resp := do("OPTIONS", "/public", pre("https://any.example"))
	h := resp.Header
	if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Allow-Headers") != publicAllowHeaders ||
		h.Get("Access-Control-Allow-Methods") != publicAllowMethods || h.Get("Access-Control-Max-Age") == "" || h.Get("Access-Control-Allow-Credentials") != "" || served.Load() != 0 {
		t.Fatalf("public preflight: %d %v (served %d)", resp.StatusCode, h, served.Load())
	}
	resp = do("POST", "/public", map[string]string{"Origin": "https://any.example"})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Credentials") != "" || served.Load() != 1 {
		t.Fatalf("public request: %d %v", resp.StatusCode, resp.Header)
	}
	if resp = do("OPTIONS", "/public", map[string]string{"Origin": "https://any.example"}); served.Load() != 2 {
		t.Fatalf("an OPTIONS that is no preflight goes to the handler: %d", resp.StatusCode)
	}
	if resp = do("GET", "/public", map[string]string{"Origin": "https://any.example", "Host": "rebound.example"}); resp.StatusCode != 403 {
		t.Fatalf("public route under a foreign Host: %d, want 403", resp.StatusCode)
	}

	// Bearer: the listed origin (case and trailing slash aside) named back.
	served.Store(0)
	for range 3 { // preflights are no failed authentications (MaxFailures 1)
		resp = do("OPTIONS", "/bearer", pre("https://app.example"))
	}
	h = resp.Header
	if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "https://app.example" || h.Get("Vary") != "Origin" ||
		h.Get("Access-Control-Allow-Headers") != bearerAllowHeaders || h.Get("Access-Control-Allow-Credentials") != "" || served.Load() != 0 {
		t.Fatalf("bearer preflight: %d %v (served %d)", resp.StatusCode, h, served.Load())
	}
	resp = do("POST", "/bearer", map[string]string{"Origin": "https://app.example", "Authorization": "Bearer rcp_good"})
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || resp.Header.Get("Access-Control-Expose-Headers") != bearerExposeHeaders {
		t.Fatalf("bearer request: %d %v", resp.StatusCode, resp.Header)
	}
	resp = do("POST", "/bearer", map[string]string{"Origin": "https://app.example"})
	if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Fatalf("bearer 401: %d %v", resp.StatusCode, resp.Header)
	}

	// A listed origin matches as a browser serialises it (RFC 6454), and
	// the answer names it so: the byte-for-byte value a browser's CORS
	// check compares with its own origin.
	for origin, want := range map[string]string{
		"http://local.example": "http://local.example",
		"http://[::1]:8080":    "http://[::1]:8080",
		"https://APP.example":  "",
		"HTTPS://app.example":  "",
		"https://app.example/": "",
	} {
		resp = do("POST", "/bearer", map[string]string{"Origin": origin, "Authorization": "Bearer rcp_good"})
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != want {
			t.Errorf("Origin %q: Access-Control-Allow-Origin %q, want %q", origin, got, want)
		}
	}

	// Anything else: the Origin rule.
	for name, c := range map[string]struct {
		method, path string
		hdr          map[string]string
	}{
		"unlisted origin on the bearer route": {"POST", "/bearer", map[string]string{"Origin": "https://other.example", "Authorization": "Bearer rcp_good"}},
		"unlisted origin's preflight":         {"OPTIONS", "/bearer", pre("https://other.example")},
		"listed origin on another route":      {"GET", "/other", map[string]string{"Origin": "https://app.example"}},
		"listed origin's preflight elsewhere": {"OPTIONS", "/other", pre("https://app.example")},
		"a look-alike of the listed origin":   {"POST", "/bearer", map[string]string{"Origin": "https://app.example.evil", "Authorization": "Bearer rcp_good"}},
		"the listed origin on another scheme": {"POST", "/bearer", map[string]string{"Origin": "http://app.example", "Authorization": "Bearer rcp_good"}},
	} {
		if resp := do(c.method, c.path, c.hdr); resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %v, want 403 without CORS", name, resp.StatusCode, resp.Header)
		}
	}
}
