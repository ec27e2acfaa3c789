package httpapi_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// The tenant isolation matrix (issue 9 item 8): every operation of
// api/openapi.yaml × {another member, an admin, an agent credential, a
// revoked token, an expired token}, each aimed at member ann's resources,
// asserting the status and that nothing of ann's changed. An operation of
// the document missing from matrixOps fails the test, so a new route is
// covered by construction: add one line below.

// Callers of the matrix.
const (
	cMember  = "another member"
	cAdmin   = "an admin"
	cAgent   = "an agent credential"
	cRevoked = "a revoked token"
	cExpired = "an expired token"
)

var matrixCallers = []string{cMember, cAdmin, cAgent, cRevoked, cExpired}

// expect gives the status per caller; the token-less routes ignore the
// token and answer the same to everyone.
type expect map[string]int

// Expectation sets. "Theirs" = a resource of ann: another member and an
// admin both get 404 (admins steer only their own agents; they hand others
// over with owner), an agent credential 403, a dead token 401.
var (
	theirs    = expect{cMember: 404, cAdmin: 404, cAgent: 403, cRevoked: 401, cExpired: 401}
	adminOnly = func(admin int) expect {
		return expect{cMember: 403, cAdmin: admin, cAgent: 403, cRevoked: 401, cExpired: 401}
	}
	ownScope = func(status int) expect {
		return expect{cMember: status, cAdmin: status, cAgent: 403, cRevoked: 401, cExpired: 401}
	}
	tokenless  = expect{cMember: 200, cAdmin: 200, cAgent: 200, cRevoked: 200, cExpired: 200}
	heartbeatX = expect{cMember: 404, cAdmin: 404, cAgent: 404, cRevoked: 401, cExpired: 401}
)

// matrixOp is one operation: its request (placeholders {agent}, {todo},
// {person}, {token} name ann's agent, todo, person id and a live token id)
// and the statuses.
type matrixOp struct {
	method, path string
	body         any
	want         expect
}

var matrixOps = map[string]matrixOp{
	"getHealth":        {"GET", "/healthz", nil, tokenless},
	"getReady":         {"GET", "/readyz", nil, tokenless},
	"getOpenAPI":       {"GET", "/v1/openapi.yaml", nil, tokenless},
	"vendAgent":        {"POST", "/v1/agents", map[string]any{"handle": "m-{caller}", "queues": []string{"q"}}, ownScope(201)},
	"listAgents":       {"GET", "/v1/agents", nil, ownScope(200)},
	"getAgent":         {"GET", "/v1/agents/{agent}", nil, theirs},
	"updateAgent":      {"PATCH", "/v1/agents/{agent}", map[string]any{"name": "stolen"}, theirs},
	"revokeAgent":      {"DELETE", "/v1/agents/{agent}", nil, theirs},
	"rotateCredential": {"POST", "/v1/agents/{agent}/credentials", nil, theirs},
	"pushTodo":         {"POST", "/v1/agents/{agent}/todos", map[string]any{"queue": "q", "title": "x"}, theirs},
	"listAgentTodos":   {"GET", "/v1/agents/{agent}/todos", nil, theirs},
	"getTodo":          {"GET", "/v1/todos/{todo}", nil, theirs},
	"getPresence":      {"GET", "/v1/agents/{agent}/presence", nil, theirs},
	"setPresence":      {"PUT", "/v1/agents/{agent}/presence", map[string]any{"presence": "out"}, theirs},
	"clearPresence":    {"DELETE", "/v1/agents/{agent}/presence", nil, theirs},
	"setShift":         {"PUT", "/v1/agents/{agent}/shift", map[string]any{"shift": "mon-fri 09:00-17:00 UTC"}, theirs},
	"sendHeartbeat":    {"POST", "/v1/agents/{agent}/heartbeat", map[string]any{"state": "online"}, heartbeatX},
	"getAgentStatus":   {"GET", "/v1/agents/{agent}/status", nil, theirs},
	"streamEvents":     {"GET", "/v1/events", nil, ownScope(200)},
	"listAudit":        {"GET", "/v1/audit?agent={agent}", nil, theirs},
	"verifyAudit":      {"GET", "/v1/audit/verify", nil, ownScope(200)},
	"createPerson":     {"POST", "/v1/persons", map[string]any{"name": "new {caller}"}, adminOnly(201)},
	"listPersons":      {"GET", "/v1/persons", nil, adminOnly(200)},
	"getPerson":        {"GET", "/v1/persons/{person}", nil, expect{cMember: 404, cAdmin: 200, cAgent: 403, cRevoked: 401, cExpired: 401}},
	"updatePerson":     {"PATCH", "/v1/persons/{person}", map[string]any{"role": "member"}, adminOnly(200)},
	"createToken":      {"POST", "/v1/tokens", map[string]any{"name": "mine"}, ownScope(201)},
	"listTokens":       {"GET", "/v1/tokens", nil, ownScope(200)},
	"revokeToken":      {"DELETE", "/v1/tokens/{token}", nil, theirs},
	"createHook":       {"POST", "/v1/hooks", map[string]any{"kind": "github", "agent": "{agent}", "queue": "q"}, theirs},
	"listHooks":        {"GET", "/v1/hooks?agent={agent}", nil, theirs},
	"getHook":          {"GET", "/v1/hooks/{hook}", nil, theirs},
	"rotateHookSecret": {"POST", "/v1/hooks/{hook}/secret", nil, theirs},
	"deleteHook":       {"DELETE", "/v1/hooks/{hook}", nil, theirs},
	// Deliveries carry no token: an unsigned one is 401 for everyone.
	"deliverHook": {"POST", "/v1/hooks/{hook}/deliveries", map[string]any{"zen": "x"}, expect{cMember: 401, cAdmin: 401, cAgent: 401, cRevoked: 401, cExpired: 401}},
}

