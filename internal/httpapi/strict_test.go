package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi"
)

// leaksGo reports Go internals in a problem detail.
func leaksGo(detail string) bool {
	for _, s := range []string{"parsing time", "UnmarshalJSON", "UnmarshalText", "Go value", "Go struct", "time.Time", "json: "} {
		if strings.Contains(detail, s) {
			return true
		}
	}
	return false
}

// snapshotReady vends and revokes the agent "gone" that snapshot reads.
func (e *env) snapshotReady(t *testing.T) {
	t.Helper()
	e.vend(t, e.admin, app.VendInput{Handle: "gone", Queues: []string{"q"}})
	e.do(t, "DELETE", "/v1/agents/gone", e.admin, nil).want(t, 200, nil)
}

// TestPresenceUntilMustBeRFC3339: a bad `until` is a 400 at /until that
// says what is wanted, never a pointerless Go time-parsing error.
func TestPresenceUntilMustBeRFC3339(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	e.snapshotReady(t)
	before := e.snapshot(t)
	for _, until := range []string{`"yesterday"`, `1`, `"2026-13-01T00:00:00Z"`, `"2026-12-01 17:00:00"`, `true`, `{}`, `[]`} {
		r := e.do(t, "PUT", "/v1/agents/builder/presence", e.admin, `{"presence":"out","until":`+until+`}`)
		if r.status != http.StatusBadRequest {
			t.Fatalf("until %s: status %d %s", until, r.status, r.body)
		}
		p := r.problem(t)
		if p.Code != string(domain.CodeInvalidArgument) || p.Pointer != "/until" ||
			!strings.Contains(p.Detail, "until: want an RFC 3339 time such as 2026-12-01T17:00:00Z") || leaksGo(p.Detail) {
			t.Errorf("until %s: problem %+v", until, p)
		}
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused presence changed state")
	}
	// A good time and null still work.
	var ap app.AgentPresence
	e.do(t, "PUT", "/v1/agents/builder/presence", e.admin, `{"presence":"out","until":"2099-12-01T17:00:00Z"}`).want(t, 200, &ap)
	if ap.Presence != "out" {
		t.Fatalf("presence after a good until: %+v", ap)
	}
	e.do(t, "PUT", "/v1/agents/builder/presence", e.admin, `{"presence":"in","until":null}`).want(t, 200, &ap)
}

// TestBodyMustBeAnObject: null (or any non-object top level) is not {}.
func TestBodyMustBeAnObject(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	e.snapshotReady(t)
	before := e.snapshot(t)
	for _, rt := range []struct{ method, path string }{
		{"POST", "/v1/agents"},
		{"PATCH", "/v1/agents/builder"},
		{"POST", "/v1/agents/builder/todos"},
		{"PUT", "/v1/agents/builder/presence"},
		{"PUT", "/v1/agents/builder/shift"},
	} {
		for _, body := range []string{`null`, ` null `, `1`, `"x"`, `true`, `[]`} {
			r := e.do(t, rt.method, rt.path, e.admin, body)
			if r.status != http.StatusBadRequest {
				t.Fatalf("%s %s %s: status %d %s", rt.method, rt.path, body, r.status, r.body)
			}
			p := r.problem(t)
			if p.Code != string(domain.CodeInvalidArgument) || p.Pointer != "" || !strings.Contains(p.Detail, "the body must be a JSON object") {
				t.Errorf("%s %s %s: problem %+v", rt.method, rt.path, body, p)
			}
			// The pointer "" (the whole document) is sent, not omitted.
			if !strings.Contains(string(r.body), `"pointer":""`) {
				t.Errorf("%s %s %s: no explicit pointer \"\" in %s", rt.method, rt.path, body, r.body)
			}
		}
	}
	// Other errors without a pointer do not gain one.
	r := e.do(t, "POST", "/v1/agents", e.admin, `{"handle":`)
	if strings.Contains(string(r.body), `"pointer"`) {
		t.Errorf("malformed JSON has a pointer: %s", r.body)
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused body changed state")
	}
}

