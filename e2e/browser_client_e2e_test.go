package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestE2EBrowserClient: a web MCP client in headless chromium, served from
// another loopback origin than the real binary (design: Browser clients).
// Its script discovers the server, registers itself and sends the browser
// to the authorization endpoint; the signed-in person approves on the
// consent page; back on its callback page the script exchanges the code
// (PKCE) and opens an MCP session with the token — every fetch
// cross-origin, allowed by CORS because the page's origin is in
// mcp.browser_origins. A page of an unlisted origin may still use the
// public OAuth endpoints but not /mcp.
func TestE2EBrowserClient(t *testing.T) {
	page := `<!doctype html><title>web client</title><p id="page">web client</p>`
	pages := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/callback" {
			fmt.Fprint(w, `<!doctype html><title>callback</title><p id="callback">callback</p>`)
			return
		}
		fmt.Fprint(w, page)
	})
	listed := httptest.NewServer(pages)
	t.Cleanup(listed.Close)
	unlisted := httptest.NewServer(pages)
	t.Cleanup(unlisted.Close)

	browser, a, _ := signedInBrowser(t, "web-agent", "--mcp.browser_origins", listed.URL)
	eval := func(step, script string) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, wait)
		defer cancel()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var out map[string]any
		if err := json.Unmarshal([]byte(s), &out); err != nil {
			t.Fatalf("%s: %v in %s", step, err, s)
		}
		t.Logf("%s: %s", step, s)
		return out
	}

	// Discovery, registration and the authorization request, from the page.
	browse(t, browser, "open the web client", chromedp.Navigate(listed.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#page`)))
	start := eval("discover and register", fmt.Sprintf(`(async () => {
		const challenge401 = await fetch(%q + "/mcp", {method: "POST", headers: {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, body: "{}"});
		const www = challenge401.headers.get("WWW-Authenticate") || "";
		const prmURL = www.match(/resource_metadata="([^"]+)"/)[1];
		const prm = await (await fetch(prmURL, {headers: {"MCP-Protocol-Version": "2025-11-25"}})).json();
		const asm = await (await fetch(prm.authorization_servers[0] + "/.well-known/oauth-authorization-server", {headers: {"MCP-Protocol-Version": "2025-11-25"}})).json();
		const reg = await fetch(asm.registration_endpoint, {method: "POST", headers: {"Content-Type": "application/json"},
			body: JSON.stringify({client_name: "Web client", redirect_uris: [location.origin + "/callback"], token_endpoint_auth_method: "none"})});
		const client = await reg.json();
		const bytes = crypto.getRandomValues(new Uint8Array(32));
		const b64 = b => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
		const verifier = b64(bytes);
		const challenge = b64(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
		sessionStorage.setItem("oauth", JSON.stringify({verifier, client_id: client.client_id, token_endpoint: asm.token_endpoint, resource: prm.resource}));
		const q = new URLSearchParams({response_type: "code", client_id: client.client_id, redirect_uri: location.origin + "/callback",
			state: "st4te", code_challenge: challenge, code_challenge_method: "S256", resource: prm.resource});
		return JSON.stringify({status401: challenge401.status, resource: prm.resource, registered: reg.status, client_id: client.client_id,
			authorize: asm.authorization_endpoint + "?" + q});
	})()`, a.URL))
	if start["status401"] != float64(401) || start["resource"] != a.URL+"/mcp" || start["registered"] != float64(201) || start["client_id"] == "" {
		t.Fatalf("the page's discovery and registration: %v", start)
	}

	// The person approves; the browser comes back to the page's callback.
	browse(t, browser, "approve on the consent page",
		chromedp.Navigate(start["authorize"].(string)),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)),
		chromedp.Click(chromedp.CSS(`#agent-web-agent`)),
		chromedp.Click(chromedp.CSS(`#approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#callback`)),
	)
	done := eval("exchange the code and open a session", `(async () => {
		const st = JSON.parse(sessionStorage.getItem("oauth"));
		const q = new URLSearchParams(location.search);
		const tok = await fetch(st.token_endpoint, {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"},
			body: new URLSearchParams({grant_type: "authorization_code", code: q.get("code"), redirect_uri: location.origin + "/callback",
				code_verifier: st.verifier, client_id: st.client_id, resource: st.resource})});
		const t = await tok.json();
		const init = await fetch(st.resource, {method: "POST", headers: {"Authorization": "Bearer " + t.access_token, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"},
			body: JSON.stringify({jsonrpc: "2.0", id: 1, method: "initialize", params: {protocolVersion: "2025-11-25", capabilities: {}, clientInfo: {name: "web", version: "1"}}})});
		const body = await init.text();
		return JSON.stringify({state: q.get("state"), iss: q.get("iss"), token: tok.status, token_type: t.token_type, refresh: !!t.refresh_token,
			mcp: init.status, session: init.headers.get("Mcp-Session-Id") || "", result: body.includes('"result"')});
	})()`)
	if done["state"] != "st4te" || done["iss"] != a.URL || done["token"] != float64(200) || done["token_type"] != "Bearer" || done["refresh"] != true ||
		done["mcp"] != float64(200) || !strings.HasPrefix(done["session"].(string), "rcs_") || done["result"] != true {
		t.Fatalf("the page's exchange and MCP session: %v", done)
	}

	// A page of an unlisted origin: the public endpoints answer it, /mcp
	// does not (the browser sees a failed preflight).
	browse(t, browser, "open an unlisted page", chromedp.Navigate(unlisted.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#page`)))
	other := eval("an unlisted origin", fmt.Sprintf(`(async () => {
		const base = %q;
		const asm = await fetch(base + "/.well-known/oauth-authorization-server");
		const reg = await fetch(base + "/oauth/register", {method: "POST", headers: {"Content-Type": "application/json"},
			body: JSON.stringify({client_name: "Other", redirect_uris: [location.origin + "/callback"]})});
		let mcp = "served";
		try {
			await fetch(base + "/mcp", {method: "POST", headers: {"Authorization": "Bearer x", "Content-Type": "application/json"}, body: "{}"});
		} catch (e) { mcp = "blocked: " + e.name; }
		return JSON.stringify({metadata: asm.status, registered: reg.status, mcp});
	})()`, a.URL))
	if other["metadata"] != float64(200) || other["registered"] != float64(201) || other["mcp"] != "blocked: TypeError" {
		t.Fatalf("an unlisted page: %v", other)
	}
}
