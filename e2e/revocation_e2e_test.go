package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/testkit"
)

// revocationBound is the bound (design: Revocation within 5 s): a revoked principal is refused
// on every instance within 5 s, even when no bus signal arrives.
const revocationBound = 5 * time.Second

// TestRevocationWithoutBusSignal: two `rollcall serve` processes on one
// PostgreSQL database. An agent's gateway connection and MCP session and a
// person token's event stream are open on B; the credential and the token
// are then revoked with plain SQL — no NOTIFY reaches any instance — and B
// must close all three, and refuse the token on REST, within 5 s (design:
// Revocation within 5 s).
func TestRevocationWithoutBusSignal(t *testing.T) {
	store := pgtest.FreshDatabase(t)
	a, b := startPairOn(t, store, "--doorbell.sweep_interval", "1h")
	agent := vend(t, a, "revoked-elsewhere", []string{"q"}, allVerbs)

	// A second personal token of the admin, minted through A.
	var tok struct{ ID, Token string }
	if code := restDo(t, a, "POST", "/v1/tokens", map[string]string{"name": "stream"}, &tok); code != 201 {
		t.Fatalf("POST /v1/tokens: %d", code)
	}

	// On B: the event stream, the gateway connection, the MCP session.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sreq, _ := http.NewRequestWithContext(ctx, "GET", b.URL+"/v1/events", nil)
	sreq.Header.Set("Authorization", "Bearer "+tok.Token)
	sresp, err := http.DefaultClient.Do(sreq)
	if err != nil || sresp.StatusCode != 200 {
		t.Fatalf("GET /v1/events on B: %v %v", sresp, err)
	}
	streamEnded := make(chan time.Time, 1)
	go func() {
		sc := bufio.NewScanner(sresp.Body)
		for sc.Scan() {
		}
		streamEnded <- time.Now()
	}()

	gwClosed := testkit.Gateway(t, b.URL, agent.Credential)
	sess := openGoSession(t, b.URL+"/mcp", agent.Credential)

	// Revoke both behind every instance's back.
	db, err := sql.Open("pgx", store)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE credentials SET revoked_at = now() WHERE agent_id = $1`, agent.Agent.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE person_tokens SET revoked_at = now() WHERE id = $1`, tok.ID); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()

	select {
	case code := <-gwClosed:
		if code != 4004 {
			t.Errorf("gateway closed with %d, want 4004", code)
		}
		if d := time.Since(revokedAt); d > revocationBound {
			t.Errorf("the gateway connection on B closed %s after the revoke, want ≤ %s", d, revocationBound)
		}
	case <-time.After(wait):
		t.Fatal("the gateway connection on B stayed open after the revoke")
	}
	select {
	case at := <-streamEnded:
		if d := at.Sub(revokedAt); d > revocationBound {
			t.Errorf("the event stream on B ended %s after the revoke, want ≤ %s", d, revocationBound)
		}
	case <-time.After(wait):
		t.Fatal("the event stream on B stayed open after the token was revoked")
	}
	// The MCP session: a call fails (session closed, credential refused).
	deadline := revokedAt.Add(revocationBound)
	for {
		cctx, ccancel := context.WithTimeout(context.Background(), wait)
		_, err := sess.Client().ListTools(cctx, mcp.ListToolsRequest{})
		ccancel()
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MCP session on B still works %s after the revoke", time.Since(revokedAt))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := time.Since(revokedAt); d > revocationBound {
		t.Errorf("revocation took %s on B, want ≤ %s", d, revocationBound)
	}
	// REST on B: the token's lookup, cached when the stream opened, is
	// read again once it is 2 s old (design: Credential cache).
	for {
		code, err := testkit.REST(b.URL, tok.Token, "GET", "/v1/agents", nil, nil)
		if err == nil && code == 401 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("REST on B still answers %d (%v) to the revoked token %s after the revoke", code, err, time.Since(revokedAt))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestConsoleSignOutAcrossInstances: two instances with one session key on
// one PostgreSQL database. A console session signed in on A, signed out on
// B: the copied cookie no longer opens the fleet page on A (design: Console sessions).
func TestConsoleSignOutAcrossInstances(t *testing.T) {
	a, b := startPairOn(t, pgtest.FreshDatabase(t), "--console.session_key", "e2e shared console key, long enough to be a secret")

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrfRE := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	page := func(base, path string) (int, string) {
		t.Helper()
		resp, err := browser.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	post := func(base, path string, form url.Values) int {
		t.Helper()
		resp, err := browser.PostForm(base+path, form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	_, body := page(a.URL, "/console/signin")
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("sign-in page without csrf:\n%s", body)
	}
	if code := post(a.URL, "/console/signin", url.Values{"csrf": {m[1]}, "token": {adminToken}}); code != http.StatusSeeOther {
		t.Fatalf("sign in on A: %d", code)
	}
	// The cookie is for 127.0.0.1 (both instances): it works on B too.
	ua, _ := url.Parse(a.URL)
	copied := jar.Cookies(ua)
	code, body := page(b.URL, "/console/")
	if code != http.StatusOK {
		t.Fatalf("fleet page on B with A's session: %d", code)
	}
	m = csrfRE.FindStringSubmatch(body)
	if code := post(b.URL, "/console/signout", url.Values{"csrf": {m[1]}}); code != http.StatusSeeOther {
		t.Fatalf("sign out on B: %d", code)
	}
	req, _ := http.NewRequest("GET", a.URL+"/console/", nil)
	for _, c := range copied {
		req.AddCookie(c)
	}
	resp, err := (&http.Client{CheckRedirect: browser.CheckRedirect}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the copied cookie opens the fleet page on A after sign-out on B: %d", resp.StatusCode)
	}
}
