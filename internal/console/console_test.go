package console_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/console"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/httpapi/apitest"
	"github.com/rollcall/rollcall/internal/oauth"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/server"
	"github.com/rollcall/rollcall/internal/store"
)

// env is the real stack (SQLite store, app.Service on a fake clock) with
// the console mounted like server.Open mounts it.
type env struct {
	*apitest.Env
	url string
}

func newEnv(t *testing.T, o console.Options) *env {
	t.Helper()
	e := apitest.New(t)
	if o.SignIns == nil {
		o.SignIns = oauth.NewGrants(e.Store, e.Service, nil)
	}
	h, err := console.New(e.Service, o)
	if err != nil {
		t.Fatalf("console.New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, h)
	mux.HandleFunc("GET /{$}", console.RedirectRoot)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{Env: e, url: srv.URL}
}

// browser is a cookie-keeping client that does not follow redirects, so
// tests see every 303.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
	csrf string // the last csrf field seen on a page
}

func (e *env) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: e.url, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) do(req *http.Request) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if m := csrfRE.FindSubmatch(body); m != nil {
		b.csrf = string(m[1])
	}
	return resp, string(body)
}

func (b *browser) get(path string) (*http.Response, string) {
	req, _ := http.NewRequest("GET", b.base+path, nil)
	return b.do(req)
}

// post submits a form; the csrf field is added from the last page unless
// the form sets it (set it to "-" to send none).
func (b *browser) post(path string, form url.Values) (*http.Response, string) {
	if form == nil {
		form = url.Values{}
	}
	switch form.Get("csrf") {
	case "":
		form.Set("csrf", b.csrf)
	case "-":
		form.Del("csrf")
	}
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

func (b *browser) signIn(token string) {
	b.t.Helper()
	b.get("/console/signin")
	resp, body := b.post("/console/signin", url.Values{"token": {token}})
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("sign in: %d %s", resp.StatusCode, body)
	}
	b.get("/console/") // picks up the session's csrf token
}

func wantStatus(t *testing.T, resp *http.Response, body string, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d, want %d; body:\n%s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, want, body)
	}
}