func TestTenantIsolationMatrix(t *testing.T) {
	e := newEnv(t)
	sp := loadSpec(t)

	// Every documented operation has a row, and every row is documented.
	documented := map[string]bool{}
	for key, op := range sp.ops {
		id, _ := op["operationId"].(string)
		documented[id] = true
		if _, ok := matrixOps[id]; !ok {
			t.Errorf("operation %s (%s) is missing from matrixOps: add one line for it", id, key)
		}
	}
	for id := range matrixOps {
		if !documented[id] {
			t.Errorf("matrixOps has %s, which api/openapi.yaml does not document", id)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// ann: a member with an agent, a todo, a live token, a revoked one and
	// one that expires. bob: another member, whose agent's credential is
	// the agent caller.
	ann := e.AddPerson(t, "ann")
	annP, err := e.Service.AuthenticatePerson(t.Context(), ann)
	if err != nil {
		t.Fatal(err)
	}
	bob := e.AddPerson(t, "bob-matrix")
	agent := e.vend(t, ann, app.VendInput{Handle: "ann-bot", Queues: []string{"q"}, Verbs: domain.ScopeVerbs})
	var todo domain.Todo
	e.do(t, "POST", "/v1/agents/ann-bot/todos", ann, map[string]any{"queue": "q", "title": "secret"}).want(t, 201, &todo)
	bobAgent := e.vend(t, bob, app.VendInput{Handle: "bob-bot", Queues: []string{"q"}})
	mint := func(name string, expires *time.Time) app.MintedToken {
		var m app.MintedToken
		e.do(t, "POST", "/v1/tokens", ann, map[string]any{"name": name, "expires_at": expires}).want(t, 201, &m)
		return m
	}
	var hook app.HookSecretResult
	e.do(t, "POST", "/v1/hooks", ann, map[string]any{"kind": "github", "agent": "ann-bot", "queue": "q"}).want(t, 201, &hook)
	live := mint("live", nil)
	revoked := mint("revoked", nil)
	e.do(t, "DELETE", "/v1/tokens/"+revoked.ID, ann, nil).want(t, 200, nil)
	soon := e.Clock.Now().Add(time.Hour)
	expired := mint("expires", &soon)
	e.Clock.Advance(2 * time.Hour)

	tokens := map[string]string{cMember: bob, cAdmin: e.admin, cAgent: bobAgent.Credential, cRevoked: revoked.Token, cExpired: expired.Token}
	fill := func(s, caller string) string {
		return strings.NewReplacer("{agent}", agent.Agent.ID, "{todo}", todo.ID, "{person}", annP.ID, "{token}", live.ID, "{hook}", hook.Hook.ID,
			"{caller}", strings.ReplaceAll(strings.Split(caller, " ")[1], "-", "")).Replace(s)
	}
	ids := make([]string, 0, len(matrixOps))
	for id := range matrixOps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		op := matrixOps[id]
		for _, caller := range matrixCallers {
			t.Run(id+"/"+caller, func(t *testing.T) {
				before := e.annSnapshot(t, annP.ID)
				var body any
				if op.body != nil {
					body = fillBody(op.body, func(s string) string { return fill(s, caller) })
				}
				path := fill(op.path, caller)
				var status int
				if id == "streamEvents" {
					status = e.streamStatus(t, path, tokens[caller])
				} else {
					status = e.do(t, op.method, path, tokens[caller], body).status
				}
				if want := op.want[caller]; status != want {
					t.Errorf("%s %s as %s: status %d, want %d", op.method, path, caller, status, want)
				}
				if after := e.annSnapshot(t, annP.ID); after != before {
					t.Errorf("%s %s as %s changed ann's data:\nbefore %s\nafter  %s", op.method, path, caller, before, after)
				}
			})
		}
	}
}

// fillBody replaces placeholders in the string values of a body.
func fillBody(b any, fill func(string) string) any {
	switch v := b.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = fillBody(x, fill)
		}
		return out
	case string:
		return fill(v)
	}
	return b
}

