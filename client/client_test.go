package client_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi/apitest"
)

func TestClientAgainstRealServer(t *testing.T) {
	env := apitest.New(t)
	ctx := t.Context()
	c := client.New(env.URL+"/", env.AdminToken)

	res, err := c.VendAgent(ctx, app.VendInput{Handle: "builder", Queues: []string{"build"}, Verbs: []string{"claim"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Agent.Handle != "builder" || !strings.HasPrefix(res.Credential, app.AgentTokenPrefix) || res.MCPURL != env.URL+"/mcp" {
		t.Fatalf("vend %+v", res)
	}
	agents, err := c.ListAgents(ctx)
	if err != nil || len(agents) != 1 || agents[0].ID != res.Agent.ID {
		t.Fatalf("ListAgents = %+v, %v", agents, err)
	}
	a, err := c.GetAgent(ctx, "builder")
	if err != nil || a.ID != res.Agent.ID {
		t.Fatalf("GetAgent = %+v, %v", a, err)
	}
	name := "Builder"
	a, err = c.UpdateAgent(ctx, a.ID, app.UpdateInput{Name: &name})
	if err != nil || a.Name != "Builder" {
		t.Fatalf("UpdateAgent = %+v, %v", a, err)
	}

	td, created, err := c.PushTodo(ctx, "builder", app.PushInput{Queue: "build", Title: "t", Payload: json.RawMessage(`{"n":1}`), IdempotencyKey: "k"})
	if err != nil || !created || td.Queue != "build" || string(td.Payload) != `{"n":1}` {
		t.Fatalf("PushTodo = %+v, %v, %v", td, created, err)
	}
	again, created, err := c.PushTodo(ctx, "builder", app.PushInput{Queue: "build", Title: "t", IdempotencyKey: "k"})
	if err != nil || created || again.ID != td.ID {
		t.Fatalf("PushTodo again = %+v, %v, %v", again, created, err)
	}
	todos, err := c.ListTodos(ctx, "builder", app.TodoFilter{State: "pending", Limit: 10})
	if err != nil || len(todos) != 1 || todos[0].ID != td.ID {
		t.Fatalf("ListTodos = %+v, %v", todos, err)
	}
	got, err := c.GetTodo(ctx, td.ID)
	if err != nil || got.ID != td.ID {
		t.Fatalf("GetTodo = %+v, %v", got, err)
	}

	rot, err := c.RotateCredential(ctx, "builder")
	if err != nil || rot.Credential == res.Credential {
		t.Fatalf("RotateCredential = %+v, %v", rot, err)
	}
	rev, err := c.RevokeAgent(ctx, "builder")
	if err != nil || rev.RevokedAt == nil {
		t.Fatalf("RevokeAgent = %+v, %v", rev, err)
	}
	entries, err := c.ListAudit(ctx, app.AuditFilter{AgentRef: "builder", Limit: 2})
	if err != nil || len(entries) != 2 || entries[0].Action != "agent.vend" {
		t.Fatalf("ListAudit = %+v, %v", entries, err)
	}
	later, err := c.ListAudit(ctx, app.AuditFilter{AfterSeq: entries[1].Seq})
	if err != nil || len(later) == 0 || later[0].Seq <= entries[1].Seq {
		t.Fatalf("ListAudit after = %+v, %v", later, err)
	}
	ver, err := c.VerifyAudit(ctx)
	if err != nil || !ver.OK || ver.Checked == 0 {
		t.Fatalf("VerifyAudit = %+v, %v", ver, err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	pc, err := c.CreatePerson(ctx, app.PersonInput{Name: "carol", Role: "member"})
	if err != nil {
		t.Fatalf("CreatePerson = %v", err)
	}
	p, err := c.GetPerson(ctx, pc.Person.ID)
	if err != nil || p.ID != pc.Person.ID || p.Name != "carol" {
		t.Fatalf("GetPerson = %+v, %v", p, err)
	}
}

func TestClientErrors(t *testing.T) {
	env := apitest.New(t)
	ctx := t.Context()
	c := client.New(env.URL, env.AdminToken)
	if _, err := c.VendAgent(ctx, app.VendInput{Handle: "builder", Queues: []string{"build"}}); err != nil {
		t.Fatal(err)
	}

	check := func(t *testing.T, err error, status int, code domain.Code, pointer string) {
		t.Helper()
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Status != status || client.StatusOf(err) != status {
			t.Fatalf("err = %v (%T), want *client.Error with status %d", err, err, status)
		}
		var de *domain.Error
		if !errors.As(err, &de) || de.Code != code || de.Pointer != pointer || de.Detail == "" {
			t.Fatalf("domain error %+v, want %s at %q", de, code, pointer)
		}
		if err.Error() != de.Error() {
			t.Errorf("Error() = %q, want the domain error's %q", err.Error(), de.Error())
		}
	}

	_, _, err := c.PushTodo(ctx, "builder", app.PushInput{Queue: "deploy", Title: "t"})
	check(t, err, 400, domain.CodeInvalidArgument, "/queue")
	_, err = c.VendAgent(ctx, app.VendInput{Handle: "Bad!", Queues: []string{"q"}})
	check(t, err, 400, domain.CodeInvalidArgument, "/handle")
	_, err = c.VendAgent(ctx, app.VendInput{Handle: "builder", Queues: []string{"q"}})
	check(t, err, 409, domain.CodeConflict, "")
	_, err = c.GetAgent(ctx, "nobody")
	check(t, err, 404, domain.CodeNotFound, "")
	_, err = c.ListTodos(ctx, "builder", app.TodoFilter{State: "bogus"})
	check(t, err, 400, domain.CodeInvalidArgument, "")
	_, err = client.New(env.URL, "").ListAgents(ctx)
	check(t, err, 401, domain.CodeUnauthenticated, "")
	_, err = client.New(env.URL, app.NewToken(app.PersonTokenPrefix)).ListAgents(ctx)
	check(t, err, 401, domain.CodeUnauthenticated, "")
	_, err = client.New(env.URL, env.AddPerson(t, "bob")).ListAudit(ctx, app.AuditFilter{})
	check(t, err, 403, domain.CodeForbidden, "")
}

func TestClientNonProblemResponses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>bad gateway</html>"))
	}))
	defer srv.Close()
	_, err := client.New(srv.URL, "rcp_x").ListAgents(t.Context())
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeInternal || client.StatusOf(err) != 502 || !strings.Contains(de.Detail, "HTTP 502") || !strings.Contains(de.Detail, "bad gateway") {
		t.Fatalf("err = %v", err)
	}

	srv.Close()
	_, err = client.New(srv.URL, "rcp_x").ListAgents(t.Context())
	if err == nil || errors.As(err, &de) {
		t.Fatalf("a closed server gave %v, want a transport error", err)
	}
}
