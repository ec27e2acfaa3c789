package e2e

import (
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestE2EOAuthSignInTSClient: the official MCP TypeScript SDK's OAuth
// client connects to the real binary with no credential (design: Sign-in
// for MCP clients). It follows the 401 to the metadata, registers, and
// sends the browser to the authorization endpoint; headless chromium,
// signed in to the console, approves on the consent page as an agent; the
// SDK takes the code from its loopback callback, exchanges it and opens a
// session on the token it got, which then receives a doorbell.
func TestE2EOAuthSignInTSClient(t *testing.T) {
	browser, a, _ := signedInBrowser(t, "signed-in")

	c := launchTSClient(t, a.URL+"/mcp", "-", "--oauth")
	auth := c.next("authorize")
	u, err := url.Parse(auth.URL)
	if err != nil || !strings.HasPrefix(auth.URL, a.URL+"/oauth/authorize?") {
		t.Fatalf("authorization URL %q", auth.URL)
	}
	if q := u.Query(); q.Get("code_challenge_method") != "S256" || q.Get("resource") != a.URL+"/mcp" || q.Get("response_type") != "code" {
		t.Fatalf("the SDK's authorization request: %s", u.RawQuery)
	}
	browse(t, browser, "approve on the consent page",
		chromedp.Navigate(auth.URL),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)),
		chromedp.Click(chromedp.CSS(`#agent-signed-in`)),
		chromedp.Click(chromedp.CSS(`#approve`)),
	)
	cb := c.next("callback")
	if cb.Iss != a.URL || !cb.StateOK {
		t.Fatalf("authorization response: iss %q (want %q), state matches %v", cb.Iss, a.URL, cb.StateOK)
	}
	ready := c.next("ready")
	if ready.Session == "" || len(ready.Tools) == 0 {
		t.Fatalf("session on the signed-in token: %+v", ready)
	}

	out := cli(t, a, "todo", "push", "signed-in", "--queue", "q", "--title", "rung over a signed-in session", "--json")
	n := c.next("notification")
	if n.Method != "notifications/claude/channel" || n.Params.Meta["todo_id"] == "" || !strings.Contains(out, n.Params.Meta["todo_id"]) {
		t.Fatalf("doorbell %+v for push %s", n, out)
	}

	// The agent page lists the sign-in; revoking it there ends the session.
	browse(t, browser, "revoke the sign-in on the agent page",
		chromedp.Navigate(a.URL+"/console/agents/signed-in"),
		chromedp.WaitVisible(chromedp.CSS(`#signins-title`)),
	)
	listed, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#signins-title + ul`)))
	if err != nil || !strings.Contains(listed, "Rollcall e2e (MCP TypeScript SDK)") {
		t.Fatalf("the agent page lists %q (%v), want the SDK client", listed, err)
	}
	browse(t, browser, "revoke", chromedp.Click(chromedp.CSS(`form[action*="/signins/"] button`)), chromedp.WaitVisible(chromedp.CSS(`#signins-title + p.empty`)))
	io.WriteString(c.stdin, `{"id":99,"cmd":"list_tools"}`+"\n")
	if ev := c.next("error"); ev.ID == nil || *ev.ID != 99 {
		t.Fatalf("after the revoke the client got %+v, want its request refused", ev)
	}
}