func wantContains(t *testing.T, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(body, s) {
			t.Fatalf("page lacks %q; page:\n%s", s, body)
		}
	}
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func admin(t *testing.T, e *env) domain.Person {
	t.Helper()
	p, err := e.Service.AuthenticatePerson(t.Context(), e.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reviewerSignedIn starts a console, vends the admin's agent "reviewer"
// and signs a browser in with the admin token.
func reviewerSignedIn(t *testing.T) (*env, domain.Person, *browser) {
	e := newEnv(t, console.Options{})
	me := admin(t, e)
	vend(t, e, me, "reviewer")
	b := e.browser(t)
	b.signIn(e.AdminToken)
	return e, me, b
}

func vend(t *testing.T, e *env, by domain.Person, handle string) app.VendResult {
	t.Helper()
	r, err := e.Service.Vend(t.Context(), by, app.VendInput{Handle: handle, Queues: []string{"reviews"}, Verbs: domain.ScopeVerbs})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRootRedirectsAndPagesNeedSignIn(t *testing.T) {
	e := newEnv(t, console.Options{})
	b := e.browser(t)
	resp, _ := b.get("/")
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("GET / = %d to %q, want 302 to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = b.get("/console/agents/x")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/signin?next=") {
		t.Fatalf("GET agent page signed out = %d to %q, want 303 to sign-in", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/console/events", "/console/agents/x/card"} {
		resp, body := b.get(p)
		wantStatus(t, resp, body, http.StatusUnauthorized)
	}
	resp, body := b.get("/console/nope/nope")
	wantStatus(t, resp, body, http.StatusNotFound)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("CSP = %q", csp)
	}
}

func TestSignInSetsSessionCookie(t *testing.T) {
	e := newEnv(t, console.Options{})
	b := e.browser(t)
	resp, body := b.get("/console/signin")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `<label for="token">Personal API token</label>`)

	resp, body = b.post("/console/signin", url.Values{"token": {"rcp_wrong"}})
	wantStatus(t, resp, body, http.StatusUnauthorized)
	wantContains(t, body, `id="token-error"`, "That token was not accepted", `aria-invalid="true"`)
	if cookieNamed(resp, console.SessionCookie) != nil {
		t.Fatal("a wrong token set a session cookie")
	}

	resp, body = b.post("/console/signin", url.Values{"token": {e.AdminToken}, "next": {"/console/agents/x"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); loc != "/console/agents/x" {
		t.Fatalf("redirect after sign-in to %q", loc)
	}
	c := cookieNamed(resp, console.SessionCookie)
	if c == nil {
		t.Fatal("no session cookie")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure {
		t.Fatalf("cookie flags: HttpOnly=%v SameSite=%v Path=%q Secure=%v; want HttpOnly, Strict, /, not Secure over http",
			c.HttpOnly, c.SameSite, c.Path, c.Secure)
	}
	if strings.Contains(c.Value, e.AdminToken) || strings.Contains(c.Value, app.HashToken(e.AdminToken)) {
		t.Fatal("the cookie carries the token or its hash in the clear")
	}
	resp, body = b.get("/console/")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "<h1>Fleet</h1>", "Signed in as <strong>admin</strong>")
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control = %q", resp.Header.Get("Cache-Control"))
	}

	// An open redirect is not possible.
	b2 := e.browser(t)
	b2.get("/console/signin")
	resp, _ = b2.post("/console/signin", url.Values{"token": {e.AdminToken}, "next": {"//evil.example/"}})
	if loc := resp.Header.Get("Location"); loc != "/console/" {
		t.Fatalf("next=//evil.example/ redirected to %q", loc)
	}
	// Nor one that leaves the console through dot segments or doubled
	// slashes; a plain console path is kept.
	for next, want := range map[string]string{
		"/console/../v1/agents":        "/console/",
		"/console/%2e%2e/v1/agents":    "/console/",
		"/console/./agents":            "/console/",
		"/console//evil.example/":      "/console/",
		"/console/agents/x?todos=done": "/console/agents/x?todos=done",
	} {
		b3 := e.browser(t)
		b3.get("/console/signin")
		resp, _ = b3.post("/console/signin", url.Values{"token": {e.AdminToken}, "next": {next}})
		if loc := resp.Header.Get("Location"); loc != want {
			t.Errorf("next=%s redirected to %q, want %q", next, loc, want)
		}
	}
}

func TestSecureCookieOverHTTPS(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   console.Options
		header string
	}{
		{"forwarded https", console.Options{}, "https"},
		{"https public url", console.Options{SecureCookies: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			b := e.browser(t)
			req, _ := http.NewRequest("GET", e.url+"/console/signin", nil)
			if tc.header != "" {
				req.Header.Set("X-Forwarded-Proto", tc.header)
			}
			resp, _ := b.do(req)
			if c := cookieNamed(resp, console.SignInCookie); c == nil || !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Fatalf("sign-in cookie %+v, want Secure HttpOnly Strict", c)
			}
		})
	}
}

func TestSignInFormNeedsItsToken(t *testing.T) {
	e := newEnv(t, console.Options{})
	b := e.browser(t)
	// No sign-in cookie (a form posted from another site).
	resp, body := b.post("/console/signin", url.Values{"token": {e.AdminToken}, "csrf": {"forged"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	wantContains(t, body, "CSRF")
	if cookieNamed(resp, console.SessionCookie) != nil {
		t.Fatal("signed in without the form token")
	}
}

func TestCSRFRejected(t *testing.T) {
	e, me, a := reviewerSignedIn(t)
	other := e.browser(t)
	other.signIn(e.AdminToken) // the same person, another session

	for _, tc := range []struct {
		name, csrf string
	}{
		{"missing", "-"},
		{"wrong", "not-the-token"},
		{"another session's", other.csrf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := a.post("/console/agents", url.Values{"csrf": {tc.csrf}, "handle": {"sneaky"}, "queues": {"q"}})
			wantStatus(t, resp, body, http.StatusForbidden)
			wantContains(t, body, "Request refused", "CSRF protection", "nothing was changed")
			resp, body = a.post("/console/agents/reviewer/presence", url.Values{"csrf": {tc.csrf}, "action": {"out"}})
			wantStatus(t, resp, body, http.StatusForbidden)
		})
	}
	agents, _ := e.Service.ListAgents(t.Context(), me)
	if len(agents) != 1 {
		t.Fatalf("agents after refused forms: %d, want 1", len(agents))
	}
	p, _ := e.Service.GetPresence(t.Context(), me, "reviewer")
	if p.Presence != presence.In {
		t.Fatalf("presence after refused form = %s", p.Presence)
	}
	// The real token works.
	resp, body := a.post("/console/agents/reviewer/presence", url.Values{"action": {"out"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
}

func TestSignOutAndExpiry(t *testing.T) {
	e := newEnv(t, console.Options{SessionTTL: time.Hour})
	b := e.browser(t)
	b.signIn(e.AdminToken)
	resp, body := b.post("/console/signout", url.Values{"csrf": {"forged"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	resp, body = b.post("/console/signout", nil)
	wantStatus(t, resp, body, http.StatusSeeOther)
	if c := cookieNamed(resp, console.SessionCookie); c == nil || c.MaxAge >= 0 {
		t.Fatalf("sign-out did not delete the cookie: %+v", c)
	}
	resp, _ = b.get("/console/")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after sign-out GET /console/ = %d, want 303 to sign-in", resp.StatusCode)
	}

	b.signIn(e.AdminToken)
	e.Clock.Advance(time.Hour)
	resp, _ = b.get("/console/")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("an expired session still served the fleet (%d)", resp.StatusCode)
	}
}

func TestSessionSurvivesAnotherInstanceWithTheSameKey(t *testing.T) {
	key := []byte("a shared secret of enough length for the test")
	e := newEnv(t, console.Options{SessionKey: key})
	b := e.browser(t)
	b.signIn(e.AdminToken)
	// A second console on the same service with the same key opens the
	// cookie; one with another key does not.
	for _, tc := range []struct {
		key  []byte
		want int
	}{{key, http.StatusOK}, {[]byte("another key entirely, also long enough"), http.StatusSeeOther}} {
		h, err := console.New(e.Service, console.Options{SessionKey: tc.key})
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest("GET", "/console/", nil)
		u, _ := url.Parse(e.url)
		for _, c := range b.c.Jar.Cookies(u) {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Fatalf("instance with key %q: %d, want %d", tc.key, rec.Code, tc.want)
		}
	}
}

func TestAnotherPersonsAgentIsNotVisible(t *testing.T) {
	e := newEnv(t, console.Options{})
	me := admin(t, e)
	secret := vend(t, e, me, "secret-agent")
	bob := e.browser(t)
	bob.signIn(e.AddPerson(t, "bob"))

	_, body := bob.get("/console/")
	if strings.Contains(body, "secret-agent") || strings.Contains(body, secret.Agent.ID) {
		t.Fatal("bob's fleet shows the admin's agent")
	}
	wantContains(t, body, "No agents yet")
	// Not found, exactly like a ref that does not exist, and nothing about
	// the agent but the ref bob typed.
	for ref, hidden := range map[string]string{"secret-agent": secret.Agent.ID, secret.Agent.ID: "secret-agent"} {
		for _, p := range []string{"/console/agents/" + ref, "/console/agents/" + ref + "/revoke"} {
			resp, body := bob.get(p)
			wantStatus(t, resp, body, http.StatusNotFound)
			wantContains(t, body, "not found")
			if strings.Contains(body, hidden) {
				t.Fatalf("%s leaks %q", p, hidden)
			}
		}
	}
	resp, body := bob.get("/console/agents/" + secret.Agent.ID + "/card")
	wantStatus(t, resp, body, http.StatusNotFound)
	for _, tc := range []struct {
		path string
		form url.Values
	}{
		{"/console/agents/secret-agent/presence", url.Values{"action": {"out"}}},
		{"/console/agents/secret-agent/shift", url.Values{"shift": {"Mon 09:00-10:00"}}},
		{"/console/agents/secret-agent/self-clock-in-cap", url.Values{"self_clock_in_cap": {"24h"}}},
		{"/console/agents/secret-agent/todos", url.Values{"queue": {"reviews"}, "title": {"x"}}},
		{"/console/agents/secret-agent/revoke", nil},
	} {
		resp, body := bob.post(tc.path, tc.form)
		wantStatus(t, resp, body, http.StatusNotFound)
	}
	a, err := e.Service.OwnedAgent(t.Context(), me, "secret-agent")
	if err != nil || a.Revoked() || a.Presence.Shift != "" || a.Presence.Override != "" || a.SelfClockInCap.String() != "8h" {
		t.Fatalf("bob changed the admin's agent: %+v, %v", a.Presence, err)
	}
	todos, _ := e.Service.ListAgentTodos(t.Context(), me, "secret-agent", app.TodoFilter{})
	if len(todos) != 0 {
		t.Fatal("bob pushed a todo to the admin's agent")
	}
}

func TestVendShowsCredentialOnce(t *testing.T) {
	e := newEnv(t, console.Options{})
	b := e.browser(t)
	b.signIn(e.AdminToken)

	resp, body := b.post("/console/agents", url.Values{"handle": {"Bad Handle"}, "queues": {"reviews"}, "verbs": {"claim"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="vend-handle-error"`, "must match", `value="Bad Handle"`)

	resp, body = b.post("/console/agents", url.Values{"handle": {"reviewer"}, "name": {"Code reviewer"},
		"queues": {"reviews, builds"}, "verbs": {"list_todos", "claim_next", "complete"}})
	wantStatus(t, resp, body, http.StatusCreated)
	cred := regexp.MustCompile(`rca_[A-Za-z0-9_-]{43}`).FindString(body)
	if cred == "" {
		t.Fatalf("no credential on the vend page:\n%s", body)
	}
	wantContains(t, body, "claude mcp add --transport http rollcall-reviewer", "shown only this once", `data-copy="mcp-add"`)
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("vend page Cache-Control = %q", resp.Header.Get("Cache-Control"))
	}
	if _, err := e.Service.AuthenticateAgent(t.Context(), cred); err != nil {
		t.Fatalf("the shown credential does not authenticate: %v", err)
	}
	a, err := e.Service.OwnedAgent(t.Context(), admin(t, e), "reviewer")
	if err != nil || strings.Join(a.Scope.Queues, ",") != "reviews,builds" || strings.Join(a.Scope.Verbs, ",") != "list_todos,claim_next,complete" {
		t.Fatalf("vended %+v, %v", a.Scope, err)
	}
	for _, p := range []string{"/console/", "/console/agents/reviewer"} {
		_, body := b.get(p)
		if strings.Contains(body, cred) {
			t.Fatalf("%s shows the credential again", p)
		}
	}
	resp, body = b.post("/console/agents", url.Values{"handle": {"reviewer"}, "queues": {"x"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="vend-handle-error"`, "already taken")
}

func TestShiftErrorShownNextToField(t *testing.T) {
	e := newEnv(t, console.Options{})
	vend(t, e, admin(t, e), "reviewer")
	b := e.browser(t)
	b.signIn(e.AdminToken)
	b.get("/console/agents/reviewer")

	bad := "Mon-Fri 9:00-17:00"
	_, perr := presence.ParseShift(bad)
	var de *domain.Error
	if !errors.As(perr, &de) {
		t.Fatalf("ParseShift(%q) = %v, want a domain error", bad, perr)
	}
	resp, body := b.post("/console/agents/reviewer/shift", url.Values{"shift": {bad}, "op": {"save"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	// The API's message, next to the field, tied to it for screen readers.
	wantContains(t, body, `id="shift-error"`, template(de.Detail), `aria-describedby="shift-help shift-error"`, `aria-invalid="true"`, `value="`+bad+`"`)

	resp, body = b.post("/console/agents/reviewer/shift", url.Values{"shift": {"TZ=Europe/Berlin Mon-Fri 09:00-17:00"}, "op": {"save"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	_, body = b.get(resp.Header.Get("Location"))
	wantContains(t, body, "Shift saved.", "TZ=Europe/Berlin Mon-Fri 09:00-17:00")

	resp, body = b.post("/console/agents/reviewer/shift", url.Values{"op": {"remove"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	a, _ := e.Service.OwnedAgent(t.Context(), admin(t, e), "reviewer")
	if a.Presence.Shift != "" {
		t.Fatalf("shift after remove = %q", a.Presence.Shift)
	}
}

// The owner sets the agent's self clock-in cap on the agent page
// (design: Self clock-in cap); a bad value is shown next to the field and
// changes nothing.
func TestSelfClockInCapForm(t *testing.T) {
	e := newEnv(t, console.Options{})
	vend(t, e, admin(t, e), "reviewer")
	b := e.browser(t)
	b.signIn(e.AdminToken)
	_, body := b.get("/console/agents/reviewer")
	wantContains(t, body, `id="self_clock_in_cap"`, `value="8h"`)

	resp, body := b.post("/console/agents/reviewer/self-clock-in-cap", url.Values{"self_clock_in_cap": {"9 hours"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="cap-error"`, "self_clock_in_cap", `aria-describedby="cap-help cap-error"`, `value="9 hours"`)

	resp, body = b.post("/console/agents/reviewer/self-clock-in-cap", url.Values{"self_clock_in_cap": {"90m"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	_, body = b.get(resp.Header.Get("Location"))
	wantContains(t, body, "Self clock-in cap saved.", `value="1h30m"`)
	if a, _ := e.Service.OwnedAgent(t.Context(), admin(t, e), "reviewer"); a.SelfClockInCap.String() != "1h30m" {
		t.Fatalf("cap after save = %s", a.SelfClockInCap)
	}
}

// template escapes like html/template does for text (quotes become &#34;).
func template(s string) string {
	return strings.NewReplacer(`"`, "&#34;", "'", "&#39;", "<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(s)
}

func TestClockOutUntilAndClear(t *testing.T) {
	e := newEnv(t, console.Options{})
	me := admin(t, e)
	r := vend(t, e, me, "reviewer")
	b := e.browser(t)
	b.signIn(e.AdminToken)

	// The fake clock is 2026-03-02 09:30 UTC; 12:00 in Berlin is 11:00 UTC.
	resp, body := b.post("/console/agents/reviewer/presence", url.Values{"action": {"out"}, "until": {"2026-03-02T12:00"}, "tz": {"Europe/Berlin"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	p, _ := e.Service.GetPresence(t.Context(), me, "reviewer")
	if p.Presence != presence.Out || p.Until == nil || !p.Until.Equal(time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC)) {
		t.Fatalf("presence %s until %v, want out until 11:00 UTC", p.Presence, p.Until)
	}
	_, body = b.get("/console/")
	wantContains(t, body, "Clocked out by operator", "Mon 2 Mar 11:00 UTC", `data-presence="out"`, "Clear override")

	resp, body = b.post("/console/agents/reviewer/presence", url.Values{"action": {"in"}, "until": {"2026-03-02T08:00"}, "back": {"agent"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="until-error-`+r.Agent.ID+`"`, "until: must be after now", "<h1>reviewer</h1>")
	resp, body = b.post("/console/agents/reviewer/presence", url.Values{"action": {"in"}, "until": {"tomorrow"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, "until: enter a date and time")

	resp, body = b.post("/console/agents/reviewer/presence", url.Values{"action": {"clear"}, "back": {"agent"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); loc != "/console/agents/reviewer?done=clear" {
		t.Fatalf("clear redirected to %q", loc)
	}
	_, body = b.get(resp.Header.Get("Location"))
	wantContains(t, body, "In (no shift)", "Override cleared")

	// With a shift the agent is shown off shift, not broken.
	if _, err := e.Service.SetShift(t.Context(), me, "reviewer", ptr("Sat 10:00-12:00")); err != nil {
		t.Fatal(err)
	}
	_, body = b.get("/console/")
	wantContains(t, body, "Off shift", "tone-rest")
}

func ptr(s string) *string { return &s }

func TestAgentPageTodosHeldAndAudit(t *testing.T) {
	e, me, b := reviewerSignedIn(t)
	b.get("/console/agents/reviewer")

	resp, body := b.post("/console/agents/reviewer/todos", url.Values{"queue": {"reviews"}, "title": {""}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="push-title-error"`, "title is required")
	resp, body = b.post("/console/agents/reviewer/todos", url.Values{"queue": {"reviews"}, "title": {"Review PR 7"}, "payload": {"{bad"}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)
	wantContains(t, body, `id="push-payload-error"`, "payload is not valid JSON")

	if _, err := e.Service.SetPresence(t.Context(), me, "reviewer", app.PresenceInput{Presence: presence.Out}); err != nil {
		t.Fatal(err)
	}
	resp, body = b.post("/console/agents/reviewer/todos", url.Values{"queue": {"reviews"}, "title": {"Review PR 7"}, "kind": {"review"}, "payload": {`{"pr":7}`}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	_, body = b.get(resp.Header.Get("Location"))
	wantContains(t, body, "Todo pushed.", "Review PR 7", "held</span>", "Held while the agent is out", "<td>0 / 5</td>",
		"agent.vend", "agent.presence", "<h2 id=\"audit-title\">Audit log</h2>")
	_, body = b.get("/console/")
	wantContains(t, body, "<strong>1</strong> pending", "<strong>1</strong> held", "<strong>0</strong> claimed")
}

func TestRevokeAfterConfirmation(t *testing.T) {
	e, me, b := reviewerSignedIn(t)
	resp, body := b.get("/console/agents/reviewer/revoke")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "Revoke reviewer?", "This is permanent")
	if a, _ := e.Service.OwnedAgent(t.Context(), me, "reviewer"); a.Revoked() {
		t.Fatal("the confirmation page revoked")
	}
	resp, body = b.post("/console/agents/reviewer/revoke", nil)
	wantStatus(t, resp, body, http.StatusSeeOther)
	_, body = b.get(resp.Header.Get("Location"))
	wantContains(t, body, "Agent revoked.", "Revoked")
	if a, _ := e.Service.OwnedAgent(t.Context(), me, "reviewer"); !a.Revoked() {
		t.Fatal("not revoked")
	}
	resp, body = b.post("/console/agents/reviewer/presence", url.Values{"action": {"out"}})
	wantStatus(t, resp, body, http.StatusConflict)
	wantContains(t, body, "agent reviewer is revoked")
}

func TestEventStreamCarriesOnlyOwnAgents(t *testing.T) {
	e := newEnv(t, console.Options{})
	me := admin(t, e)
	mine := vend(t, e, me, "reviewer")
	bobToken := e.AddPerson(t, "bob")
	bob, _ := e.Service.AuthenticatePerson(t.Context(), bobToken)
	bobs := vend(t, e, bob, "builder")

	b := e.browser(t)
	b.signIn(e.AdminToken)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/console/events", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events = %d %q", resp.StatusCode, ct)
	}
	rd := bufio.NewReader(resp.Body)
	readUntil := func(prefix string) string {
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended before %q: %v", prefix, err)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		}
	}
	readUntil("retry:") // the stream is open and subscribed
	// A first heartbeat publishes agent.presence_changed (unknown → online):
	// Bob's agent first, then the admin's.
	for _, v := range []app.VendResult{bobs, mine} {
		p, err := e.Service.AuthenticateAgent(t.Context(), v.Credential)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Service.Heartbeat(t.Context(), p, p.Agent.ID, []byte(`{"state":"online"}`), app.Arrival{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := readUntil("event:"); got != "event: agent\n" {
		t.Fatalf("event line %q", got)
	}
	data := readUntil("data:")
	if !strings.Contains(data, mine.Agent.ID) || strings.Contains(data, bobs.Agent.ID) || !strings.Contains(data, events.KindPresenceChanged) {
		t.Fatalf("first event data %q: want the admin's agent only", data)
	}
}

// TestShutdownEndsEventStreams: an open console event stream does not hold
// the server's graceful shutdown (the hub closes its subscriptions when the
// HTTP server starts shutting down).
func TestShutdownEndsEventStreams(t *testing.T) {
	token := app.NewToken(app.PersonTokenPrefix)
	cfg, err := config.Load(nil, []string{"ROLLCALL_LISTEN=127.0.0.1:0", "ROLLCALL_STORE=sqlite:" + filepath.Join(t.TempDir(), "r.db"),
		"ROLLCALL_BOOTSTRAP_TOKEN=" + token, "ROLLCALL_SHUTDOWN_TOTAL_TIMEOUT=20s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	srv, err := server.Open(ctx, cfg, server.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()

	b := &env{url: srv.URL}
	br := b.browser(t)
	br.signIn(token)
	resp, err := br.c.Get(srv.URL + "/console/events")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("shutdown took %s with an open event stream", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("an open console event stream holds the shutdown")
	}
}

// BenchmarkFleetPage renders the fleet page of a person with 50 agents
// (SQLite): one agent list query plus four indexed reads per card.
//
//	go test -run '^$' -bench FleetPage ./internal/console/
func BenchmarkFleetPage(b *testing.B) {
	e := apitest.New(b)
	h, err := console.New(e.Service, console.Options{})
	if err != nil {
		b.Fatal(err)
	}
	me, _ := e.Service.AuthenticatePerson(b.Context(), e.AdminToken)
	for i := range 50 {
		if _, err := e.Service.Vend(b.Context(), me, app.VendInput{Handle: fmt.Sprintf("agent-%02d", i), Queues: []string{"q"}, Verbs: domain.ScopeVerbs}); err != nil {
			b.Fatal(err)
		}
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	br := &browser{t: nil, base: srv.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	// Sign in by hand (browser.signIn needs a *testing.T).
	resp, _ := br.c.Get(srv.URL + "/console/signin")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	form := url.Values{"token": {e.AdminToken}, "csrf": {string(csrfRE.FindSubmatch(body)[1])}}
	if resp, err = br.c.PostForm(srv.URL+"/console/signin", form); err != nil || resp.StatusCode != http.StatusSeeOther {
		b.Fatalf("sign in: %v %v", resp, err)
	}
	resp.Body.Close()
	b.ResetTimer()
	for b.Loop() {
		resp, err := br.c.Get(srv.URL + "/console/")
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("fleet: %v %v", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestPoolPages renders the pools list and a pool page for a pool of two
// members with one todo waiting and one claimed (design: Pools).
func TestPoolPages(t *testing.T) {
	e, me, b := reviewerSignedIn(t)
	ctx := t.Context()
	vend(t, e, me, "reviewer2")
	_, body := b.get("/console/pools")
	wantContains(t, body, `<a href="/console/pools">Pools</a>`, "No pools yet.")

	if _, err := e.Service.CreatePool(ctx, me, app.PoolInput{Name: "reviewers", Queues: []string{"reviews"}, Members: []string{"reviewer", "reviewer2"}}); err != nil {
		t.Fatal(err)
	}
	waiting, _, err := e.Service.PushPoolTodo(ctx, me, "reviewers", app.PushInput{Queue: "reviews", Title: "Review PR 8"})
	if err != nil {
		t.Fatal(err)
	}
	taken, _, err := e.Service.PushPoolTodo(ctx, me, "reviewers", app.PushInput{Queue: "reviews", Title: "Review PR 9"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.Service.OwnedAgent(ctx, me, "reviewer2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Service.Claim(ctx, &r2, taken.ID, 0); err != nil {
		t.Fatal(err)
	}
	r1, err := e.Service.OwnedAgent(ctx, me, "reviewer")
	if err != nil {
		t.Fatal(err)
	}
	// The doorbell's routing decision (design: Pool routing), made here
	// without a session: the waiting todo rings reviewer.
	rungAt := e.Clock.Now().Add(-time.Minute)
	if ok, err := e.Store.RouteRing(ctx, store.RouteRingParams{TodoID: waiting.ID, AgentID: r1.ID, At: rungAt}); err != nil || !ok {
		t.Fatalf("route ring: %v %v", ok, err)
	}

	resp, body := b.get("/console/pools")
	wantStatus(t, resp, body, http.StatusOK)
	row := between(t, body, `<tr data-pool="reviewers">`, "</tr>")
	wantContains(t, row, `<a href="/console/pools/reviewers">reviewers</a>`, "<code>reviews</code>", "<td>2</td>",
		"<strong>1</strong> <span class=\"meta\">(1 pending, 1 rung)", "<td>1</td>")

	resp, body = b.get("/console/pools/reviewers")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "<h1>Pool reviewers</h1>", `<strong data-backlog>1</strong>, 1 claimed`,
		`<h2 id="members-title">Members <span class="count">(2)</span></h2>`, `data-events="/console/events`)
	for _, m := range []struct {
		a    domain.Agent
		rung string
	}{{r1, `Last rung by this pool: <time datetime="` + rungAt.Format(time.RFC3339) + `" data-rel title="Mon 2 Mar 09:29 UTC">1m ago</time>`}, {r2, "Last rung by this pool: never"}} {
		card := between(t, body, `id="agent-`+m.a.ID+`"`, "</article>")
		// Liveness and presence as on the fleet page, when the pool last rang
		// it, and its presence form returns to the pool page.
		wantContains(t, card, `>`+m.a.Handle+`</a></h3>`, `data-state="unknown"`, "In (no shift)", m.rung, `name="back" value="pool:reviewers"`)
	}
	wantContains(t, between(t, body, `<tr data-todo="`+waiting.ID+`">`, "</tr>"),
		"Review PR 8", `todo-pending">pending`, `rung at <a href="/console/agents/reviewer">reviewer</a> <time`, "<td>1</td>")
	wantContains(t, between(t, body, `<tr data-todo="`+taken.ID+`">`, "</tr>"),
		"Review PR 9", `todo-claimed">claimed`, `held by <a href="/console/agents/reviewer2">reviewer2</a>, lease ends`, "<td>1 / 5</td>")

	// Released (nobody eligible), the todo is held.
	if ok, err := e.Store.ReleaseRing(ctx, store.ReleaseRingParams{TodoID: waiting.ID, AgentID: r1.ID}); err != nil || !ok {
		t.Fatalf("release ring: %v %v", ok, err)
	}
	_, body = b.get("/console/pools/reviewers")
	wantContains(t, between(t, body, `<tr data-todo="`+waiting.ID+`">`, "</tr>"), "no member can answer now")

	// A card form on the pool page comes back to it.
	resp, body = b.post("/console/agents/reviewer/presence", url.Values{"action": {"out"}, "back": {"pool:reviewers"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/console/pools/reviewers?") {
		t.Fatalf("presence form returned to %q", loc)
	}
	_, body = b.get("/console/pools/reviewers")
	wantContains(t, between(t, body, `id="agent-`+r1.ID+`"`, "</article>"), "Clocked out by operator")

	// Another person's pool is not found like a missing one.
	resp, body = b.get("/console/pools/nobody")
	wantStatus(t, resp, body, http.StatusNotFound)
	other := e.browser(t)
	other.signIn(e.AddPerson(t, "mallory"))
	resp, body = other.get("/console/pools/reviewers")
	wantStatus(t, resp, body, http.StatusNotFound)
	_, body = other.get("/console/pools")
	wantContains(t, body, "No pools yet.")
}

// between is the part of s from the first from to the next to after it.
func between(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	if i < 0 {
		t.Fatalf("no %q in\n%s", from, s)
	}
	j := strings.Index(s[i:], to)
	if j < 0 {
		t.Fatalf("no %q after %q", to, from)
	}
	return s[i : i+j]
}

// TestPoolPageGrantedMember: a pool holding another person's agent through
// a pool grant (design: Pool grants) renders; that member is listed by
// handle under "Granted by their owners", without a card or a link to an
// agent page the pool's owner may not read, also where it holds a todo.
func TestPoolPageGrantedMember(t *testing.T) {
	e, me, b := reviewerSignedIn(t)
	ctx := t.Context()
	pc, err := e.Service.CreatePerson(ctx, me, app.PersonInput{Name: "bob", Role: "member"})
	if err != nil {
		t.Fatal(err)
	}
	bobs := vend(t, e, pc.Person, "bobs-reviewer")
	if _, _, err := e.Service.GrantPool(ctx, pc.Person, "bobs-reviewer", app.PoolGrantInput{Person: me.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Service.CreatePool(ctx, me, app.PoolInput{Name: "mixed", Queues: []string{"reviews"}, Members: []string{"reviewer", "bobs-reviewer"}}); err != nil {
		t.Fatal(err)
	}
	td, _, err := e.Service.PushPoolTodo(ctx, me, "mixed", app.PushInput{Queue: "reviews", Title: "Review PR 12"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Service.Claim(ctx, &bobs.Agent, td.ID, 0); err != nil {
		t.Fatal(err)
	}
	resp, body := b.get("/console/pools/mixed")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, `<h2 id="members-title">Members <span class="count">(2)</span></h2>`, "Granted by their owners",
		"<li><code>bobs-reviewer</code> · never rung</li>", "held by <code>bobs-reviewer</code>")
	if strings.Contains(body, `href="/console/agents/bobs-reviewer"`) {
		t.Error("the pool page links to another person's agent")
	}
}
