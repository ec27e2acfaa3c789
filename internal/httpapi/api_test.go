package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi"
	"github.com/rollcall/rollcall/internal/httpapi/apitest"
)

// env is the real stack (SQLite file, app.Service, httpapi) plus a second
// person, bob, and every response checked against api/openapi.yaml.
type env struct {
	*apitest.Env
	admin string // admin's person token
	bob   string // another person's token
	spec  *spec
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := apitest.New(t)
	return &env{Env: e, admin: e.AdminToken, bob: e.AddPerson(t, "bob"), spec: loadSpec(t)}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// req describes a request beyond method, path, token and body.
type req struct {
	contentType *string       // nil = application/json when there is a body
	auth        *string       // a raw Authorization header instead of Bearer token
	timeout     time.Duration // > 0: fail instead of waiting longer (a stream that should not open)
}

// do sends one request. body may be nil, a string or []byte (sent as is),
// or any other value (sent as its JSON).
func (e *env) do(t *testing.T, method, path, token string, body any, opts ...req) response {
	t.Helper()
	var o req
	if len(opts) > 0 {
		o = opts[0]
	}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	ctx := t.Context()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	hr, err := http.NewRequestWithContext(ctx, method, e.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		ct := "application/json"
		if o.contentType != nil {
			ct = *o.contentType
		}
		if ct != "" {
			hr.Header.Set("Content-Type", ct)
		}
	}
	switch {
	case o.auth != nil:
		hr.Header.Set("Authorization", *o.auth)
	case token != "":
		hr.Header.Set("Authorization", "Bearer "+token)
	}
	return e.roundTrip(t, hr)
}

// roundTrip sends hr, reads the answer and checks it against
// api/openapi.yaml.
func (e *env) roundTrip(t *testing.T, hr *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatalf("%s %s: %v", hr.Method, hr.URL.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	e.spec.checkResponse(t, hr, resp.StatusCode, resp.Header, data)
	return response{status: resp.StatusCode, header: resp.Header, body: data}
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

func (r response) problem(t *testing.T) httpapi.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != httpapi.ProblemContentType {
		t.Fatalf("Content-Type %q, want %s; body %s", ct, httpapi.ProblemContentType, r.body)
	}
	var p httpapi.Problem
	r.decode(t, &p)
	return p
}

// want asserts a status and decodes a JSON body into v (if not nil).
func (r response) want(t *testing.T, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if v != nil {
		r.decode(t, v)
	}
}

func (e *env) vend(t *testing.T, token string, in app.VendInput) app.VendResult {
	t.Helper()
	var res app.VendResult
	e.do(t, "POST", "/v1/agents", token, in).want(t, http.StatusCreated, &res)
	return res
}

func (e *env) push(t *testing.T, token, ref string, in app.PushInput) domain.Todo {
	t.Helper()
	var td domain.Todo
	e.do(t, "POST", "/v1/agents/"+ref+"/todos", token, in).want(t, http.StatusCreated, &td)
	return td
}

var builder = app.VendInput{Handle: "builder", Name: "Build bot", Queues: []string{"build", "review"}, Verbs: []string{"list_todos", "claim", "complete"},
	BillingMode: "api", BillingModes: []string{"api", "max"}, ToolClass: "claude-code"}

func TestHealthAndReady(t *testing.T) {
	e := newEnv(t)
	var h map[string]string
	e.do(t, "GET", "/healthz", "", nil).want(t, 200, &h)
	if h["status"] != "ok" {
		t.Fatalf("healthz %v", h)
	}
	e.do(t, "GET", "/readyz", "", nil).want(t, 200, &h)
	if h["status"] != "ready" {
		t.Fatalf("readyz %v", h)
	}
	e.Exec(t, `ALTER TABLE agents RENAME TO agents_moved`) // the store now fails
	r := e.do(t, "GET", "/readyz", "", nil)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with a closed store = %d %s", r.status, r.body)
	}
	if p := r.problem(t); p.Code != "internal" || strings.Contains(p.Detail, "sql") {
		t.Fatalf("readyz problem %+v", p)
	}
}

func TestAgentLifecycle(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "POST", "/v1/agents", e.admin, builder)
	var res app.VendResult
	r.want(t, http.StatusCreated, &res)
	a := res.Agent
	if a.Handle != "builder" || a.Name != "Build bot" || !a.Active || a.RevokedAt != nil || a.BillingMode != "api" || a.ToolClass != "claude-code" ||
		strings.Join(a.Scope.Queues, ",") != "build,review" || strings.Join(a.Scope.Verbs, ",") != "list_todos,claim,complete" {
		t.Fatalf("vended agent %+v", a)
	}
	if got := r.header.Get("Location"); got != "/v1/agents/"+a.ID {
		t.Errorf("Location %q", got)
	}
	if !strings.HasPrefix(res.Credential, app.AgentTokenPrefix) || res.MCPURL != e.URL+"/mcp" ||
		!strings.Contains(res.ClaudeMCPAdd, "claude mcp add --transport http") || !strings.Contains(res.ClaudeMCPAdd, res.Credential) {
		t.Fatalf("vend result %+v", res)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("a response with a credential must not be cached: Cache-Control %q", r.header.Get("Cache-Control"))
	}

	var list struct{ Items []domain.Agent }
	e.do(t, "GET", "/v1/agents", e.admin, nil).want(t, 200, &list)
	if len(list.Items) != 1 || list.Items[0].ID != a.ID {
		t.Fatalf("list %+v", list)
	}
	for _, ref := range []string{"builder", a.ID} {
		var got domain.Agent
		e.do(t, "GET", "/v1/agents/"+ref, e.admin, nil).want(t, 200, &got)
		if got.ID != a.ID {
			t.Fatalf("GET /v1/agents/%s = %+v", ref, got)
		}
	}
	// bob sees nothing of it.
	e.do(t, "GET", "/v1/agents", e.bob, nil).want(t, 200, &list)
	if len(list.Items) != 0 {
		t.Fatalf("bob lists %+v", list)
	}

	var upd domain.Agent
	e.do(t, "PATCH", "/v1/agents/builder", e.admin, map[string]any{"name": "Builder", "active": false, "billing_mode": "max"}).want(t, 200, &upd)
	if upd.Name != "Builder" || upd.Active || upd.BillingMode != "max" || upd.Handle != "builder" {
		t.Fatalf("updated %+v", upd)
	}
	e.do(t, "PATCH", "/v1/agents/"+a.ID, e.admin, `{"active": true, "name": null}`).want(t, 200, &upd)
	if !upd.Active || upd.Name != "Builder" {
		t.Fatalf("updated %+v", upd)
	}

	var rot app.RotateResult
	e.do(t, "POST", "/v1/agents/builder/credentials", e.admin, nil).want(t, http.StatusCreated, &rot)
	if rot.Credential == res.Credential || !strings.HasPrefix(rot.Credential, app.AgentTokenPrefix) || rot.Agent.ID != a.ID {
		t.Fatalf("rotate %+v", rot)
	}
	// The old credential is dead, the new one is a (valid) agent credential.
	if p := e.do(t, "GET", "/v1/agents", res.Credential, nil).problem(t); p.Status != 401 {
		t.Fatalf("old credential: %+v", p)
	}
	if p := e.do(t, "GET", "/v1/agents", rot.Credential, nil).problem(t); p.Status != 403 || p.Reason != "subject_kind_not_allowed" {
		t.Fatalf("new credential on an operator route: %+v", p)
	}

	var rev domain.Agent
	e.do(t, "DELETE", "/v1/agents/builder", e.admin, nil).want(t, 200, &rev)
	if rev.RevokedAt == nil || rev.ID != a.ID {
		t.Fatalf("revoked %+v", rev)
	}
	var got domain.Agent
	e.do(t, "GET", "/v1/agents/builder", e.admin, nil).want(t, 200, &got)
	if got.RevokedAt == nil {
		t.Fatalf("after revoke %+v", got)
	}
	// A revoked agent keeps its handle: vending it again is a conflict, for
	// its owner and for anyone else (README: a revoked agent's handle
	// cannot be reused).
	for _, who := range []string{e.admin, e.bob} {
		if p := e.do(t, "POST", "/v1/agents", who, builder).problem(t); p.Status != 409 || p.Code != "conflict" {
			t.Fatalf("vending a revoked agent's handle again: %+v, want 409 conflict", p)
		}
	}

	var audit struct{ Items []domain.AuditEntry }
	e.do(t, "GET", "/v1/audit?agent=builder", e.admin, nil).want(t, 200, &audit)
	var actions []string
	for _, en := range audit.Items {
		actions = append(actions, en.Action)
		if en.AgentID != a.ID {
			t.Errorf("entry %+v is not the agent's", en)
		}
	}
	if strings.Join(actions, ",") != "agent.vend,agent.update,agent.update,agent.rotate_credential,agent.revoke" {
		t.Fatalf("audit actions %v", actions)
	}
	// Paging: after the first entry, at most two.
	e.do(t, "GET", "/v1/audit?agent="+a.ID+"&after="+itoa(audit.Items[0].Seq)+"&limit=2", e.admin, nil).want(t, 200, &audit)
	if len(audit.Items) != 2 || audit.Items[0].Action != "agent.update" {
		t.Fatalf("paged audit %+v", audit.Items)
	}
	e.do(t, "GET", "/v1/audit", e.admin, nil).want(t, 200, &audit)
	if len(audit.Items) != 6 { // bob's person.create and the agent's five
		t.Fatalf("whole audit log has %d entries", len(audit.Items))
	}
	var ver domain.AuditVerifyResult
	e.do(t, "GET", "/v1/audit/verify", e.admin, nil).want(t, 200, &ver)
	if !ver.OK || ver.Checked != 6 || len(ver.Warnings) != 0 {
		t.Fatalf("verify %+v", ver)
	}
}

