package httpapi_test

import (
	"net/http"
	"strings"
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
	seen := e.auditActions(t)
	if seen["pool.create"] != 1 || seen["todo.push_pool"] != 1 {
		t.Errorf("audit actions %v, want one pool.create and one todo.push_pool", seen)
	}
}

// TestPoolGrantsREST: bob grants his agent to carol (201, then 200 with the
// same grant), lists and revokes it; carol's pool refuses the agent before
// the grant (400 at /members/0) and takes it after; carol cannot grant or
// list bob's agent (404); revoking twice answers 404 (docs/design.md,
// "Pool grants").
func TestPoolGrantsREST(t *testing.T) {
	e := newEnv(t)
	carol := e.AddPerson(t, "carol")
	carolP, err := e.Service.AuthenticatePerson(t.Context(), carol)
	if err != nil {
		t.Fatal(err)
	}
	a := e.vend(t, e.bob, app.VendInput{Handle: "bobs-bot", Queues: []string{"review"}, Verbs: domain.ScopeVerbs})
	pool := map[string]any{"name": "shared", "queues": []string{"review"}, "members": []string{"bobs-bot"}}
	if pr := e.do(t, "POST", "/v1/pools", carol, pool).problem(t); pr.Status != 400 || pr.Pointer != "/members/0" || !strings.Contains(pr.Detail, "rollcall agent grant create") {
		t.Errorf("carol's pool with bob's agent before the grant: %+v", pr)
	}
	grants := "/v1/agents/bobs-bot/pool-grants"
	e.do(t, "POST", grants, carol, map[string]any{"person": carolP.ID}).want(t, 404, nil)
	if pr := e.do(t, "POST", grants, e.bob, map[string]any{"person": "nobody"}).problem(t); pr.Status != 400 || pr.Pointer != "/person" {
		t.Errorf("grant to an unknown person: %+v", pr)
	}
	if pr := e.do(t, "POST", grants, e.bob, map[string]any{"person": carolP.ID, "extra": 1}).problem(t); pr.Status != 400 || pr.Pointer != "/extra" {
		t.Errorf("grant with an unknown member: %+v", pr)
	}
	var g, again domain.PoolGrant
	r := e.do(t, "POST", grants, e.bob, map[string]any{"person": carolP.ID})
	r.want(t, http.StatusCreated, &g)
	if g.AgentID != a.Agent.ID || g.PersonID != carolP.ID || g.AgentHandle != "bobs-bot" || r.header.Get("Location") != "/v1/agents/"+a.Agent.ID+"/pool-grants/"+carolP.ID {
		t.Errorf("grant %+v, Location %q", g, r.header.Get("Location"))
	}
	e.do(t, "POST", grants, e.bob, map[string]any{"person": carolP.ID}).want(t, http.StatusOK, &again)
	if !again.CreatedAt.Equal(g.CreatedAt) {
		t.Errorf("grant again = %+v, want the stored %+v", again, g)
	}
	var list struct{ Items []domain.PoolGrant }
	e.do(t, "GET", grants, e.bob, nil).want(t, 200, &list)
	if len(list.Items) != 1 || list.Items[0].PersonID != carolP.ID {
		t.Errorf("grants = %+v", list.Items)
	}
	e.do(t, "GET", grants, carol, nil).want(t, 404, nil)
	e.do(t, "GET", grants, e.admin, nil).want(t, 200, nil)

	var p domain.Pool
	e.do(t, "POST", "/v1/pools", carol, pool).want(t, http.StatusCreated, &p)
	if !p.HasMember(a.Agent.ID) {
		t.Errorf("carol's pool %+v lacks bob's agent", p)
	}
	e.do(t, "DELETE", grants+"/"+carolP.ID, carol, nil).want(t, 404, nil)
	var revoked domain.PoolGrant
	e.do(t, "DELETE", grants+"/"+carolP.ID, e.bob, nil).want(t, 200, &revoked)
	if revoked.PersonID != carolP.ID {
		t.Errorf("revoked %+v", revoked)
	}
	e.do(t, "DELETE", grants+"/"+carolP.ID, e.bob, nil).want(t, 404, nil)
	e.do(t, "GET", "/v1/pools/shared", carol, nil).want(t, 200, &p)
	if p.HasMember(a.Agent.ID) {
		t.Errorf("carol's pool after the revocation still has bob's agent: %+v", p)
	}
	seen := e.auditActions(t)
	if seen["pool.grant"] != 1 || seen["pool.revoke_grant"] != 1 {
		t.Errorf("audit actions %v, want one pool.grant and one pool.revoke_grant", seen)
	}
}