// streamStatus opens an SSE stream and returns its status once the headers
// arrived (the stream is then closed).
func (e *env) streamStatus(t *testing.T, path, token string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// annSnapshot digests everything of ann's the API could change: her
// person row, her tokens, her agents (also one handed away), their
// credentials, todos and audit entries, her console sessions. Columns
// that reads legitimately touch (last_used_at, updated_at of a no-op) are
// left out.
func (e *env) annSnapshot(t *testing.T, personID string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.DBPath+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	queries := []string{
		`SELECT id, name, admin, deactivated_at FROM persons WHERE id = ?1`,
		`SELECT id, name, created_at, expires_at, revoked_at FROM person_tokens WHERE person_id = ?1 ORDER BY id`,
		`SELECT id, handle, owner_id, name, active, revoked_at, billing_mode, billing_modes, tool_class,
			coalesce(shift, ''), coalesce(presence_override, ''), coalesce(override_until, 0), state, coalesce(last_heartbeat_at, 0)
			FROM agents WHERE owner_id = ?1 OR handle = 'ann-bot' ORDER BY id`,
		`SELECT c.id, c.revoked_at FROM credentials c JOIN agents a ON a.id = c.agent_id WHERE a.handle = 'ann-bot' ORDER BY c.id`,
		`SELECT t.id, t.state, t.attempt, t.title FROM todos t JOIN agents a ON a.id = t.agent_id WHERE a.handle = 'ann-bot' ORDER BY t.id`,
		`SELECT au.seq, au.action FROM audit au JOIN agents a ON a.id = au.agent_id WHERE a.handle = 'ann-bot' ORDER BY au.seq`,
		`SELECT count(*) FROM audit WHERE data LIKE '%' || ?1 || '%' AND action <> 'person.create'`,
		`SELECT id, ended_at FROM console_sessions WHERE person_id = ?1 ORDER BY id`,
		`SELECT id, agent_id, queue, secret, updated_at FROM hooks WHERE owner_id = ?1 ORDER BY id`,
		`SELECT count(*) FROM hook_deliveries d JOIN hooks h ON h.id = d.hook_id WHERE h.owner_id = ?1 AND d.outcome <> 'refused'`,
	}
	h := sha256.New()
	var dump strings.Builder
	for _, q := range queries {
		rows, err := db.QueryContext(t.Context(), q, personID)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&dump, "%v;", vals)
		}
		rows.Close()
		dump.WriteString("|")
	}
	h.Write([]byte(dump.String()))
	return hex.EncodeToString(h.Sum(nil))[:16] + " " + dump.String()
}
