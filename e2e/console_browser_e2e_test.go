package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestE2EConsoleFleetTodoCountsLive drives Debian's chromium against the
// real binary: the fleet page, loaded before a todo is pushed to an agent,
// shows the agent's new todo counts without a reload, as it shows liveness
// and presence changes (design: Console). Without chromium the test skips,
// unless ROLLCALL_REQUIRE_BROWSER=1.
func TestE2EConsoleFleetTodoCountsLive(t *testing.T) {
	browser, a, ag := signedInBrowser(t, "counted")
	id := ag.Agent.ID
	run := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browse(t, browser, step, actions...)
	}
	counts := func(step string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, wait)
		defer cancel()
		// Read in one script: a live refresh may replace the card's status
		// part between a node lookup and a read of its text.
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector('#agent-%s .counts').textContent`, id)))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return strings.Join(strings.Fields(s), " ")
	}
	mark := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](`window.__noReload = true`)(ctx, tg)
		return err
	})

	run("mark the fleet page", mark)
	before := counts("counts before the push")
	if before != "0 pending 0 claimed 0 held" {
		t.Fatalf("a fresh agent's card shows %q", before)
	}

	cli(t, a, "todo", "push", "counted", "--queue", "q", "--title", "pushed after the page loaded")
	live := fmt.Sprintf(`document.querySelector('#agent-%s .counts').textContent.replace(/\s+/g, ' ').trim() !== %q`, id, before)
	ctx, cancel := context.WithTimeout(browser, 10*time.Second) // the push's event arrives in well under a second
	_, liveErr := chromedp.Run(ctx, chromedp.Poll[any](live, chromedp.WithPollingInterval(100*time.Millisecond)))
	cancel()
	noReload, err := chromedp.Run(browser, chromedp.Evaluate[bool](`window.__noReload === true`))
	if err != nil || !noReload {
		t.Fatalf("the fleet page reloaded (marker %v, %v)", noReload, err)
	}
	shown := counts("counts after the push")
	run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#agent-%s .counts`, id))))
	reloaded := counts("counts after a reload")
	if reloaded == before {
		t.Fatalf("even after a reload the card shows %q: the push did not change the counts", reloaded)
	}
	if liveErr != nil || shown != reloaded {
		t.Errorf("the fleet page shows %q 10 s after a todo was pushed, a reload shows %q: the todo counts do not update live (%v)", shown, reloaded, liveErr)
	}
}

// newBrowser starts Debian's chromium (headless) until the test ends.
// Without chromium the test skips, unless ROLLCALL_REQUIRE_BROWSER=1.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := os.Getenv("ROLLCALL_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if exe != "" {
			break
		}
		exe, _ = exec.LookPath(name)
	}
	if exe == "" {
		if os.Getenv("ROLLCALL_REQUIRE_BROWSER") == "1" {
			t.Fatal("chromium is not installed and ROLLCALL_REQUIRE_BROWSER=1")
		}
		t.Skip("chromium is not installed; set ROLLCALL_REQUIRE_BROWSER=1 to fail instead")
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(t.Context(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Env("TZ=UTC"), chromedp.WindowSize(1280, 900))
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(browser); err != nil { // starts the browser: no timeout
		t.Fatalf("start chromium: %v", err)
	}
	return browser
}

// browse runs one step of browser actions within wait.
func browse(t *testing.T, browser context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, wait)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// signedInBrowser starts a server on SQLite (args as startSQLite) with an
// agent handle (queue q, every work verb) and a browser (newBrowser) whose
// admin is signed in to the console, on the fleet page showing the
// agent's card.
func signedInBrowser(t *testing.T, handle string, args ...string) (context.Context, *server, vendResult) {
	t.Helper()
	browser := newBrowser(t)
	srv := startSQLite(t, args...)
	ag := vend(t, srv, handle, []string{"q"}, allVerbs)
	browse(t, browser, "sign in and open the fleet page",
		chromedp.Navigate(srv.URL+"/console/signin"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), adminToken),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#agent-%s .counts`, ag.Agent.ID))),
	)
	return browser, srv, ag
}
