package e2e

import (
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/internal/testkit"
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

// TestE2EOAuthSignInClaudeCode: the real Claude Code binary signs in the
// way the README shows — `claude mcp add --transport http` with no header,
// then `claude mcp login` (the shell form of /mcp → Authenticate) — while
// headless chromium approves on the consent page; `claude mcp list` then
// connects with the token it got, and an interactive session on it gets a
// todo's doorbell, which the model (the scripted fake API) claims and
// completes. Offline, Claude Code's own client metadata document (on
// claude.ai) cannot be fetched, so the server runs with
// oauth.client_metadata_documents=false and Claude Code registers instead.
func TestE2EOAuthSignInClaudeCode(t *testing.T) {
	claudeBinary(t)
	needTmux(t)
	api := startFakeAnthropic(t, "mcp__rollcall")
	ce := claudeOffline(t, api.URL, "mcp__rollcall")
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script(1) is needed to give claude mcp login a terminal")
	}
	browser, a, _ := signedInBrowser(t, "claude-signed-in", "--oauth.client_metadata_documents=false")
	ce.claude(t, "mcp", "add", "--transport", "http", "rollcall", a.URL+"/mcp")

	// Claude Code opens the authorization URL with $BROWSER: this one
	// writes it to a file for chromedp.
	urls := filepath.Join(t.TempDir(), "urls")
	opener := filepath.Join(t.TempDir(), "browser.sh")
	if err := os.WriteFile(opener, []byte("#!/bin/sh\necho \"$1\" >> "+shQuote(urls)+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	login := exec.Command("script", "-qfec", shQuote(ce.bin)+" mcp login rollcall", "/dev/null")
	login.Dir, login.Env = ce.work, append(ce.env, "BROWSER="+opener)
	var out testkit.SyncBuffer
	login.Stdout, login.Stderr = &out, &out
	if err := login.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- login.Wait() }()
	t.Cleanup(func() {
		login.Process.Kill()
		if t.Failed() {
			t.Logf("claude mcp login:\n%s", out.String())
		}
	})
	var authURL string
	waitUntil(t, "claude mcp login opens the authorization URL", func() bool {
		b, _ := os.ReadFile(urls)
		authURL, _, _ = strings.Cut(string(b), "\n")
		return authURL != ""
	})
	if !strings.HasPrefix(authURL, a.URL+"/oauth/authorize?") || !strings.Contains(authURL, "code_challenge_method=S256") {
		t.Fatalf("Claude Code's authorization URL %q", authURL)
	}
	browse(t, browser, "approve Claude Code on the consent page",
		chromedp.Navigate(authURL),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)),
		chromedp.Click(chromedp.CSS(`#agent-claude-signed-in`)),
		chromedp.Click(chromedp.CSS(`#approve`)),
	)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("claude mcp login: %v", err)
		}
	case <-time.After(claudeWait):
		t.Fatal("claude mcp login did not finish after the approval")
	}
	if list := ce.claude(t, "mcp", "list"); !strings.Contains(list, "rollcall") || !strings.Contains(list, "✔ Connected") {
		t.Fatalf("claude mcp list after signing in:\n%s", list)
	}
	browse(t, browser, "the agent page lists Claude Code",
		chromedp.Navigate(a.URL+"/console/agents/claude-signed-in"),
		chromedp.WaitVisible(chromedp.CSS(`#signins-title + ul`)),
	)
	if listed, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(`#signins-title + ul`))); err != nil || !strings.Contains(listed, "Claude Code") {
		t.Fatalf("the agent page lists %q (%v), want Claude Code", listed, err)
	}

	// An interactive session on the signed-in server: a pushed todo's
	// doorbell reaches the model, which claims and completes it.
	startInteractive(t, ce, "--dangerously-load-development-channels", "server:rollcall")
	id := pushTodo(t, a, "claude-signed-in", "q", "Rung over a sign-in")
	waitUntil(t, "the todo done through the model's claim and complete", func() bool { return todoState(t, a, id) == "done" })
	if !slices.ContainsFunc(api.Channels(), func(c string) bool { return strings.Contains(c, ` todo_id="`+id+`"`) }) {
		t.Fatalf("the model saw no <channel … todo_id=%s> tag; saw %q", id, api.Channels())
	}
}