// TestPushPresentZeroIsNotAbsent: max_attempts 0 and idempotency_key ""
// are refused at their pointers instead of meaning "default".
func TestPushPresentZeroIsNotAbsent(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	e.snapshotReady(t)
	before := e.snapshot(t)
	for _, tc := range []struct{ body, pointer, detail string }{
		{`{"queue":"build","title":"t","max_attempts":0}`, "/max_attempts", "max_attempts must be between 1 and 100, got 0"},
		{`{"queue":"build","title":"t","max_attempts":-3}`, "/max_attempts", "between 1 and 100"},
		{`{"queue":"build","title":"t","max_attempts":101}`, "/max_attempts", "between 1 and 100"},
		{`{"queue":"build","title":"t","idempotency_key":""}`, "/idempotency_key", "must not be empty"},
		{`{"queue":"build","title":"t","max_attempts":"3"}`, "/max_attempts", "expected an integer"},
		{`{"queue":"build","title":"t","idempotency_key":7}`, "/idempotency_key", "expected a string"},
		{`{"queue":"build","title":"t","max_attempts":1,"max_attempts":2}`, "/max_attempts", "more than once"},
	} {
		r := e.do(t, "POST", "/v1/agents/builder/todos", e.admin, tc.body)
		if r.status != http.StatusBadRequest {
			t.Fatalf("%s: status %d %s", tc.body, r.status, r.body)
		}
		if p := r.problem(t); p.Code != string(domain.CodeInvalidArgument) || p.Pointer != tc.pointer || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s: problem %+v, want %s at %s", tc.body, p, tc.detail, tc.pointer)
		}
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused push changed state")
	}
	// Present values and absent ones still work; null is absent.
	var td domain.Todo
	e.do(t, "POST", "/v1/agents/builder/todos", e.admin, `{"queue":"build","title":"a","max_attempts":1,"idempotency_key":"k"}`).want(t, 201, &td)
	if td.MaxAttempts != 1 || td.IdempotencyKey != "k" {
		t.Fatalf("pushed %+v", td)
	}
	var td2 domain.Todo
	e.do(t, "POST", "/v1/agents/builder/todos", e.admin, `{"queue":"build","title":"b","max_attempts":null,"idempotency_key":null,"payload":null}`).want(t, 201, &td2)
	if td2.MaxAttempts != domain.DefaultMaxAttempts || td2.IdempotencyKey != "" || td2.Payload != nil {
		t.Fatalf("pushed %+v", td2)
	}
}

// TestEveryRouteRefusesUnknownQueryParameters walks the route table: each
// route refuses a parameter it does not list (after authentication, before
// its handler), and a route's own parameters given twice.
func TestEveryRouteRefusesUnknownQueryParameters(t *testing.T) {
	e := newEnv(t)
	res := e.vend(t, e.admin, builder)
	td := e.push(t, e.admin, "builder", app.PushInput{Queue: "build", Title: "t"})
	e.snapshotReady(t)
	before := e.snapshot(t)
	for _, rt := range httpapi.Routes() {
		path := strings.NewReplacer("{ref}", "builder", "{agent}", "builder", "{id}", td.ID).Replace(rt.Path)
		var body any
		if rt.Method == "POST" || rt.Method == "PUT" || rt.Method == "PATCH" {
			body = `{}`
		}
		token := e.admin
		if rt.OperationID == "sendHeartbeat" {
			token = res.Credential
		}
		r := e.do(t, rt.Method, path+"?bogus=1", token, body, req{timeout: 10 * time.Second}) // GET /v1/events must not open its stream
		if r.status != http.StatusBadRequest {
			t.Errorf("%s %s?bogus=1: status %d %s", rt.Method, path, r.status, r.body)
			continue
		}
		p := r.problem(t)
		if p.Code != string(domain.CodeInvalidArgument) || !strings.Contains(p.Detail, `unknown query parameter "bogus"`) || p.Pointer != "" {
			t.Errorf("%s %s?bogus=1: problem %+v", rt.Method, path, p)
		}
		if len(rt.Query) == 0 && !strings.Contains(p.Detail, "takes none") {
			t.Errorf("%s %s: detail %q does not say the route takes none", rt.Method, path, p.Detail)
		}
		for _, q := range rt.Query {
			r := e.do(t, rt.Method, path+"?"+q+"=1&"+q+"=2", token, body, req{timeout: 10 * time.Second})
			if p := r.problem(t); r.status != http.StatusBadRequest || !strings.Contains(p.Detail, q) {
				t.Errorf("%s %s with %s twice: %d %+v", rt.Method, path, q, r.status, p)
			}
		}
	}
	// Authentication still comes first.
	if r := e.do(t, "GET", "/v1/agents/builder?bogus=1", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("unauthenticated request with a bad parameter: %d %s", r.status, r.body)
	}
	if after := e.snapshot(t); after != before {
		t.Fatalf("a refused request changed state")
	}
}
