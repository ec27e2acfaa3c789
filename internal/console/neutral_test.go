package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/console"
)

func TestNeutralize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain title", "plain title"},
		{"Grüße, 日本語, emoji 🎉", "Grüße, 日本語, emoji 🎉"},
		{"tab\tnew\nline\r", "tab\tnew\nline\r"},
		{"invoice\u202Efdp.exe", "invoice[U+202E]fdp.exe"},                         // RLO
		{"a\u202Ab\u202Bc\u202Cd\u202De", "a[U+202A]b[U+202B]c[U+202C]d[U+202D]e"}, // LRE RLE PDF LRO
		{"\u2066x\u2067y\u2068z\u2069", "[U+2066]x[U+2067]y[U+2068]z[U+2069]"},     // isolates
		{"\u200Eltr\u200Frtl\u061Calm", "[U+200E]ltr[U+200F]rtl[U+061C]alm"},       // marks
		{"zero\u200Bwidth\u200Cjoin\u200D", "zero[U+200B]width[U+200C]join[U+200D]"},
		{"word\u2060joiner\u2064", "word[U+2060]joiner[U+2064]"},
		{"\uFEFFbom", "[U+FEFF]bom"},
		{"soft\u00ADhyphen", "soft[U+00AD]hyphen"},
		{"tag\U000E0041s", "tag[U+E0041]s"}, // tag characters are Cf
		{"esc\x1b[31mred", "esc[U+001B][31mred"},
		{"nul\x00", "nul[U+0000]"},
		{"c1\u0085nel", "c1[U+0085]nel"},
		{"line\u2028para\u2029", "line[U+2028]para[U+2029]"},
		{"bad\xffutf8", "bad[U+FFFD]utf8"},
	} {
		if got := console.Neutralize(tc.in); got != tc.want {
			t.Errorf("Neutralize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Everything the console shows goes through Neutralize: a bidi override in
// an agent's display name and a todo title shows as [U+202E] on the fleet
// page, the agent page and the card fragment.
func TestConsoleNeutralizesWhatItShows(t *testing.T) {
	e := newEnv(t, console.Options{})
	me := admin(t, e)
	if _, err := e.Service.Vend(t.Context(), me, app.VendInput{Handle: "bidi", Name: "Rev\u202Eiewer", Queues: []string{"reviews"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Service.PushTodo(t.Context(), me, "bidi", app.PushInput{Queue: "reviews", Title: "Pay invoice\u202Efdp.exe\u2066"}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e.AdminToken)
	for _, path := range []string{"/console/", "/console/agents/bidi", "/console/agents/bidi/card"} {
		resp, body := b.get(path)
		wantStatus(t, resp, body, http.StatusOK)
		if strings.ContainsAny(body, "\u202E\u2066") {
			t.Errorf("%s shows a bidi control verbatim", path)
		}
		wantContains(t, body, "Rev[U+202E]iewer")
		if path == "/console/agents/bidi" {
			wantContains(t, body, "Pay invoice[U+202E]fdp.exe[U+2066]")
		}
	}
}

// next never carries a control or format character into Location.
func TestNextRefusesControlCharacters(t *testing.T) {
	e := newEnv(t, console.Options{})
	for _, next := range []string{"/console/agents/x\r\nSet-Cookie: a=b", "/console/\x00", "/console/\x1b[2J", "/console/a\u202Eb", "/console/\x7f", "/console/a\u0085"} {
		b := e.browser(t)
		b.get("/console/signin")
		resp, _ := b.post("/console/signin", url.Values{"token": {e.AdminToken}, "next": {next}})
		if loc := resp.Header.Get("Location"); loc != "/console/" {
			t.Errorf("next=%q redirected to %q", next, loc)
		}
		_, body := b.get("/console/signin?next=" + url.QueryEscape(next))
		if strings.Contains(body, strings.TrimPrefix(next, "/console/")) && strings.ContainsAny(next, "\x00\x1b\u202e\x7f\u0085") {
			t.Errorf("sign-in form carries next=%q", next)
		}
	}
	b := e.browser(t)
	b.get("/console/signin")
	if resp, _ := b.post("/console/signin", url.Values{"token": {e.AdminToken}, "next": {"/console/agents/x?y=1"}}); resp.Header.Get("Location") != "/console/agents/x?y=1" {
		t.Fatalf("a clean next: %q", resp.Header.Get("Location"))
	}
}

// The agent page lists done and failed todos too, and filters by state.
func TestAgentPageShowsFinishedTodosFiltered(t *testing.T) {
	e := newEnv(t, console.Options{})
	me := admin(t, e)
	res := vend(t, e, me, "worker")
	ctx := t.Context()
	p, err := e.Service.AuthenticateAgent(ctx, res.Credential)
	if err != nil {
		t.Fatal(err)
	}
	push := func(title string) string {
		td, _, err := e.Service.PushTodo(ctx, me, "worker", app.PushInput{Queue: "reviews", Title: title, MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		return td.ID
	}
	done, failed := push("Finished one"), push("Broken one")
	push("Waiting one")
	for id, finish := range map[string]func(string) error{
		done: func(id string) error {
			_, err := e.Service.Complete(ctx, p.Agent, id, []byte(`{"ok":true}`))
			return err
		},
		failed: func(id string) error { _, err := e.Service.Fail(ctx, p.Agent, id, "it broke"); return err },
	} {
		if _, err := e.Service.Claim(ctx, p.Agent, id, 0); err != nil {
			t.Fatal(err)
		}
		if err := finish(id); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser(t)
	b.signIn(e.AdminToken)
	_, body := b.get("/console/agents/worker")
	wantContains(t, body, "Finished one", "Broken one", "Waiting one", `todo-done">done`, `todo-failed">failed`, "Finished ", `aria-current="true" class="current">all`)
	_, body = b.get("/console/agents/worker?todos=done")
	wantContains(t, body, "Finished one", `aria-current="true" class="current">done`)
	if strings.Contains(body, "Broken one") || strings.Contains(body, "Waiting one") {
		t.Fatal("?todos=done shows other states")
	}
	_, body = b.get("/console/agents/worker?todos=claimed")
	wantContains(t, body, "No claimed todos.")
}