// auditActions counts the actions of the whole audit log, read as the admin.
func (e *env) auditActions(t *testing.T) map[string]int {
	t.Helper()
	var audit struct{ Items []domain.AuditEntry }
	e.do(t, "GET", "/v1/audit", e.admin, nil).want(t, 200, &audit)
	seen := map[string]int{}
	for _, en := range audit.Items {
		seen[en.Action]++
	}
	return seen
}

func itoa(n int64) string { return strings.TrimSpace(string(must(json.Marshal(n)))) }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestPushListShowTodos(t *testing.T) {
	e := newEnv(t)
	a := e.vend(t, e.admin, builder).Agent
	r := e.do(t, "POST", "/v1/agents/builder/todos", e.admin,
		`{"queue":"build","title":"Build #42","payload":{"pr":42,"files":["a.go"],"meta":{"x":null}},"kind":"ci","source":"github"}`)
	var td domain.Todo
	r.want(t, http.StatusCreated, &td)
	if td.AgentID != a.ID || td.Queue != "build" || td.Title != "Build #42" || td.State != domain.TodoPending || !td.PushEligible ||
		td.Kind != "ci" || td.Source != "github" || td.MaxAttempts != domain.DefaultMaxAttempts || !strings.HasPrefix(td.CreatedBy, "operator:") {
		t.Fatalf("pushed %+v", td)
	}
	if string(td.Payload) != `{"pr":42,"files":["a.go"],"meta":{"x":null}}` {
		t.Errorf("payload %s", td.Payload)
	}
	if got := r.header.Get("Location"); got != "/v1/todos/"+td.ID {
		t.Errorf("Location %q", got)
	}
	var got domain.Todo
	e.do(t, "GET", "/v1/todos/"+td.ID, e.admin, nil).want(t, 200, &got)
	if got.ID != td.ID || string(got.Payload) != string(td.Payload) {
		t.Fatalf("GET todo %+v", got)
	}
	// payload null = absent.
	second := e.push(t, e.admin, a.ID, app.PushInput{Queue: "review", Title: "Review", Payload: json.RawMessage("null")})
	if second.Payload != nil {
		t.Errorf("payload null stored as %s", second.Payload)
	}

	var list struct{ Items []domain.Todo }
	for q, want := range map[string]int{"": 2, "?queue=build": 1, "?queue=review": 1, "?state=pending": 2, "?state=done": 0, "?limit=1": 1, "?queue=build&state=pending&limit=10": 1} {
		e.do(t, "GET", "/v1/agents/builder/todos"+q, e.admin, nil).want(t, 200, &list)
		if len(list.Items) != want {
			t.Errorf("todos%s: %d, want %d", q, len(list.Items), want)
		}
	}
	e.do(t, "GET", "/v1/agents/builder/todos", e.admin, nil).want(t, 200, &list)
	if list.Items[0].ID != td.ID || list.Items[1].ID != second.ID {
		t.Errorf("not oldest first: %v, %v", list.Items[0].ID, list.Items[1].ID)
	}
}

