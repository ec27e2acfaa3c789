package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// TestPools: create, list, show, push (with its idempotency key), the
// pooled todo's reads, and delete refused while it is live (docs/design.md,
// "Pools").
func TestPools(t *testing.T) {
	e := newEnv(t)
	a := e.vend(t, e.bob, app.VendInput{Handle: "rev-a", Queues: []string{"review", "other"}, Verbs: domain.ScopeVerbs})
	e.vend(t, e.bob, app.VendInput{Handle: "rev-b", Queues: []string{"review"}, Verbs: domain.ScopeVerbs})
	e.vend(t, e.admin, app.VendInput{Handle: "admins-bot", Queues: []string{"review"}})

	var p domain.Pool
	r := e.do(t, "POST", "/v1/pools", e.bob, map[string]any{"name": "reviewers", "queues": []string{"review"}, "members": []string{"rev-a", "rev-b"}})
	r.want(t, http.StatusCreated, &p)
	if r.header.Get("Location") != "/v1/pools/reviewers" || len(p.Members) != 2 || p.Members[0].Handle == "" {
		t.Errorf("created pool %+v, Location %q", p, r.header.Get("Location"))
	}
	for _, c := range []struct {
		body    map[string]any
		status  int
		pointer string
	}{
		{map[string]any{"name": "reviewers", "queues": []string{"review"}, "members": []string{"rev-a"}}, 409, ""},
		{map[string]any{"name": "x", "queues": []string{"review"}, "members": []string{"admins-bot"}}, 400, "/members/0"},
		{map[string]any{"name": "x", "queues": []string{"other"}, "members": []string{"rev-a", "rev-b"}}, 400, "/members/1"},
		{map[string]any{"name": "Bad Name", "queues": []string{"review"}, "members": []string{"rev-a"}}, 400, "/name"},
		{map[string]any{"name": "x", "queues": []string{}, "members": []string{"rev-a"}}, 400, "/queues"},
		{map[string]any{"name": "x", "queues": []string{"review"}, "members": []string{"rev-a", "rev-a"}}, 400, "/members/1"},
	} {
		pr := e.do(t, "POST", "/v1/pools", e.bob, c.body).problem(t)
		if pr.Status != c.status || pr.Pointer != c.pointer {
			t.Errorf("POST /v1/pools %v: %d %q (%s), want %d %q", c.body, pr.Status, pr.Pointer, pr.Detail, c.status, c.pointer)
		}
	}
	var list struct{ Items []domain.Pool }
	e.do(t, "GET", "/v1/pools", e.bob, nil).want(t, 200, &list)
	if len(list.Items) != 1 || list.Items[0].ID != p.ID {
		t.Errorf("list = %+v", list.Items)
	}
	e.do(t, "GET", "/v1/pools/reviewers", e.admin, nil).want(t, 404, nil)

	push := map[string]any{"queue": "review", "title": "review #1", "idempotency_key": "pr-1"}
	var td domain.Todo
	r = e.do(t, "POST", "/v1/pools/reviewers/todos", e.bob, push)
	r.want(t, http.StatusCreated, &td)
	if td.PoolID != p.ID || td.AgentID != "" || r.header.Get("Location") != "/v1/todos/"+td.ID {
		t.Errorf("pooled todo %+v", td)
	}
	var again domain.Todo
	e.do(t, "POST", "/v1/pools/reviewers/todos", e.bob, push).want(t, http.StatusOK, &again)
	if again.ID != td.ID {
		t.Errorf("push with the same key made %s, want %s", again.ID, td.ID)
	}
	if pr := e.do(t, "POST", "/v1/pools/reviewers/todos", e.bob, map[string]any{"queue": "other", "title": "x"}).problem(t); pr.Status != 400 || pr.Pointer != "/queue" {
		t.Errorf("push to a queue not the pool's: %+v", pr)
	}
	if pr := e.do(t, "POST", "/v1/pools/reviewers/todos", e.bob, map[string]any{"queue": "review", "title": "x", "max_attempts": 0}).problem(t); pr.Status != 400 || pr.Pointer != "/max_attempts" {
		t.Errorf("push with max_attempts 0: %+v", pr)
	}
	var backlog struct{ Items []domain.Todo }
	e.do(t, "GET", "/v1/pools/reviewers/todos", e.bob, nil).want(t, 200, &backlog)
	if len(backlog.Items) != 1 || backlog.Items[0].ID != td.ID {
		t.Errorf("pool backlog = %+v, want the one todo", backlog.Items)
	}
	e.do(t, "GET", "/v1/todos/"+td.ID, e.bob, nil).want(t, 200, nil)
	e.do(t, "GET", "/v1/todos/"+td.ID, e.admin, nil).want(t, 404, nil)
	if pr := e.do(t, "DELETE", "/v1/pools/reviewers", e.bob, nil).problem(t); pr.Status != 409 {
		t.Errorf("delete with a live todo: %+v", pr)
	}
	_ = a
	var audit struct{ Items []domain.AuditEntry }
	e.do(t, "GET", "/v1/audit", e.admin, nil).want(t, 200, &audit)
	seen := map[string]int{}
	for _, en := range audit.Items {
		seen[en.Action]++
	}
	if seen["pool.create"] != 1 || seen["todo.push_pool"] != 1 {
		t.Errorf("audit actions %v, want one pool.create and one todo.push_pool", seen)
	}
}
