package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/server"
	"github.com/rollcall/rollcall/internal/testkit"
)

// screenshotDir is where the browser test saves fleet.png, agent.png and pool.png:
// $ROLLCALL_SCREENSHOTS, or the repository's tmp/screenshots/ (ignored by
// git). `ROLLCALL_SCREENSHOTS=$PWD/docs/screenshots` refreshes the copies
// the README shows.
func screenshotDir() string {
	if d := os.Getenv("ROLLCALL_SCREENSHOTS"); d != "" {
		return d
	}
	return "../../tmp/screenshots"
}

// chromium finds Debian's chromium (or $ROLLCALL_CHROMIUM). Without one the
// browser tests skip, unless ROLLCALL_REQUIRE_BROWSER=1, which fails them.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ROLLCALL_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ROLLCALL_REQUIRE_BROWSER") == "1" {
		t.Fatal("chromium is not installed and ROLLCALL_REQUIRE_BROWSER=1 (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed; set ROLLCALL_REQUIRE_BROWSER=1 to fail instead")
	return ""
}

// realServer starts the real server in-process (server.Open with a
// temporary SQLite store and a bootstrap token) on 127.0.0.1:0, with a
// short presence timeout so offline arrives in about two seconds.
func realServer(t *testing.T) (*server.Server, string) {
	t.Helper()
	token := app.NewToken(app.PersonTokenPrefix)
	cfg, err := config.Load(nil, []string{
		"ROLLCALL_LISTEN=127.0.0.1:0",
		"ROLLCALL_STORE=sqlite:" + filepath.Join(t.TempDir(), "rollcall.db"),
		"ROLLCALL_BOOTSTRAP_TOKEN=" + token,
		"ROLLCALL_AGENT_PRESENCE_TIMEOUT=2s",
		"ROLLCALL_SYNC_HEARTBEAT_INTERVAL=1s",
		"ROLLCALL_AGENT_HEARTBEAT_PERSIST_INTERVAL=1s",
		"ROLLCALL_SHUTDOWN_TOTAL_TIMEOUT=5s",
	})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	log := testkit.Log()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Open(ctx, cfg, server.Options{Log: log})
	if err != nil {
		cancel()
		t.Fatalf("server.Open: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, token
}

// heartbeats sends heartbeats for agents every 300 ms until stop is called
// (bounded by the test's lifetime), keeping them online for a screenshot.
func heartbeats(t *testing.T, svc *app.Service, beats map[string]heartbeat) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			for ref, hb := range beats {
				if _, err := svc.Heartbeat(ctx, hb.p, ref, []byte(hb.body), app.Arrival{}); err != nil && ctx.Err() == nil {
					t.Errorf("heartbeat %s: %v", ref, err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

type heartbeat struct {
	p    domain.Principal
	body string
}

// waitJS polls a JavaScript condition in the page until it is true,
// bounded by timeout. A navigation (a form that was just submitted) ends a
// poll early; it then polls again in the new page.
func waitJS(cond string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		deadline := time.Now().Add(timeout)
		for {
			left := time.Until(deadline)
			if left <= 0 {
				return fmt.Errorf("waiting for %s: timed out after %s", cond, timeout)
			}
			_, err := chromedp.Poll[any](cond, chromedp.WithPollingTimeout(left), chromedp.WithPollingInterval(100*time.Millisecond))(ctx, t)
			if err == nil {
				return nil
			}
			if ctx.Err() != nil || !navigated(err) {
				return fmt.Errorf("waiting for %s: %w", cond, err)
			}
			select { // the new page is loading
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}

// navigated reports whether a poll ended because the page navigated away.
func navigated(err error) bool {
	s := err.Error()
	return strings.Contains(s, "navigated or closed") || strings.Contains(s, "Cannot find context") ||
		strings.Contains(s, "Execution context was destroyed")
}

// css is a CSS selector.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

func cardSel(id, sel string) chromedp.CSS { return css(fmt.Sprintf(`#agent-%s %s`, id, sel)) }

// read runs one action that returns a value, bounded.
func read[T any](t *testing.T, browser context.Context, step string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	return v
}

// TestBrowserConsole drives Debian's chromium against the real server:
// sign in, vend an agent and read its credential, watch it turn online
// after a heartbeat and offline after agent.presence_timeout without a
// reload, clock it out, see an invalid shift's error next to the field,
// push a todo that is held, and save screenshots of the fleet and agent
// pages.
func TestBrowserConsole(t *testing.T) {
	exe := chromium(t)
	srv, token := realServer(t)
	svc := srv.Service
	ctx := t.Context()

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-prefers-reduced-motion", true), chromedp.Flag("lang", "en-US"),
		chromedp.Env("TZ=UTC"), chromedp.WindowSize(1280, 900))
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	// The first run starts the browser; it must not have a timeout.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			hctx, hcancel := context.WithTimeout(browser, 5*time.Second)
			defer hcancel()
			html, _ := chromedp.Run(hctx, chromedp.OuterHTML(css("main")))
			t.Fatalf("%s: %v\nmain:\n%s", step, err, html)
		}
	}

	// Sign in: "/" redirects to the console, which redirects to sign-in.
	run("sign in",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(css(`#token`)),
		chromedp.SendKeys(css(`#token`), token),
		chromedp.Submit(css(`#token`)),
		chromedp.WaitVisible(css(`#vend-handle`)),
	)
	if heading := read(t, browser, "heading", chromedp.Text(css(`h1`))); heading != "Fleet" {
		t.Fatalf("after sign-in the page heading is %q", heading)
	}

	// Vend an agent with the form and read the credential shown once.
	run("vend",
		chromedp.SendKeys(css(`#vend-handle`), "reviewer"),
		chromedp.SendKeys(css(`#vend-name`), "Code reviewer"),
		chromedp.SendKeys(css(`#vend-queues`), "reviews, builds"),
		chromedp.Submit(css(`#vend-handle`)),
		chromedp.WaitVisible(css(`#credential`)),
	)
	credential := read(t, browser, "credential", chromedp.Value(css(`#credential`)))
	mcpAdd := read(t, browser, "claude mcp add line", chromedp.Value(css(`#mcp-add`)))
	if !strings.HasPrefix(credential, app.AgentTokenPrefix) || !strings.Contains(mcpAdd, "claude mcp add --transport http rollcall-reviewer") || !strings.Contains(mcpAdd, credential) {
		t.Fatalf("vend page shows credential %q and %q", credential, mcpAdd)
	}
	agentP, err := svc.AuthenticateAgent(ctx, credential)
	if err != nil {
		t.Fatalf("the credential the page showed does not authenticate: %v", err)
	}
	id := agentP.Agent.ID

	// The fleet page: unknown until the first heartbeat. A marker on window
	// proves the later changes arrive without a reload.
	run("fleet shows the new agent",
		chromedp.Navigate(srv.URL+"/console/"),
		chromedp.WaitVisible(cardSel(id, `[data-state="unknown"]`)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`window.__noReload = true`)(ctx, t)
			return err
		}),
	)
	// Heartbeats keep coming until the page has shown every sign of
	// "online": on a busy machine the page may read it later than the 2 s
	// presence timeout after one heartbeat, and the agent must still be
	// online then. Only after that do they stop, so the next step sees the
	// timeout.
	stopBeats := heartbeats(t, svc, map[string]heartbeat{"reviewer": {agentP, `{"state":"online"}`}})
	run("online after a heartbeat, live",
		waitJS(fmt.Sprintf(`document.querySelector('#agent-%s [data-state]').dataset.state === 'online'`, id), 20*time.Second),
		waitJS(`window.__noReload === true`, 5*time.Second),
		waitJS(fmt.Sprintf(`document.querySelector('#agent-%s [data-state]').textContent.includes('Online')`, id), 10*time.Second),
		waitJS(`document.getElementById('live').textContent.includes('reviewer: Online')`, 10*time.Second),
	)
	stopBeats()
	run("offline after the presence timeout, live",
		waitJS(fmt.Sprintf(`document.querySelector('#agent-%s [data-state]').dataset.state === 'offline'`, id), 20*time.Second),
		waitJS(`window.__noReload === true`, 5*time.Second),
		waitJS(fmt.Sprintf(`document.querySelector('#agent-%s [data-state]').textContent.includes('Offline')`, id), 5*time.Second),
	)

	// Clock it out from its card: the card says clocked out, not broken.
	run("clock out",
		chromedp.Click(cardSel(id, `button[value="out"]`)),
		chromedp.WaitVisible(css(`.flash`)),
		waitJS(fmt.Sprintf(`document.querySelector('#agent-%s [data-presence]').dataset.presence === 'out'`, id), 5*time.Second),
		waitJS(fmt.Sprintf(`document.querySelector('#agent-%s [data-presence]').textContent.includes('Clocked out by operator')`, id), 5*time.Second),
		waitJS(fmt.Sprintf(`document.querySelector('#agent-%s [data-state]').textContent.includes('Offline (resting)')`, id), 5*time.Second),
	)

	// "Clear override" follows live updates: cleared
	// elsewhere, the button goes without a reload; set elsewhere, it comes.
	person, err := svc.AuthenticatePerson(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	clearBtn := fmt.Sprintf(`document.querySelector('#agent-%s button[value="clear"]')`, id)
	run("clear override shown after clock out",
		waitJS(clearBtn+` && !`+clearBtn+`.hidden && `+clearBtn+`.offsetParent !== null`, 5*time.Second),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`window.__noReload = true`)(ctx, t)
			return err
		}),
	)
	if _, err := svc.ClearPresence(ctx, person, "reviewer"); err != nil {
		t.Fatal(err)
	}
	run("clear override hidden live",
		waitJS(clearBtn+`.hidden && `+clearBtn+`.offsetParent === null`, 10*time.Second),
		waitJS(`window.__noReload === true`, time.Second),
	)
	if _, err := svc.SetPresence(ctx, person, "reviewer", app.PresenceInput{Presence: "out"}); err != nil {
		t.Fatal(err)
	}
	run("clear override shown live",
		waitJS(`!`+clearBtn+`.hidden && `+clearBtn+`.offsetParent !== null`, 10*time.Second),
		waitJS(`window.__noReload === true`, time.Second),
	)

	// An invalid shift: the error (the API's message) is next to the field.
	run("invalid shift",
		chromedp.Navigate(srv.URL+"/console/agents/reviewer"),
		chromedp.WaitVisible(css(`#shift`)),
		chromedp.SendKeys(css(`#shift`), "Mon-Fri 9:00-17:00"),
		chromedp.Click(css(`button[name="op"][value="save"]`)),
		chromedp.WaitVisible(css(`#shift-error`)),
		waitJS(`document.getElementById('shift-error').textContent.includes('shift: window 1 "Mon-Fri 9:00-17:00"')`, 5*time.Second),
		waitJS(`document.getElementById('shift').getAttribute('aria-describedby').includes('shift-error')`, 5*time.Second),
		waitJS(`document.getElementById('shift').value === 'Mon-Fri 9:00-17:00'`, 5*time.Second),
	)
	// A valid one puts the agent off shift when the window is not now.
	shift := offShift(time.Now())
	run("valid shift",
		chromedp.SetValue(css(`#shift`), shift),
		chromedp.Click(css(`button[name="op"][value="save"]`)),
		waitJS(`document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('Shift saved')`, 5*time.Second),
	)

	// Push a todo while the agent is out: it is held.
	run("push a held todo",
		chromedp.SendKeys(css(`#push-title-input`), "Review PR 7: retry budget"),
		chromedp.SendKeys(css(`#push-kind`), "review"),
		chromedp.Click(css(`form[action$="/todos"] button[type="submit"]`)),
		waitJS(`document.querySelector('.flash') && document.querySelector('.flash').textContent.includes('Todo pushed')`, 5*time.Second),
		waitJS(`[...document.querySelectorAll('td')].some(td => td.textContent.includes('Held while the agent is out'))`, 5*time.Second),
	)

	// Screenshots: a small fleet with the states side by side.
	stop := fleetForScreenshot(t, svc, token)
	defer stop()
	dir := screenshotDir()
	fleetPNG, agentPNG, poolPNG := filepath.Join(dir, "fleet.png"), filepath.Join(dir, "agent.png"), filepath.Join(dir, "pool.png")
	run("fleet for the screenshot",
		chromedp.Navigate(srv.URL+"/console/"),
		waitJS(`document.querySelectorAll('[data-state="online"]').length >= 1 && document.querySelectorAll('[data-state="degraded"]').length >= 1`, 10*time.Second),
	)
	fleetShot := read(t, browser, "fleet screenshot", chromedp.FullScreenshot(100))
	run("agent page for the screenshot",
		chromedp.Navigate(srv.URL+"/console/agents/reviewer"),
		chromedp.WaitVisible(css(`#todos-title`)),
	)
	agentShot := read(t, browser, "agent screenshot", chromedp.FullScreenshot(100))
	run("pool page for the screenshot",
		chromedp.Navigate(srv.URL+"/console/pools/builders"),
		waitJS(`document.querySelectorAll('[data-state="online"]').length >= 1 && document.querySelectorAll('[data-todo]').length == 2`, 10*time.Second),
	)
	poolShot := read(t, browser, "pool screenshot", chromedp.FullScreenshot(100))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for path, b := range map[string][]byte{fleetPNG: fleetShot, agentPNG: agentShot, poolPNG: poolShot} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s (%d bytes)", path, len(b))
	}
}

