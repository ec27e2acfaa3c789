package server_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/oauth"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/server"
)

// Sign-in for MCP clients, driven over HTTP against real servers on both
// stores: a public client registers, a person approves on the console's
// consent page, the code is exchanged with PKCE, and the token acts as the
// agent at /mcp. Every negative case is refused with the RFC's error and
// issues nothing.

const redirectURI = "http://127.0.0.1/callback"

// oauthFlow is one browser (a cookie jar signed in to the console) and one
// registered client against one or two instances.
type oauthFlow struct {
	t        *testing.T
	browser  *http.Client
	clientID string
	verifier string
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (f *oauthFlow) send(req *http.Request) (*http.Response, string) {
	f.t.Helper()
	return sendWith(f.t, f.browser, req)
}

// sendWith does the request with c and returns the answer and its body.
func sendWith(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func (f *oauthFlow) get(u string) (*http.Response, string) {
	req, _ := http.NewRequest("GET", u, nil)
	return f.send(req)
}

func (f *oauthFlow) post(u string, form url.Values) (*http.Response, string) {
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return f.send(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in:\n%s", page)
	}
	return m[1]
}

// newFlow signs the admin in to base's console and registers a client.
func newFlow(t *testing.T, base string) *oauthFlow {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	f := &oauthFlow{t: t, browser: &http.Client{Jar: jar, CheckRedirect: noRedirects}, verifier: strings.Repeat("v", 50)}
	f.signIn(base)
	req, _ := http.NewRequest("POST", base+"/oauth/register", strings.NewReader(`{"client_name":"Test client","redirect_uris":["`+redirectURI+`"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, body := f.send(req)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if err := json.Unmarshal([]byte(body), &reg); err != nil || resp.StatusCode != 201 || reg.ClientID == "" {
		t.Fatalf("register: %d %s", resp.StatusCode, body)
	}
	f.clientID = reg.ClientID
	return f
}

func (f *oauthFlow) signIn(base string) {
	_, page := f.get(base + "/console/signin")
	resp, body := f.post(base+"/console/signin", url.Values{"csrf": {csrfOf(f.t, page)}, "token": {adminToken}})
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("sign-in: %d %s", resp.StatusCode, body)
	}
}

func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize sends the authorization request with the given changes to the
// defaults and returns the response (not followed).
func (f *oauthFlow) authorize(base string, change url.Values) *http.Response {
	q := url.Values{"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {"http://127.0.0.1:43210/callback"},
		"state": {"st4te"}, "code_challenge": {challenge(f.verifier)}, "code_challenge_method": {"S256"}, "resource": {base + "/mcp"}}
	for k, v := range change {
		if v == nil {
			q.Del(k)
		} else {
			q[k] = v
		}
	}
	resp, _ := f.get(base + "/oauth/authorize?" + q.Encode())
	return resp
}

// approve runs the authorization request and approves it on the consent
// page as the agent agentID; it returns the code from the redirect.
func (f *oauthFlow) approve(base, agentID string) string {
	f.t.Helper()
	return f.decide(base, url.Values{"agent": {agentID}, "decision": {"approve"}})
}

// decide runs the authorization request and posts the consent form with
// the given fields; it returns the code from the redirect.
func (f *oauthFlow) decide(base string, form url.Values) string {
	f.t.Helper()
	resp := f.authorize(base, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/console/oauth/consent?id=") {
		f.t.Fatalf("authorize: %d Location %q", resp.StatusCode, loc)
	}
	resp, page := f.get(base + loc)
	if resp.StatusCode != 200 || !strings.Contains(page, "Test client") {
		f.t.Fatalf("consent page: %d\n%s", resp.StatusCode, page)
	}
	id := strings.TrimPrefix(loc, "/console/oauth/consent?id=")
	form.Set("csrf", csrfOf(f.t, page))
	form.Set("id", id)
	resp, body := f.post(base+"/console/oauth/consent", form)
	if resp.StatusCode != http.StatusSeeOther {
		f.t.Fatalf("consent: %d\n%s", resp.StatusCode, body)
	}
	resp, _ = f.get(base + resp.Header.Get("Location"))
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || back.Host != "127.0.0.1:43210" {
		f.t.Fatalf("callback: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if q := back.Query(); q.Get("state") != "st4te" || q.Get("iss") == "" || q.Get("code") == "" {
		f.t.Fatalf("authorization response lacks state, iss or code: %s", back)
	}
	return back.Query().Get("code")
}

type tokenAnswer struct {
	Status       int
	Error        string `json:"error"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
}

func (f *oauthFlow) token(base string, form url.Values) tokenAnswer {
	f.t.Helper()
	form.Set("client_id", f.clientID)
	resp, body := f.post(base+"/oauth/token", form)
	var a tokenAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		f.t.Fatalf("token answer %d: %s", resp.StatusCode, body)
	}
	a.Status = resp.StatusCode
	return a
}

func (f *oauthFlow) exchange(base, code string, change url.Values) tokenAnswer {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"http://127.0.0.1:43210/callback"},
		"code_verifier": {f.verifier}, "resource": {base + "/mcp"}}
	for k, v := range change {
		form[k] = v
	}
	return f.token(base, form)
}

func (f *oauthFlow) refresh(base, refresh string) tokenAnswer {
	return f.token(base, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}, "resource": {base + "/mcp"}})
}