func TestPushIdempotency(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	first := e.do(t, "POST", "/v1/agents/builder/todos", e.admin, app.PushInput{Queue: "build", Title: "once", IdempotencyKey: "k-1"})
	var a domain.Todo
	first.want(t, http.StatusCreated, &a)
	again := e.do(t, "POST", "/v1/agents/builder/todos", e.admin, app.PushInput{Queue: "build", Title: "once, again", IdempotencyKey: "k-1"})
	var b domain.Todo
	again.want(t, http.StatusOK, &b)
	if a.ID != b.ID || b.Title != "once" || a.IdempotencyKey != "k-1" {
		t.Fatalf("first %+v, again %+v", a, b)
	}
	if again.header.Get("Location") != "" {
		t.Errorf("200 with Location %q", again.header.Get("Location"))
	}
	c := e.push(t, e.admin, "builder", app.PushInput{Queue: "build", Title: "other key", IdempotencyKey: "k-2"})
	if c.ID == a.ID {
		t.Fatal("another key returned the same todo")
	}
	var list struct{ Items []domain.Todo }
	e.do(t, "GET", "/v1/agents/builder/todos", e.admin, nil).want(t, 200, &list)
	if len(list.Items) != 2 {
		t.Fatalf("%d todos, want 2", len(list.Items))
	}
}

