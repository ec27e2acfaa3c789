package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

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