func wantOK(t *testing.T, what string, a tokenAnswer) {
	t.Helper()
	if a.Status != 200 || a.AccessToken == "" || a.RefreshToken == "" || a.TokenType != "Bearer" || a.ExpiresIn <= 0 {
		t.Fatalf("%s: %+v", what, a)
	}
}

func wantRefused(t *testing.T, what string, a tokenAnswer, code string) {
	t.Helper()
	if a.Status != 400 || a.Error != code || a.AccessToken != "" || a.RefreshToken != "" {
		t.Fatalf("%s: %+v, want 400 %s and no token", what, a, code)
	}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// mcpPost posts one JSON-RPC message to /mcp with the bearer token (and
// the session id, unless "") and returns the answer, its body read.
func mcpPost(t *testing.T, base, token, session, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": session} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, _ := sendWith(t, http.DefaultClient, req)
	return resp
}

// mcpStatus is the status of an MCP initialize with the bearer token.
func mcpStatus(t *testing.T, base, token string) int {
	t.Helper()
	return mcpPost(t, base, token, "", initializeBody).StatusCode
}

// signedInAgent starts an instance on SQLite (env as startInstance), vends
// an agent handle and signs a client in as it: the tokens it got.
func signedInAgent(t *testing.T, handle string, env ...string) (*instance, app.VendResult, *oauthFlow, tokenAnswer) {
	t.Helper()
	in := startInstance(t, sqliteStore(t), env...)
	v := vend(t, in, handle)
	f := newFlow(t, in.base)
	tok := f.exchange(in.base, f.approve(in.base, v.Agent.ID), nil)
	wantOK(t, "exchange", tok)
	return in, v, f, tok
}

func sqliteStore(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "r.db") }

func postgresStore(t *testing.T) string {
	shared := pgtest.AdminURL(t)
	return pgtest.WithDatabase(t, shared, pgtest.CreateDatabase(t, shared))
}

func bothStores(t *testing.T, run func(t *testing.T, storeURL string)) {
	t.Run("sqlite", func(t *testing.T) { run(t, sqliteStore(t)) })
	t.Run("postgres", func(t *testing.T) { run(t, postgresStore(t)) })
}