// TestUpdatePool: PATCH /v1/pools/{name} replaces the members, with the
// rules of a create; the name and queues stay; another person's pool is
// not found (docs/design.md, "Pools").
func TestUpdatePool(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.bob, app.VendInput{Handle: "up-a", Queues: []string{"review"}, Verbs: domain.ScopeVerbs})
	b := e.vend(t, e.bob, app.VendInput{Handle: "up-b", Queues: []string{"review"}, Verbs: domain.ScopeVerbs})
	e.vend(t, e.bob, app.VendInput{Handle: "up-other", Queues: []string{"other"}})
	e.vend(t, e.admin, app.VendInput{Handle: "up-admins", Queues: []string{"review"}})
	e.do(t, "POST", "/v1/pools", e.bob, map[string]any{"name": "team", "queues": []string{"review"}, "members": []string{"up-a"}}).want(t, http.StatusCreated, nil)

	var p domain.Pool
	e.do(t, "PATCH", "/v1/pools/team", e.bob, map[string]any{"members": []string{"up-b", "up-a"}}).want(t, http.StatusOK, &p)
	if len(p.Members) != 2 || p.Name != "team" || len(p.Queues) != 1 {
		t.Fatalf("updated pool %+v", p)
	}
	e.do(t, "PATCH", "/v1/pools/team", e.bob, map[string]any{"members": []string{"up-b"}}).want(t, http.StatusOK, &p)
	if len(p.Members) != 1 || p.Members[0].AgentID != b.Agent.ID || p.Members[0].Handle != "up-b" {
		t.Fatalf("pool after up-a left: %+v", p.Members)
	}
	for _, c := range []struct {
		body    map[string]any
		status  int
		pointer string
	}{
		{map[string]any{"members": []string{}}, 400, "/members"},
		{map[string]any{"members": []string{"up-b", "up-admins"}}, 400, "/members/1"},
		{map[string]any{"members": []string{"up-other"}}, 400, "/members/0"},
		{map[string]any{"members": []string{"up-b", "up-b"}}, 400, "/members/1"},
		{map[string]any{"members": []any{"up-b", nil}}, 400, "/members/1"},
		{map[string]any{"members": []string{""}}, 400, "/members/0"},
		{map[string]any{"members": []string{"up-b"}, "queues": []string{"x"}}, 400, "/queues"},
	} {
		pr := e.do(t, "PATCH", "/v1/pools/team", e.bob, c.body).problem(t)
		if pr.Status != c.status || pr.Pointer != c.pointer {
			t.Errorf("PATCH /v1/pools/team %v: %d %q (%s), want %d %q", c.body, pr.Status, pr.Pointer, pr.Detail, c.status, c.pointer)
		}
	}
	e.do(t, "PATCH", "/v1/pools/team", e.admin, map[string]any{"members": []string{"up-admins"}}).want(t, 404, nil)
	e.do(t, "PATCH", "/v1/pools/nope", e.bob, map[string]any{"members": []string{"up-b"}}).want(t, 404, nil)
	e.do(t, "GET", "/v1/pools/team", e.bob, nil).want(t, 200, &p)
	if len(p.Members) != 1 || p.Members[0].Handle != "up-b" {
		t.Errorf("a refused update changed the pool: %+v", p.Members)
	}
}
