package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// Browser clients (design: Browser clients), over HTTP against real
// servers: a page of another origin may call the public OAuth endpoints
// (CORS for any origin, no credentials), and /mcp only from an origin in
// mcp.browser_origins; every other foreign Origin stays refused.

const (
	inspectorOrigin = "http://localhost:6274" // a listed browser client
	foreignOrigin   = "https://elsewhere.example"
)

// corsDo sends method u with the Origin and the other headers hdr and body
// ("" = none) and returns the answer and its body.
func corsDo(t *testing.T, method, u, origin, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var req *http.Request
	if body != "" {
		req, _ = http.NewRequest(method, u, strings.NewReader(body))
	} else {
		req, _ = http.NewRequest(method, u, nil)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	return sendWith(t, &http.Client{CheckRedirect: noRedirects}, req)
}

// preflight is the browser's OPTIONS before a request of method with the
// request headers reqHeaders.
func preflight(t *testing.T, u, origin, method, reqHeaders string) (*http.Response, string) {
	t.Helper()
	return corsDo(t, http.MethodOptions, u, origin, "", map[string]string{"Access-Control-Request-Method": method, "Access-Control-Request-Headers": reqHeaders})
}

// hasTokens reports whether the comma list v names every one of want
// (case-insensitive).
func hasTokens(v string, want ...string) bool {
	have := map[string]bool{}
	for _, p := range strings.Split(v, ",") {
		have[strings.ToLower(strings.TrimSpace(p))] = true
	}
	for _, w := range want {
		if !have[strings.ToLower(w)] {
			return false
		}
	}
	return true
}

// wantPublicCORS fails unless resp carries the public CORS answer: any
// origin, no credentials.
func wantPublicCORS(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Errorf("%s: Access-Control-Allow-Origin %q, want *", what, got)
	}
	if got := resp.Header.Get("Access-Control-Allow-Credentials"); got != "" {
		t.Errorf("%s: Access-Control-Allow-Credentials %q, want none", what, got)
	}
}