// The metadata documents and the 401 challenge let a client find the
// authorization server by itself; rca_ credentials keep working.
func TestOAuthDiscovery(t *testing.T) {
	in := startInstance(t, sqliteStore(t))
	resp, err := http.Post(in.base+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := `Bearer resource_metadata="` + in.base + `/.well-known/oauth-protected-resource/mcp"`; resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("/mcp without credentials: %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		getJSON(t, in.base+p, &prm)
		if prm.Resource != in.base+"/mcp" || len(prm.AuthorizationServers) != 1 || prm.AuthorizationServers[0] != in.base {
			t.Fatalf("%s: %+v", p, prm)
		}
	}
	var asm map[string]any
	getJSON(t, in.base+"/.well-known/oauth-authorization-server", &asm)
	for k, want := range map[string]string{"issuer": in.base, "authorization_endpoint": in.base + "/oauth/authorize", "token_endpoint": in.base + "/oauth/token",
		"registration_endpoint": in.base + "/oauth/register"} {
		if asm[k] != want {
			t.Fatalf("metadata %s = %v, want %s", k, asm[k], want)
		}
	}
	if m, _ := json.Marshal(asm["code_challenge_methods_supported"]); string(m) != `["S256"]` {
		t.Fatalf("code_challenge_methods_supported %s", m)
	}
	if m, _ := json.Marshal(asm["grant_types_supported"]); string(m) != `["authorization_code","refresh_token"]` {
		t.Fatalf("grant_types_supported %s", m)
	}
	cred := vend(t, in, "headless").Credential
	if st := mcpStatus(t, in.base, cred); st != 200 {
		t.Fatalf("rca_ credential at /mcp: %d", st)
	}
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// The whole grant on both stores, then every refusal: wrong verifier,
// reused code (which also revokes what the code issued), redirect URI
// mismatch, another resource, plain PKCE, a rotated refresh token (which
// revokes the grant), and a revoked agent.
func TestOAuthGrantAndRefusals(t *testing.T) {
	bothStores(t, func(t *testing.T, storeURL string) {
		in := startInstance(t, storeURL)
		agent := vend(t, in, "signed-in").Agent
		f := newFlow(t, in.base)

		// Wrong verifier: invalid_grant, and the code is spent.
		code := f.approve(in.base, agent.ID)
		wantRefused(t, "wrong verifier", f.exchange(in.base, code, url.Values{"code_verifier": {strings.Repeat("w", 50)}}), "invalid_grant")
		wantRefused(t, "the code after a wrong verifier", f.exchange(in.base, code, nil), "invalid_grant")

		// Redirect URI not the one of the request: invalid_grant.
		code = f.approve(in.base, agent.ID)
		wantRefused(t, "redirect_uri mismatch at the token endpoint", f.exchange(in.base, code, url.Values{"redirect_uri": {"http://127.0.0.1:43210/other"}}), "invalid_grant")

		// Another resource at the token endpoint: invalid_target.
		code = f.approve(in.base, agent.ID)
		wantRefused(t, "another resource", f.exchange(in.base, code, url.Values{"resource": {"https://elsewhere.example/mcp"}}), "invalid_target")

		// The grant.
		code = f.approve(in.base, agent.ID)
		first := f.exchange(in.base, code, nil)
		wantOK(t, "exchange", first)
		if st := mcpStatus(t, in.base, first.AccessToken); st != 200 {
			t.Fatalf("access token at /mcp: %d", st)
		}
		// The code again: refused, and what it issued is revoked.
		wantRefused(t, "reused code", f.exchange(in.base, code, nil), "invalid_grant")
		if st := mcpStatus(t, in.base, first.AccessToken); st != 401 {
			t.Fatalf("access token of a replayed code at /mcp: %d, want 401", st)
		}
		wantRefused(t, "refresh token of a replayed code", f.refresh(in.base, first.RefreshToken), "invalid_grant")

		// Rotation: the new pair works, the old refresh token is refused
		// and revokes the grant.
		code = f.approve(in.base, agent.ID)
		pair := f.exchange(in.base, code, nil)
		wantOK(t, "exchange", pair)
		next := f.refresh(in.base, pair.RefreshToken)
		wantOK(t, "refresh", next)
		if st := mcpStatus(t, in.base, next.AccessToken); st != 200 {
			t.Fatalf("refreshed access token at /mcp: %d", st)
		}
		wantRefused(t, "rotated refresh token", f.refresh(in.base, pair.RefreshToken), "invalid_grant")
		wantRefused(t, "refresh token of a replayed family", f.refresh(in.base, next.RefreshToken), "invalid_grant")
		if st := mcpStatus(t, in.base, next.AccessToken); st != 401 {
			t.Fatalf("access token of a replayed family at /mcp: %d, want 401", st)
		}

		// Revoking the agent ends its tokens.
		code = f.approve(in.base, agent.ID)
		live := f.exchange(in.base, code, nil)
		wantOK(t, "exchange", live)
		if _, err := in.srv.Service.RevokeAgent(t.Context(), in.admin, agent.ID); err != nil {
			t.Fatal(err)
		}
		if st := mcpStatus(t, in.base, live.AccessToken); st != 401 {
			t.Fatalf("access token of a revoked agent at /mcp: %d, want 401", st)
		}
		wantRefused(t, "refresh token of a revoked agent", f.refresh(in.base, live.RefreshToken), "invalid_grant")
	})
}

// Authorization requests that break a rule never reach the consent page:
// an unregistered redirect URI gets no redirect at all; the others are
// sent back to the client with the error and iss.
func TestOAuthAuthorizeRefusals(t *testing.T) {
	in := startInstance(t, sqliteStore(t))
	f := newFlow(t, in.base)
	resp := f.authorize(in.base, url.Values{"redirect_uri": {"http://127.0.0.1:43210/elsewhere"}})
	if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Fatalf("unregistered redirect_uri: %d Location %q, want 400 without a redirect", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp = f.authorize(in.base, url.Values{"redirect_uri": {"https://attacker.example/callback"}})
	if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Fatalf("foreign redirect_uri: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	for name, c := range map[string]struct {
		change url.Values
		err    string
	}{
		"plain PKCE":       {url.Values{"code_challenge_method": {"plain"}, "code_challenge": {f.verifier}}, "invalid_request"},
		"no PKCE":          {url.Values{"code_challenge_method": nil, "code_challenge": nil}, "invalid_request"},
		"another resource": {url.Values{"resource": {"https://elsewhere.example/mcp"}}, "invalid_target"},
		"implicit grant":   {url.Values{"response_type": {"token"}}, "unauthorized_client"},
		// response_modes_supported is query alone: a request for another
		// mode is refused, in the query, beside iss.
		"fragment mode":           {url.Values{"response_mode": {"fragment"}}, "invalid_request"},
		"form_post mode":          {url.Values{"response_mode": {"form_post"}}, "invalid_request"},
		"implicit, fragment mode": {url.Values{"response_type": {"token"}, "response_mode": {"fragment"}}, "unauthorized_client"},
	} {
		resp := f.authorize(in.base, c.change)
		back, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || back == nil || back.Host != "127.0.0.1:43210" || back.Query().Get("error") != c.err ||
			back.Query().Get("iss") != in.base || back.Query().Get("code") != "" || back.Fragment != "" {
			t.Errorf("%s: %d Location %q, want the error %s sent back in the query with iss", name, resp.StatusCode, resp.Header.Get("Location"), c.err)
		}
	}
	// Denying on the consent page answers access_denied.
	resp = f.authorize(in.base, nil)
	loc := resp.Header.Get("Location")
	_, page := f.get(in.base + loc)
	resp, _ = f.post(in.base+"/console/oauth/consent", url.Values{"csrf": {csrfOf(t, page)}, "id": {strings.TrimPrefix(loc, "/console/oauth/consent?id=")}, "decision": {"deny"}})
	resp, _ = f.get(in.base + resp.Header.Get("Location"))
	if back, _ := url.Parse(resp.Header.Get("Location")); back == nil || back.Query().Get("error") != "access_denied" || back.Query().Get("code") != "" || back.Query().Get("iss") != in.base {
		t.Fatalf("denied: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The password grant is not offered.
	wantRefused(t, "password grant", f.token(in.base, url.Values{"grant_type": {"password"}, "username": {"a"}, "password": {"b"}}), "unsupported_grant_type")
}

// A code issued by instance A is redeemed at instance B (which has the
// same public URL, as behind a load balancer), and B's token works at A
// and B: every piece of state is in the shared database.
func TestOAuthAcrossInstances(t *testing.T) {
	db := postgresStore(t)
	a := startInstance(t, db)
	b := startInstance(t, db, "ROLLCALL_PUBLIC_URL="+a.base)
	bAddr := "http://" + b.srv.Addr()
	agent := vend(t, a, "shared").Agent
	f := newFlow(t, a.base)
	code := f.approve(a.base, agent.ID)
	tok := f.exchange(bAddr, code, url.Values{"resource": {a.base + "/mcp"}})
	wantOK(t, "exchange at B", tok)
	for _, base := range []string{a.base, bAddr} {
		if st := mcpStatus(t, base, tok.AccessToken); st != 200 {
			t.Fatalf("B's token at %s: %d", base, st)
		}
	}
}

// Revoking one sign-in closes the sessions opened with its tokens and no
// others; revoking the agent closes the rest (design: Revocation within
// 5 s: the grant is an agent credential, re-checked like any).
func TestOAuthRevocationClosesSessions(t *testing.T) {
	in, v, f, tok := signedInAgent(t, "revoked-later")
	signedIn := openSession(t, in, v.Agent.ID, tok.AccessToken)
	headless := openSession(t, in, v.Agent.ID, v.Credential)
	grants, err := in.srv.SignIns.ListOAuthGrants(t.Context(), in.admin, v.Agent.ID)
	if err != nil || len(grants) != 1 || grants[0].ClientName != "Test client" || grants[0].LastUsedAt == nil {
		t.Fatalf("grants %+v %v, want one of Test client, used", grants, err)
	}
	open := func(id string) bool {
		for _, si := range in.srv.MCP.AgentSessions(v.Agent.ID) {
			if si.ID == id {
				return true
			}
		}
		return false
	}
	if err := in.srv.SignIns.RevokeOAuthGrant(t.Context(), in.admin, v.Agent.ID, grants[0].ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the signed-in session is closed", func() bool { return !open(signedIn.id) })
	if !open(headless.id) {
		t.Fatal("revoking a sign-in closed the rca_ credential's session")
	}
	if st := mcpStatus(t, in.base, tok.AccessToken); st != 401 {
		t.Fatalf("revoked sign-in's token at /mcp: %d", st)
	}
	wantRefused(t, "revoked sign-in's refresh token", f.refresh(in.base, tok.RefreshToken), "invalid_grant")
	if grants, _ := in.srv.SignIns.ListOAuthGrants(t.Context(), in.admin, v.Agent.ID); len(grants) != 0 {
		t.Fatalf("revoked grant still listed: %+v", grants)
	}
	again := f.exchange(in.base, f.approve(in.base, v.Agent.ID), nil)
	wantOK(t, "second sign-in", again)
	second := openSession(t, in, v.Agent.ID, again.AccessToken)
	if _, err := in.srv.Service.RevokeAgent(t.Context(), in.admin, v.Agent.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent's sessions are closed", func() bool { return !open(second.id) && !open(headless.id) })
}

// The consent page vends a new agent for the client (the vend form) and
// approves it: the token acts as that agent with exactly its scope.
func TestOAuthConsentVendsAnAgent(t *testing.T) {
	in := startInstance(t, sqliteStore(t))
	f := newFlow(t, in.base)
	code := f.decide(in.base, url.Values{"decision": {"vend"}, "handle": {"made-for-client"}, "queues": {"q1"}, "verbs": {"claim", "complete"}})
	tok := f.exchange(in.base, code, nil)
	wantOK(t, "exchange", tok)
	a, err := in.srv.Service.OwnedAgent(t.Context(), in.admin, "made-for-client")
	if err != nil || len(a.Scope.Verbs) != 2 {
		t.Fatalf("vended agent %+v %v", a, err)
	}
	p, err := in.srv.SignIns.AuthenticateOAuth(t.Context(), mustSecret(t, tok.AccessToken))
	if err != nil || p.Agent.ID != a.ID {
		t.Fatalf("the token acts as %+v (%v), want %s", p.Agent, err, a.ID)
	}
}

func mustSecret(t *testing.T, token string) string {
	t.Helper()
	s, ok := oauth.OAuthAccessSecret(token)
	if !ok {
		t.Fatalf("%q is not an access token", token)
	}
	return s
}

// Past the failed-auth limit a signed-in client's valid token is still
// served and a forged one refused 429 (design: The failed-auth limit).
func TestOAuthTokenPastTheFailureLimit(t *testing.T) {
	in, v, _, tok := signedInAgent(t, "limited-signin", "ROLLCALL_AUTH_MAX_FAILURES=2")
	forged := oauth.SealOAuthValue(strings.Repeat("0", 64) + ":" + v.Agent.ID)
	for i, want := range []int{401, 401, 429} {
		if st := mcpStatus(t, in.base, forged); st != want {
			t.Fatalf("forged token %d: %d, want %d", i+1, st, want)
		}
	}
	if st := mcpStatus(t, in.base, tok.AccessToken); st != 200 {
		t.Fatalf("a valid access token past the limit: %d", st)
	}
}

// A client whose client_id is the URL of its metadata document signs in
// without registering; a document that names another client_id is
// refused before the consent page.
func TestOAuthClientMetadataDocument(t *testing.T) {
	docs := http.NewServeMux()
	tls := httptest.NewTLSServer(docs)
	defer tls.Close()
	good, bad := tls.URL+"/client.json", tls.URL+"/other.json"
	docs.HandleFunc("/client.json", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"client_id": good, "client_name": "Test client", "redirect_uris": []string{redirectURI}, "token_endpoint_auth_method": "none"})
	})
	docs.HandleFunc("/other.json", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"client_id": good, "client_name": "Impostor", "redirect_uris": []string{redirectURI}})
	})
	in := startInstanceWith(t, sqliteStore(t), server.Options{OAuthMetadataClient: tls.Client()})
	v := vend(t, in, "by-metadata")
	f := newFlow(t, in.base)
	f.clientID = good
	tok := f.exchange(in.base, f.approve(in.base, v.Agent.ID), nil)
	wantOK(t, "exchange", tok)
	if st := mcpStatus(t, in.base, tok.AccessToken); st != 200 {
		t.Fatalf("token of a metadata-document client at /mcp: %d", st)
	}
	f.clientID = bad
	if resp := f.authorize(in.base, nil); resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Fatalf("document naming another client_id: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The default fetcher reaches public addresses only.
	in2 := startInstance(t, sqliteStore(t))
	f2 := newFlow(t, in2.base)
	f2.clientID = good
	if resp := f2.authorize(in2.base, nil); resp.StatusCode != 400 {
		t.Fatalf("a document on a loopback address was fetched: %d", resp.StatusCode)
	}
}

// A session belongs to the grant: after a refresh the session goes on with
// the new access token (design: Sign-ins are credentials).
func TestOAuthSessionSurvivesRefresh(t *testing.T) {
	in, _, f, first := signedInAgent(t, "refreshed")
	resp := mcpPost(t, in.base, first.AccessToken, "", initializeBody)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d session %q", resp.StatusCode, session)
	}
	next := f.refresh(in.base, first.RefreshToken)
	wantOK(t, "refresh", next)
	if resp := mcpPost(t, in.base, next.AccessToken, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the session with the refreshed token: %d, want 202", resp.StatusCode)
	}
	other := vend(t, in, "someone-else").Credential
	if resp := mcpPost(t, in.base, other, session, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the session with another agent's credential: %d, want 403", resp.StatusCode)
	}
}

// RFC 7009 revocation at /oauth/revoke revokes the token's grant.
func TestOAuthRevokeEndpoint(t *testing.T) {
	in := startInstance(t, sqliteStore(t))
	v := vend(t, in, "self-revoked")
	f := newFlow(t, in.base)
	for _, which := range []string{"refresh", "access"} {
		tok := f.exchange(in.base, f.approve(in.base, v.Agent.ID), nil)
		wantOK(t, "exchange", tok)
		token := map[string]string{"refresh": tok.RefreshToken, "access": tok.AccessToken}[which]
		if resp, body := f.post(in.base+"/oauth/revoke", url.Values{"token": {token}, "client_id": {f.clientID}}); resp.StatusCode != 200 {
			t.Fatalf("revoke the %s token: %d %s", which, resp.StatusCode, body)
		}
		if st := mcpStatus(t, in.base, tok.AccessToken); st != 401 {
			t.Fatalf("access token after revoking the %s token: %d", which, st)
		}
		wantRefused(t, "refresh after revocation", f.refresh(in.base, tok.RefreshToken), "invalid_grant")
	}
}
