package console_test

import (
	"bufio"
	"context"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/console"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/testkit"
)

var dataEventsRE = regexp.MustCompile(`data-events="([^"]+)"`)

// A change published after a page read what it shows and before its event
// stream opened reaches the page: the stream resumes from the cursor the
// page took before its reads (design: Console live updates). Without the
// cursor the stream starts "from now" and the change is never sent, so the
// card stays stale.
func TestPageStreamReplaysWhatCameBeforeItOpened(t *testing.T) {
	e := newEnv(t, console.Options{})
	me := admin(t, e)
	b := e.browser(t)
	b.signIn(e.AdminToken)

	// No event buffered yet: the page names no cursor (its script then
	// refreshes every card once when the stream opens).
	_, body := b.get("/console/")
	if m := dataEventsRE.FindStringSubmatch(body); m == nil || m[1] != "/console/events" {
		t.Fatalf("fleet page before any event: data-events %q, want /console/events", m)
	}

	mine := vend(t, e, me, "reviewer")
	p, err := e.Service.AuthenticateAgent(t.Context(), mine.Credential)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Service.Heartbeat(t.Context(), p, p.Agent.ID, []byte(`{"state":"online"}`), app.Arrival{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the first event buffered", 10*time.Second, func() bool { return e.Service.EventsCursor() != "" })

	for _, page := range []string{"/console/", "/console/agents/reviewer"} {
		_, body := b.get(page)
		m := dataEventsRE.FindStringSubmatch(body)
		if m == nil || !strings.Contains(m[1], "?since=") {
			t.Fatalf("%s: data-events %q, want the stream with ?since=", page, m)
		}
		stream := html.UnescapeString(m[1])
		// The change comes after the page's reads, before its stream opens.
		before := e.Service.EventsCursor()
		in := presence.Out
		if page != "/console/" {
			in = presence.In
		}
		if _, err := e.Service.SetPresence(t.Context(), me, "reviewer", app.PresenceInput{Presence: in}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the change buffered", 10*time.Second, func() bool { return e.Service.EventsCursor() != before })
		change := e.Service.EventsCursor()

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+stream, nil)
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatalf("%s: stream: %v", page, err)
		}
		rd := bufio.NewReader(resp.Body)
		for seen := false; !seen; {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: the stream ended before replaying the change %s: %v", page, change, err)
			}
			seen = line == "id: "+change+"\n"
		}
		if data, _ := rd.ReadString('\n'); data != "event: agent\n" {
			t.Fatalf("%s: replayed change: %q, want an agent event", page, data)
		}
		if data, _ := rd.ReadString('\n'); !strings.Contains(data, mine.Agent.ID) {
			t.Fatalf("%s: replayed change: %q, want the agent %s", page, data, mine.Agent.ID)
		}
		resp.Body.Close()
		cancel()
	}
}