// offShift returns a one-hour weekly window that starts 12 hours from now
// (UTC), so the agent is off shift while the test runs.
func offShift(now time.Time) string {
	s := now.UTC().Add(12 * time.Hour)
	e := s.Add(time.Hour)
	return fmt.Sprintf("%s %02d:00-%02d:00", s.Format("Mon"), s.Hour(), e.Hour())
}

// fleetForScreenshot vends three more agents — one online with a shift,
// one degraded with a warning, one that never sent a heartbeat — and keeps
// the first two heartbeating until stop.
func fleetForScreenshot(t *testing.T, svc *app.Service, token string) (stop func()) {
	t.Helper()
	ctx := t.Context()
	me, err := svc.AuthenticatePerson(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	beats := map[string]heartbeat{}
	for _, a := range []struct {
		handle, name, body string
		queues             []string
	}{
		{"builder", "Build fixer", `{"state":"online","billing_mode":"subscription"}`, []string{"builds"}},
		{"triage", "Issue triage", `{"state":"degraded","billing_mode":"subscription","billing_evidence":{"key_type":"unknown","method":"env"},"details":{"degraded_reasons":["rate_limited"]}}`, []string{"issues"}},
		{"docs-writer", "Docs writer", "", []string{"docs", "builds"}},
	} {
		r, err := svc.Vend(ctx, me, app.VendInput{Handle: a.handle, Name: a.name, Queues: a.queues, Verbs: domain.ScopeVerbs, BillingMode: "subscription"})
		if err != nil {
			t.Fatal(err)
		}
		if a.body == "" {
			continue
		}
		p, err := svc.AuthenticateAgent(ctx, r.Credential)
		if err != nil {
			t.Fatal(err)
		}
		beats[a.handle] = heartbeat{p: p, body: a.body}
	}
	if _, err := svc.SetShift(ctx, me, "builder", ptr("TZ=Europe/Berlin Mon-Sun 00:00-24:00")); err != nil {
		t.Fatal(err)
	}
	for i, title := range []string{"Fix flaky lease test", "Bump pgx to v5.13"} {
		if _, _, err := svc.PushTodo(ctx, me, "builder", app.PushInput{Queue: "builds", Title: title, IdempotencyKey: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// A pool of two with one todo claimed and one waiting (the pool page).
	if _, err := svc.CreatePool(ctx, me, app.PoolInput{Name: "builders", Queues: []string{"builds"}, Members: []string{"builder", "docs-writer"}}); err != nil {
		t.Fatal(err)
	}
	var pooled []string
	for _, title := range []string{"Rebuild the arm64 image", "Pin the Go toolchain"} {
		td, _, err := svc.PushPoolTodo(ctx, me, "builders", app.PushInput{Queue: "builds", Title: title})
		if err != nil {
			t.Fatal(err)
		}
		pooled = append(pooled, td.ID)
	}
	b, err := svc.OwnedAgent(ctx, me, "builder")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Claim(ctx, &b, pooled[0], 0); err != nil {
		t.Fatal(err)
	}
	return heartbeats(t, svc, beats)
}