// wantForbidden fails unless resp is the edge's 403 problem and carries no
// CORS header.
func wantForbidden(t *testing.T, what string, resp *http.Response, body string) {
	t.Helper()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"code":"forbidden"`) || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("%s: %d ACAO %q %s, want the 403 forbidden problem without CORS", what, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), body)
	}
}

// A page of another origin discovers the server, registers a client,
// exchanges the code the person approved (in their own browser tab, same
// origin) and revokes the token: each preflight and each request is
// answered with Access-Control-Allow-Origin: *. The authorization
// endpoint and the console stay same-origin.
func TestBrowserClientOAuthEndpoints(t *testing.T) {
	bothStores(t, func(t *testing.T, storeURL string) {
		in := startInstance(t, storeURL)
		for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server"} {
			resp, _ := preflight(t, in.base+p, foreignOrigin, "GET", "mcp-protocol-version")
			if resp.StatusCode != http.StatusNoContent || !hasTokens(resp.Header.Get("Access-Control-Allow-Headers"), "Mcp-Protocol-Version", "Authorization", "Content-Type") {
				t.Errorf("preflight %s: %d %v", p, resp.StatusCode, resp.Header)
			}
			wantPublicCORS(t, "preflight "+p, resp)
			resp, body := corsDo(t, "GET", in.base+p, foreignOrigin, "", map[string]string{"Mcp-Protocol-Version": "2025-11-25"})
			if resp.StatusCode != 200 || !strings.Contains(body, in.base) {
				t.Errorf("GET %s from %s: %d %s", p, foreignOrigin, resp.StatusCode, body)
			}
			wantPublicCORS(t, "GET "+p, resp)
		}
		for _, p := range []string{"/oauth/register", "/oauth/token", "/oauth/revoke"} {
			resp, _ := preflight(t, in.base+p, foreignOrigin, "POST", "content-type")
			if resp.StatusCode != http.StatusNoContent || !hasTokens(resp.Header.Get("Access-Control-Allow-Methods"), "POST") ||
				!hasTokens(resp.Header.Get("Access-Control-Allow-Headers"), "Content-Type") {
				t.Errorf("preflight %s: %d %v", p, resp.StatusCode, resp.Header)
			}
			wantPublicCORS(t, "preflight "+p, resp)
		}

		resp, body := corsDo(t, "POST", in.base+"/oauth/register", foreignOrigin,
			`{"client_name":"Test client","redirect_uris":["`+redirectURI+`"],"token_endpoint_auth_method":"none"}`, map[string]string{"Content-Type": "application/json"})
		var reg struct {
			ClientID string `json:"client_id"`
		}
		if err := json.Unmarshal([]byte(body), &reg); err != nil || resp.StatusCode != 201 || reg.ClientID == "" {
			t.Fatalf("register from %s: %d %s", foreignOrigin, resp.StatusCode, body)
		}
		wantPublicCORS(t, "register", resp)

		// The person approves in their own tab (same origin, cookies).
		agent := vend(t, in, "web-agent").Agent
		f := newFlow(t, in.base)
		f.clientID = reg.ClientID
		code := f.approve(in.base, agent.ID)
		form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {"http://127.0.0.1:43210/callback"},
			"code_verifier": {f.verifier}, "client_id": {reg.ClientID}}
		resp, body = corsDo(t, "POST", in.base+"/oauth/token", foreignOrigin, form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		var tok tokenAnswer
		if err := json.Unmarshal([]byte(body), &tok); err != nil || resp.StatusCode != 200 || tok.AccessToken == "" || tok.RefreshToken == "" {
			t.Fatalf("token from %s: %d %s", foreignOrigin, resp.StatusCode, body)
		}
		wantPublicCORS(t, "token", resp)
		// A refused token request is readable too (the page shows the error).
		resp, body = corsDo(t, "POST", in.base+"/oauth/token", foreignOrigin, form.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if resp.StatusCode != 400 || !strings.Contains(body, "invalid_grant") {
			t.Fatalf("reused code from %s: %d %s", foreignOrigin, resp.StatusCode, body)
		}
		wantPublicCORS(t, "refused token request", resp)

		// The new pair (the replayed code revoked the first), then revoked
		// from the page.
		wantOK(t, "exchange", f.exchange(in.base, f.approve(in.base, agent.ID), nil))
		pair := f.exchange(in.base, f.approve(in.base, agent.ID), nil)
		wantOK(t, "exchange", pair)
		resp, body = corsDo(t, "POST", in.base+"/oauth/revoke", foreignOrigin, url.Values{"token": {pair.RefreshToken}, "client_id": {reg.ClientID}}.Encode(),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		if resp.StatusCode != 200 {
			t.Fatalf("revoke from %s: %d %s", foreignOrigin, resp.StatusCode, body)
		}
		wantPublicCORS(t, "revoke", resp)
		if st := mcpStatus(t, in.base, pair.AccessToken); st != 401 {
			t.Fatalf("revoked token at /mcp: %d, want 401", st)
		}

		// Same-origin only: the authorization endpoint, the console, and
		// a preflight of either.
		resp, body = corsDo(t, "GET", in.base+"/oauth/authorize?client_id="+reg.ClientID, foreignOrigin, "", nil)
		wantForbidden(t, "authorize from "+foreignOrigin, resp, body)
		resp, body = preflight(t, in.base+"/oauth/authorize", foreignOrigin, "GET", "")
		wantForbidden(t, "authorize preflight", resp, body)
		resp, body = preflight(t, in.base+"/console/oauth/consent", foreignOrigin, "POST", "content-type")
		wantForbidden(t, "consent preflight", resp, body)
		resp, body = corsDo(t, "POST", in.base+"/console/oauth/consent", foreignOrigin, "id=x", map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		wantForbidden(t, "consent from "+foreignOrigin, resp, body)

		// The Host rule still holds on the public routes (DNS rebinding).
		resp, body = corsDo(t, "GET", in.base+"/.well-known/oauth-authorization-server", foreignOrigin, "", map[string]string{"Host": "rebound.example"})
		wantForbidden(t, "metadata under a rebound Host", resp, body)
	})
}

// /mcp from a page: an origin in mcp.browser_origins gets its preflight
// answered and its requests served with CORS headers naming it (never
// with credentials), Mcp-Session-Id and WWW-Authenticate exposed; any
// other foreign Origin is refused with the edge's problem, preflight or
// not.
func TestBrowserClientMCP(t *testing.T) {
	in := startInstance(t, sqliteStore(t), "ROLLCALL_MCP_BROWSER_ORIGINS=https://other.example,"+inspectorOrigin)
	cred := vend(t, in, "browser").Credential

	resp, _ := preflight(t, in.base+"/mcp", inspectorOrigin, "POST", "authorization,content-type,mcp-protocol-version")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != inspectorOrigin ||
		!hasTokens(resp.Header.Get("Access-Control-Allow-Methods"), "GET", "POST", "DELETE") ||
		!hasTokens(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID") ||
		!hasTokens(resp.Header.Get("Vary"), "Origin") || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("preflight from a listed origin: %d %v", resp.StatusCode, resp.Header)
	}

	// Without a token: 401 whose challenge the page can read.
	resp, body := corsDo(t, "POST", in.base+"/mcp", inspectorOrigin, initializeBody, map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
	if resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "resource_metadata=") ||
		resp.Header.Get("Access-Control-Allow-Origin") != inspectorOrigin || !hasTokens(resp.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Fatalf("/mcp without token from a listed origin: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	// With one: served, the session id readable.
	hdr := map[string]string{"Authorization": "Bearer " + cred, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
	resp, body = corsDo(t, "POST", in.base+"/mcp", inspectorOrigin, initializeBody, hdr)
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" || resp.Header.Get("Access-Control-Allow-Origin") != inspectorOrigin ||
		!hasTokens(resp.Header.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id", "WWW-Authenticate") || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Fatalf("/mcp with a token from a listed origin: %d %v %s", resp.StatusCode, resp.Header, body)
	}

	// Any other foreign Origin: refused, preflight or not, token or not.
	for _, origin := range []string{foreignOrigin, "http://localhost:6275", "null"} {
		resp, body = preflight(t, in.base+"/mcp", origin, "POST", "authorization,content-type")
		wantForbidden(t, "preflight from "+origin, resp, body)
		resp, body = corsDo(t, "POST", in.base+"/mcp", origin, initializeBody, hdr)
		wantForbidden(t, "/mcp from "+origin, resp, body)
		if !strings.Contains(body, "mcp.browser_origins") {
			t.Errorf("/mcp from %s: the refusal %s does not name mcp.browser_origins", origin, body)
		}
	}
	// A listed origin opens /mcp only, not the REST API or the console.
	resp, body = corsDo(t, "GET", in.base+"/v1/agents", inspectorOrigin, "", map[string]string{"Authorization": "Bearer " + adminToken})
	wantForbidden(t, "REST from a browser origin", resp, body)
	resp, body = preflight(t, in.base+"/console/", inspectorOrigin, "GET", "")
	wantForbidden(t, "console preflight from a browser origin", resp, body)
}

// Without mcp.browser_origins (the default) no page of another origin
// reaches /mcp.
func TestBrowserClientMCPDefault(t *testing.T) {
	in := startInstance(t, sqliteStore(t))
	resp, body := preflight(t, in.base+"/mcp", inspectorOrigin, "POST", "authorization")
	wantForbidden(t, "preflight", resp, body)
	resp, body = corsDo(t, "POST", in.base+"/mcp", inspectorOrigin, initializeBody, map[string]string{"Authorization": "Bearer " + vend(t, in, "x").Credential,
		"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
	wantForbidden(t, "/mcp", resp, body)
}

// prompt=none (design: Silent authorization requests) never shows a page:
// after the request validated, the client gets login_required without a
// console session, consent_required with one (every sign-in is approved
// on the consent page); an invalid request is refused as without it.
func TestOAuthPromptNone(t *testing.T) {
	bothStores(t, func(t *testing.T, storeURL string) {
		in := startInstance(t, storeURL)
		f := newFlow(t, in.base) // signed in
		jar, _ := cookiejar.New(nil)
		anon := &oauthFlow{t: t, browser: &http.Client{Jar: jar, CheckRedirect: noRedirects}, clientID: f.clientID, verifier: f.verifier}
		for name, c := range map[string]struct {
			flow   *oauthFlow
			prompt string
			err    string
		}{
			"signed in":         {f, "none", "consent_required"},
			"not signed in":     {anon, "none", "login_required"},
			"none with another": {f, "none consent", "invalid_request"},
		} {
			resp := c.flow.authorize(in.base, url.Values{"prompt": {c.prompt}})
			back, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusFound || back == nil || back.Host != "127.0.0.1:43210" || back.Query().Get("error") != c.err ||
				back.Query().Get("state") != "st4te" || back.Query().Get("iss") != in.base || back.Query().Get("code") != "" {
				t.Errorf("%s: %d Location %q, want %s sent back with state and iss", name, resp.StatusCode, resp.Header.Get("Location"), c.err)
			}
		}
		// A request that breaks a rule gets that rule's answer.
		resp := f.authorize(in.base, url.Values{"prompt": {"none"}, "code_challenge_method": nil, "code_challenge": nil})
		if back, _ := url.Parse(resp.Header.Get("Location")); back == nil || back.Query().Get("error") != "invalid_request" {
			t.Errorf("prompt=none without PKCE: %d Location %q, want invalid_request", resp.StatusCode, resp.Header.Get("Location"))
		}
		resp = anon.authorize(in.base, url.Values{"prompt": {"none"}, "redirect_uri": {"https://attacker.example/callback"}})
		if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
			t.Errorf("prompt=none to an unregistered redirect_uri: %d Location %q, want 400 without a redirect", resp.StatusCode, resp.Header.Get("Location"))
		}
		// Other prompt values still reach the consent page.
		for _, p := range []string{"consent", "login"} {
			if resp := f.authorize(in.base, url.Values{"prompt": {p}}); resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), "/console/oauth/consent?id=") {
				t.Errorf("prompt=%s: %d Location %q, want the consent page", p, resp.StatusCode, resp.Header.Get("Location"))
			}
		}
	})
}

// prompt given more than once, in the query or in the query and the body
// together, is invalid_request at the client's registered redirect URI,
// never the consent page or another prompt's answer (design: Silent
// authorization requests); to an unregistered URI nothing is sent.
func TestOAuthPromptGivenTwice(t *testing.T) {
	in := startInstance(t, sqliteStore(t))
	f := newFlow(t, in.base) // signed in
	query := func(change url.Values) url.Values {
		q := url.Values{"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {"http://127.0.0.1:43210/callback"},
			"state": {"st4te"}, "code_challenge": {challenge(f.verifier)}, "code_challenge_method": {"S256"}, "resource": {in.base + "/mcp"}}
		for k, v := range change {
			q[k] = v
		}
		return q
	}
	wantInvalid := func(name string, resp *http.Response) {
		t.Helper()
		back, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusFound || back == nil || back.Host != "127.0.0.1:43210" || back.Query().Get("error") != "invalid_request" ||
			back.Query().Get("state") != "st4te" || back.Query().Get("iss") != in.base || back.Query().Get("code") != "" {
			t.Errorf("%s: %d Location %q, want invalid_request sent back with state and iss", name, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	wantInvalid("none then login", f.authorize(in.base, url.Values{"prompt": {"none", "login"}}))
	wantInvalid("login then none", f.authorize(in.base, url.Values{"prompt": {"login", "none"}}))
	wantInvalid("login twice", f.authorize(in.base, url.Values{"prompt": {"login", "login"}}))
	resp, _ := f.post(in.base+"/oauth/authorize?prompt=login", query(url.Values{"prompt": {"none"}}))
	wantInvalid("body and query", resp)
	resp = f.authorize(in.base, url.Values{"prompt": {"none", "login"}, "redirect_uri": {"https://attacker.example/callback"}})
	if resp.StatusCode != 400 || resp.Header.Get("Location") != "" {
		t.Errorf("unregistered redirect_uri: %d Location %q, want 400 without a redirect", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// A registration whose member names repeat, exactly or in another letter
// case, is refused (design: Strict JSON) rather than read as its last
// spelling.
func TestOAuthRegistrationRepeatedNames(t *testing.T) {
	in := startInstance(t, sqliteStore(t))
	register := func(body string) (int, map[string]string) {
		resp, err := http.Post(in.base+"/oauth/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		return resp.StatusCode, raw
	}
	for body, ptr := range map[string]string{
		`{"redirect_uris":["http://127.0.0.1:1/cb"],"REDIRECT_URIS":["https://evil.example/x"]}`: "/REDIRECT_URIS",
		`{"redirect_uris":["http://127.0.0.1:1/cb"],"redirect_uris":["https://evil.example/x"]}`: "/redirect_uris",
	} {
		if code, raw := register(body); code != 400 || raw["error"] != "invalid_client_metadata" || !strings.Contains(raw["error_description"], " at "+ptr+" ") {
			t.Errorf("%s: %d %+v, want invalid_client_metadata naming %s", body, code, raw, ptr)
		}
	}
	// A name that would read as another on the consent page is refused.
	for _, name := range []string{"Claude\u202eedoC", "Clau\u200dde", "a\ab"} {
		if code, raw := register(`{"redirect_uris":["http://127.0.0.1:1/cb"],"client_name":"` + name + `"}`); code != 400 || raw["error"] != "invalid_client_metadata" {
			t.Errorf("client_name %q: %d %+v, want invalid_client_metadata", name, code, raw)
		}
	}
	// No fragment, not even an empty one; a port that exists.
	for _, uri := range []string{"https://x.example/cb#", "http://127.0.0.1:99999/cb"} {
		if code, raw := register(`{"redirect_uris":["` + uri + `"]}`); code != 400 || raw["error"] != "invalid_redirect_uri" {
			t.Errorf("redirect_uri %s: %d %+v, want invalid_redirect_uri", uri, code, raw)
		}
	}
}