// snapshot is everything a bad request could change, as both persons see it.
func (e *env) snapshot(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []struct{ token, path string }{
		{e.admin, "/v1/agents"},
		{e.admin, "/v1/agents/builder"},
		{e.admin, "/v1/agents/builder/todos?limit=500"},
		{e.admin, "/v1/agents/gone/todos?limit=500"},
		{e.admin, "/v1/audit?limit=1000"},
		{e.admin, "/v1/audit/verify"},
		{e.bob, "/v1/agents"},
	} {
		r := e.do(t, "GET", q.path, q.token, nil)
		if r.status != 200 {
			t.Fatalf("snapshot GET %s = %d %s", q.path, r.status, r.body)
		}
		b.Write(r.body)
	}
	return b.String()
}

// TestBadInputChangesNothing sends every kind of bad request of (design: Strict JSON)
// and checks the problem document and that nothing changed.
func TestBadInputChangesNothing(t *testing.T) {
	e := newEnv(t)
	res := e.vend(t, e.admin, builder)
	agentCred := res.Credential
	td := e.push(t, e.admin, "builder", app.PushInput{Queue: "build", Title: "existing", IdempotencyKey: "k"})
	e.vend(t, e.admin, app.VendInput{Handle: "gone", Queues: []string{"q"}})
	e.do(t, "DELETE", "/v1/agents/gone", e.admin, nil).want(t, 200, nil)
	bobsAgent := e.vend(t, e.bob, app.VendInput{Handle: "bobs", Queues: []string{"q"}}).Agent
	bobsTodo := e.push(t, e.bob, "bobs", app.PushInput{Queue: "q", Title: "bob's"})
	before := e.snapshot(t)

	huge := `{"queue":"build","title":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}`
	textPlain, none := "text/plain", ""
	basic, bearerOnly := "Basic YWRtaW46YWRtaW4=", "Bearer "
	tests := []struct {
		name         string
		method, path string
		token        string
		body         any
		opt          req
		status       int
		code         domain.Code
		pointer      string
		detail       string // substring of the detail
		reason       string
	}{
		// Malformed JSON and shapes.
		{name: "malformed JSON", method: "POST", path: "/v1/agents", body: `{"handle": "x", "queues": ["q"]`, status: 400, code: "invalid_argument", detail: "byte offset 31"},
		{name: "malformed JSON missing colon", method: "POST", path: "/v1/agents/builder/todos", body: `{"queue" "build"}`, status: 400, code: "invalid_argument", detail: "byte offset 10"},
		{name: "trailing data", method: "POST", path: "/v1/agents", body: `{"handle":"x","queues":["q"]} {"handle":"y"}`, status: 400, code: "invalid_argument", detail: "after the JSON value"},
		{name: "empty body", method: "POST", path: "/v1/agents", body: ``, status: 400, code: "invalid_argument", detail: "empty"},
		{name: "array body", method: "POST", path: "/v1/agents", body: `[{"handle":"x"}]`, status: 400, code: "invalid_argument", detail: "the body must be a JSON object"},
		{name: "unknown member vend", method: "POST", path: "/v1/agents", body: `{"handle":"x","queues":["q"],"scope":{}}`, status: 400, code: "unknown_member", pointer: "/scope"},
		{name: "unknown member push", method: "POST", path: "/v1/agents/builder/todos", body: `{"queue":"build","title":"t","extra":1}`, status: 400, code: "unknown_member", pointer: "/extra", detail: `unknown member "extra"`},
		{name: "unknown member after free payload", method: "POST", path: "/v1/agents/builder/todos", body: `{"queue":"build","title":"t","payload":{"extra":{"deep":1}},"Title":"x"}`, status: 400, code: "unknown_member", pointer: "/Title"},
		{name: "unknown member escaped", method: "POST", path: "/v1/agents/builder/todos", body: `{"queue":"build","title":"t","a/b~c":1}`, status: 400, code: "unknown_member", pointer: "/a~1b~0c"},
		{name: "unknown member patch", method: "PATCH", path: "/v1/agents/builder", body: `{"nme":"x"}`, status: 400, code: "unknown_member", pointer: "/nme"},
		{name: "wrong type", method: "POST", path: "/v1/agents", body: `{"handle":"x","queues":"q"}`, status: 400, code: "invalid_argument", pointer: "/queues", detail: "expected an array"},
		{name: "wrong element type", method: "POST", path: "/v1/agents", body: `{"handle":"x","queues":["q",7]}`, status: 400, code: "invalid_argument", pointer: "/queues/1"},
		{name: "wrong type patch", method: "PATCH", path: "/v1/agents/builder", body: `{"active":"no"}`, status: 400, code: "invalid_argument", pointer: "/active"},
		{name: "fraction", method: "POST", path: "/v1/agents/builder/todos", body: `{"queue":"build","title":"t","max_attempts":1.5}`, status: 400, code: "invalid_argument", pointer: "/max_attempts"},
		{name: "duplicate member", method: "POST", path: "/v1/agents", body: `{"handle":"x","handle":"y","queues":["q"]}`, status: 400, code: "invalid_argument", pointer: "/handle", detail: "more than once"},
		// Rules of the use cases.
		{name: "invalid handle", method: "POST", path: "/v1/agents", body: app.VendInput{Handle: "Bad Handle", Queues: []string{"q"}}, status: 400, code: "invalid_argument", pointer: "/handle"},
		{name: "invalid queue name", method: "POST", path: "/v1/agents", body: app.VendInput{Handle: "x", Queues: []string{"ok", "NOT OK"}}, status: 400, code: "invalid_argument", pointer: "/queues/1"},
		{name: "no queue", method: "POST", path: "/v1/agents", body: app.VendInput{Handle: "x"}, status: 400, code: "invalid_argument", pointer: "/queues"},
		{name: "unknown verb", method: "POST", path: "/v1/agents", body: app.VendInput{Handle: "x", Queues: []string{"q"}, Verbs: []string{"delete_everything"}}, status: 400, code: "invalid_argument", pointer: "/verbs/0"},
		{name: "duplicate handle", method: "POST", path: "/v1/agents", body: app.VendInput{Handle: "builder", Queues: []string{"q"}}, status: 409, code: "conflict", detail: "already taken"},
		{name: "handle of another person's agent", method: "POST", path: "/v1/agents", body: app.VendInput{Handle: "bobs", Queues: []string{"q"}}, status: 409, code: "conflict"},
		{name: "queue outside the scope", method: "POST", path: "/v1/agents/builder/todos", body: app.PushInput{Queue: "deploy", Title: "t"}, status: 400, code: "invalid_argument", pointer: "/queue", detail: "not in agent builder's scope"},
		{name: "missing title", method: "POST", path: "/v1/agents/builder/todos", body: app.PushInput{Queue: "build"}, status: 400, code: "invalid_argument", pointer: "/title"},
		{name: "payload too large", method: "POST", path: "/v1/agents/builder/todos", body: `{"queue":"build","title":"t","payload":"` + strings.Repeat("x", domain.MaxPayloadLen) + `"}`, status: 400, code: "invalid_argument", pointer: "/payload"},
		{name: "immutable queues", method: "PATCH", path: "/v1/agents/builder", body: `{"name":"n","queues":["deploy"]}`, status: 400, code: "invalid_argument", pointer: "/queues", detail: "cannot be changed"},
		{name: "immutable verbs", method: "PATCH", path: "/v1/agents/builder", body: `{"verbs":[]}`, status: 400, code: "invalid_argument", pointer: "/verbs"},
		{name: "immutable handle", method: "PATCH", path: "/v1/agents/builder", body: `{"handle":"other"}`, status: 400, code: "invalid_argument", pointer: "/handle"},
		{name: "bad billing mode", method: "PATCH", path: "/v1/agents/builder", body: `{"billing_mode":"nope"}`, status: 400, code: "invalid_argument", pointer: "/billing_mode"},
		// Media type and size.
		{name: "text/plain", method: "POST", path: "/v1/agents", body: `{"handle":"x","queues":["q"]}`, opt: req{contentType: &textPlain}, status: 415, code: "invalid_argument", detail: "application/json"},
		{name: "no content type", method: "POST", path: "/v1/agents/builder/todos", body: `{"queue":"build","title":"t"}`, opt: req{contentType: &none}, status: 415, code: "invalid_argument"},
		{name: "oversize body", method: "POST", path: "/v1/agents/builder/todos", body: huge, status: 413, code: "invalid_argument", detail: "1048576 bytes"},
		// Credentials.
		{name: "no credential", method: "POST", path: "/v1/agents", token: "-", body: app.VendInput{Handle: "x", Queues: []string{"q"}}, status: 401, code: "unauthenticated"},
		{name: "unknown person token", method: "GET", path: "/v1/agents", token: app.NewToken(app.PersonTokenPrefix), status: 401, code: "unauthenticated"},
		{name: "garbage token", method: "POST", path: "/v1/agents/builder/todos", token: "hunter2", body: app.PushInput{Queue: "build", Title: "t"}, status: 401, code: "unauthenticated"},
		{name: "unknown agent token", method: "GET", path: "/v1/agents", token: app.NewToken(app.AgentTokenPrefix), status: 401, code: "unauthenticated"},
		{name: "basic auth", method: "GET", path: "/v1/agents", opt: req{auth: &basic}, status: 401, code: "unauthenticated", detail: "Bearer"},
		{name: "empty bearer", method: "GET", path: "/v1/agents", opt: req{auth: &bearerOnly}, status: 401, code: "unauthenticated"},
		{name: "agent credential", method: "POST", path: "/v1/agents/builder/todos", token: agentCred, body: app.PushInput{Queue: "build", Title: "t"}, status: 403, code: "forbidden", reason: "subject_kind_not_allowed"},
		{name: "agent credential on audit", method: "GET", path: "/v1/audit/verify", token: agentCred, status: 403, code: "forbidden", reason: "subject_kind_not_allowed"},
		// Another person's agent and todo: not found, like unknown ones.
		{name: "show another's agent", method: "GET", path: "/v1/agents/bobs", status: 404, code: "not_found"},
		{name: "show another's agent by id", method: "GET", path: "/v1/agents/" + bobsAgent.ID, status: 404, code: "not_found"},
		{name: "push to another's agent", method: "POST", path: "/v1/agents/builder/todos", token: e.bob, body: app.PushInput{Queue: "build", Title: "t"}, status: 404, code: "not_found"},
		{name: "patch another's agent", method: "PATCH", path: "/v1/agents/builder", token: e.bob, body: `{"active":false}`, status: 404, code: "not_found"},
		{name: "revoke another's agent", method: "DELETE", path: "/v1/agents/builder", token: e.bob, status: 404, code: "not_found"},
		{name: "rotate another's agent", method: "POST", path: "/v1/agents/builder/credentials", token: e.bob, status: 404, code: "not_found"},
		{name: "list another's todos", method: "GET", path: "/v1/agents/builder/todos", token: e.bob, status: 404, code: "not_found"},
		{name: "another's todo id", method: "GET", path: "/v1/todos/" + td.ID, token: e.bob, status: 404, code: "not_found"},
		{name: "another agent's todo id", method: "GET", path: "/v1/todos/" + bobsTodo.ID, status: 404, code: "not_found"},
		{name: "another's audit", method: "GET", path: "/v1/audit?agent=builder", token: e.bob, status: 404, code: "not_found"},
		{name: "unknown agent", method: "GET", path: "/v1/agents/nobody", status: 404, code: "not_found"},
		{name: "unknown todo", method: "GET", path: "/v1/todos/00000000-0000-7000-8000-000000000000", status: 404, code: "not_found"},
		{name: "whole audit as non-admin", method: "GET", path: "/v1/audit", token: e.bob, status: 403, code: "forbidden", detail: "admin"},
		// Revoked agent: later changes answer 409.
		{name: "revoke twice", method: "DELETE", path: "/v1/agents/gone", status: 409, code: "conflict", detail: "already revoked"},
		{name: "patch revoked", method: "PATCH", path: "/v1/agents/gone", body: `{"name":"x"}`, status: 409, code: "conflict"},
		{name: "rotate revoked", method: "POST", path: "/v1/agents/gone/credentials", status: 409, code: "conflict"},
		{name: "push to revoked", method: "POST", path: "/v1/agents/gone/todos", body: app.PushInput{Queue: "q", Title: "t"}, status: 409, code: "conflict"},
		// Query parameters.
		{name: "limit not a number", method: "GET", path: "/v1/agents/builder/todos?limit=ten", status: 400, code: "invalid_argument", detail: "query parameter limit"},
		{name: "limit zero", method: "GET", path: "/v1/agents/builder/todos?limit=0", status: 400, code: "invalid_argument", detail: "query parameter limit"},
		{name: "limit too large", method: "GET", path: "/v1/agents/builder/todos?limit=501", status: 400, code: "invalid_argument", detail: "query parameter limit"},
		{name: "bad state", method: "GET", path: "/v1/agents/builder/todos?state=finished", status: 400, code: "invalid_argument", detail: "query parameter state"},
		{name: "unknown parameter", method: "GET", path: "/v1/agents/builder/todos?stat=pending", status: 400, code: "invalid_argument", detail: `unknown query parameter "stat"`},
		{name: "repeated parameter", method: "GET", path: "/v1/agents/builder/todos?state=pending&state=done", status: 400, code: "invalid_argument", detail: "more than once"},
		{name: "negative after", method: "GET", path: "/v1/audit?after=-1", status: 400, code: "invalid_argument", detail: "query parameter after"},
		{name: "audit limit too large", method: "GET", path: "/v1/audit?limit=1001", status: 400, code: "invalid_argument", detail: "query parameter limit"},
		{name: "parameter on list agents", method: "GET", path: "/v1/agents?ownr=bob", status: 400, code: "invalid_argument", detail: "known: owner, limit, cursor"},
		// Routing.
		{name: "unknown route", method: "GET", path: "/v1/nothing", status: 404, code: "not_found", detail: "no route"},
		{name: "wrong method", method: "PUT", path: "/v1/agents", body: `{}`, status: 405, code: "method_not_allowed", detail: "not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := tt.token
			switch token {
			case "":
				token = e.admin
			case "-":
				token = ""
			}
			r := e.do(t, tt.method, tt.path, token, tt.body, tt.opt)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tt.status, r.body)
			}
			p := r.problem(t)
			if p.Code != string(tt.code) || p.Pointer != tt.pointer || p.Status != tt.status || !strings.Contains(p.Detail, tt.detail) || p.Reason != tt.reason {
				t.Fatalf("problem %+v, want code %s pointer %q detail ~%q reason %q", p, tt.code, tt.pointer, tt.detail, tt.reason)
			}
			if p.Type != httpapi.ProblemTypePrefix+p.Code || p.Title == "" || p.Instance != strings.SplitN(tt.path, "?", 2)[0] {
				t.Errorf("problem envelope %+v", p)
			}
			if tt.status == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: Bearer (got %q)", r.header.Get("WWW-Authenticate"))
			}
			if tt.status == 405 && r.header.Get("Allow") == "" {
				t.Error("405 without Allow")
			}
			if after := e.snapshot(t); after != before {
				t.Fatalf("the bad request changed state:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestInternalErrorsDoNotLeak breaks the database under the API: the answer
// is a generic 500 problem, and the cause stays in the log.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	e := newEnv(t)
	e.Exec(t, `ALTER TABLE agents RENAME TO agents_moved`)
	r := e.do(t, "GET", "/v1/agents", e.admin, nil)
	if r.status != 500 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	p := r.problem(t)
	if p.Code != "internal" || strings.Contains(strings.ToLower(p.Detail), "sql") || strings.Contains(p.Detail, "agents") {
		t.Fatalf("problem %+v leaks or is wrong", p)
	}
}

// TestRequestLog checks the request log: one record per request with method,
// path, status and duration, and never the bearer token.
func TestRequestLog(t *testing.T) {
	e := newEnv(t)
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	srv := httptest.NewServer(httpapi.New(e.Service, httpapi.Options{Log: log}))
	for _, tok := range []string{e.admin, "rcp_not-a-real-token"} {
		hr, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/v1/agents?x=1", nil)
		hr.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	srv.Close() // waits for the handlers, and so for their log records
	out := buf.String()
	if strings.Contains(out, e.admin) || strings.Contains(out, "rcp_not-a-real-token") || strings.Contains(out, "Bearer") {
		t.Fatalf("the log shows a token:\n%s", out)
	}
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "http request" {
			recs = append(recs, m)
		}
	}
	if len(recs) != 2 || recs[0]["method"] != "GET" || recs[0]["path"] != "/v1/agents" || recs[0]["status"] != 400.0 || recs[1]["status"] != 401.0 {
		t.Fatalf("request records %v", recs)
	}
	if _, ok := recs[0]["duration"]; !ok {
		t.Fatalf("no duration in %v", recs[0])
	}
}

// PATCH /v1/agents/{ref} self_clock_in_cap: the owner's cap of the agent's
// own clock_in outside its shift (design: Self clock-in cap), alone or with other
// members; bad values are invalid_argument at /self_clock_in_cap and change
// nothing.
func TestPatchSelfClockInCap(t *testing.T) {
	e := newEnv(t)
	e.do(t, "POST", "/v1/agents", e.admin, builder).want(t, http.StatusCreated, nil)
	var upd domain.Agent
	e.do(t, "GET", "/v1/agents/builder", e.admin, nil).want(t, 200, &upd)
	if upd.SelfClockInCap.String() != "8h" {
		t.Fatalf("default self_clock_in_cap = %s, want 8h", upd.SelfClockInCap)
	}
	e.do(t, "PATCH", "/v1/agents/builder", e.admin, `{"self_clock_in_cap": "0"}`).want(t, 200, &upd)
	if upd.SelfClockInCap.String() != "0" {
		t.Fatalf("self_clock_in_cap = %s, want 0", upd.SelfClockInCap)
	}
	e.do(t, "PATCH", "/v1/agents/builder", e.admin, `{"self_clock_in_cap": "2h30m", "name": "Builder 2"}`).want(t, 200, &upd)
	if upd.SelfClockInCap.String() != "2h30m" || upd.Name != "Builder 2" {
		t.Fatalf("updated %+v", upd)
	}
	for _, body := range []string{`{"self_clock_in_cap":"9 hours"}`, `{"self_clock_in_cap":"169h","name":"x"}`, `{"self_clock_in_cap":"-1s"}`, `{"self_clock_in_cap":8}`} {
		p := e.do(t, "PATCH", "/v1/agents/builder", e.admin, body).problem(t)
		if p.Status != 400 || p.Code != "invalid_argument" || p.Pointer != "/self_clock_in_cap" {
			t.Fatalf("PATCH %s: %+v, want 400 invalid_argument at /self_clock_in_cap", body, p)
		}
	}
	e.do(t, "GET", "/v1/agents/builder", e.admin, nil).want(t, 200, &upd)
	if upd.SelfClockInCap.String() != "2h30m" || upd.Name != "Builder 2" {
		t.Fatalf("a refused PATCH changed %+v", upd)
	}
	// Another person's agent: not found, nothing changes.
	if p := e.do(t, "PATCH", "/v1/agents/builder", e.bob, `{"self_clock_in_cap":"168h"}`).problem(t); p.Status != 404 {
		t.Fatalf("bob's PATCH: %+v", p)
	}
}
