package httpapi_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// The tenant isolation matrix: every operation of api/openapi.yaml ×
// {another member, an admin, an agent credential, a revoked token, an
// expired token}, each aimed at member ann's resources, asserting the
// status, that nothing of ann's changed, and that the response body holds
// none of ann's ids, names, titles or secrets (a value the request itself
// carried, such as the id in a 404's path, may be echoed; an admin may see
// ann's person on the person routes). An operation of the document missing
// from matrixOps fails the test, so a new route is covered by
// construction: add one line below. matrixExtra holds further rows for
// operations with more than one way in (a member's owner change).

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
	// personVisible: an admin's answer may show ann's person (id, name).
	personVisible bool
}

// matrixExtra are further rows, named "<operationId> <what>"; {self} is the
// caller's own person id (ann's for her dead tokens).
var matrixExtra = map[string]matrixOp{
	// A member cannot take ann's agent (404, as for any of ann's agents);
	// an admin cannot hand it to themself (403 hand_over_to_self).
	"updateAgent owner": {"PATCH", "/v1/agents/{agent}", map[string]any{"owner": "{self}"},
		expect{cMember: 404, cAdmin: 403, cAgent: 403, cRevoked: 401, cExpired: 401}, false},
}

var matrixOps = map[string]matrixOp{
	"getHealth":        {"GET", "/healthz", nil, tokenless, false},
	"getReady":         {"GET", "/readyz", nil, tokenless, false},
	"getOpenAPI":       {"GET", "/v1/openapi.yaml", nil, tokenless, false},
	"vendAgent":        {"POST", "/v1/agents", map[string]any{"handle": "m-{caller}", "queues": []string{"q"}}, ownScope(201), false},
	"listAgents":       {"GET", "/v1/agents", nil, ownScope(200), false},
	"getAgent":         {"GET", "/v1/agents/{agent}", nil, theirs, false},
	"updateAgent":      {"PATCH", "/v1/agents/{agent}", map[string]any{"name": "stolen"}, theirs, false},
	"revokeAgent":      {"DELETE", "/v1/agents/{agent}", nil, theirs, false},
	"rotateCredential": {"POST", "/v1/agents/{agent}/credentials", nil, theirs, false},
	"pushTodo":         {"POST", "/v1/agents/{agent}/todos", map[string]any{"queue": "q", "title": "x"}, theirs, false},
	"listAgentTodos":   {"GET", "/v1/agents/{agent}/todos", nil, theirs, false},
	"getTodo":          {"GET", "/v1/todos/{todo}", nil, theirs, false},
	"getPresence":      {"GET", "/v1/agents/{agent}/presence", nil, theirs, false},
	"setPresence":      {"PUT", "/v1/agents/{agent}/presence", map[string]any{"presence": "out"}, theirs, false},
	"clearPresence":    {"DELETE", "/v1/agents/{agent}/presence", nil, theirs, false},
	"setShift":         {"PUT", "/v1/agents/{agent}/shift", map[string]any{"shift": "mon-fri 09:00-17:00 UTC"}, theirs, false},
	"sendHeartbeat":    {"POST", "/v1/agents/{agent}/heartbeat", map[string]any{"state": "online"}, heartbeatX, false},
	"getAgentStatus":   {"GET", "/v1/agents/{agent}/status", nil, theirs, false},
	"streamEvents":     {"GET", "/v1/events", nil, ownScope(200), false},
	"listAudit":        {"GET", "/v1/audit?agent={agent}", nil, theirs, false},
	"verifyAudit":      {"GET", "/v1/audit/verify", nil, ownScope(200), false},
	"createPerson":     {"POST", "/v1/persons", map[string]any{"name": "new {caller}"}, adminOnly(201), false},
	"listPersons":      {"GET", "/v1/persons", nil, adminOnly(200), true},
	"getPerson":        {"GET", "/v1/persons/{person}", nil, expect{cMember: 404, cAdmin: 200, cAgent: 403, cRevoked: 401, cExpired: 401}, true},
	"updatePerson":     {"PATCH", "/v1/persons/{person}", map[string]any{"role": "member"}, adminOnly(200), true},
	"createToken":      {"POST", "/v1/tokens", map[string]any{"name": "mine"}, ownScope(201), false},
	"listTokens":       {"GET", "/v1/tokens", nil, ownScope(200), false},
	"revokeToken":      {"DELETE", "/v1/tokens/{token}", nil, theirs, false},
	"createHook":       {"POST", "/v1/hooks", map[string]any{"kind": "github", "agent": "{agent}", "queue": "q"}, theirs, false},
	"listHooks":        {"GET", "/v1/hooks?agent={agent}", nil, theirs, false},
	"getHook":          {"GET", "/v1/hooks/{hook}", nil, theirs, false},
	"rotateHookSecret": {"POST", "/v1/hooks/{hook}/secret", nil, theirs, false},
	"deleteHook":       {"DELETE", "/v1/hooks/{hook}", nil, theirs, false},
	// Another person's agents cannot join a pool without a grant (400 at /members/0).
	"createPool":    {"POST", "/v1/pools", map[string]any{"name": "p-{caller}", "queues": []string{"q"}, "members": []string{"{agent}"}}, expect{cMember: 400, cAdmin: 400, cAgent: 403, cRevoked: 401, cExpired: 401}, false},
	"listPools":     {"GET", "/v1/pools", nil, ownScope(200), false},
	"getPool":       {"GET", "/v1/pools/ann-pool-zq9", nil, theirs, false},
	"deletePool":    {"DELETE", "/v1/pools/ann-pool-zq9", nil, theirs, false},
	"updatePool":    {"PATCH", "/v1/pools/ann-pool-zq9", map[string]any{"members": []string{"x"}}, theirs, false},
	"pushPoolTodo":  {"POST", "/v1/pools/ann-pool-zq9/todos", map[string]any{"queue": "q", "title": "x"}, theirs, false},
	"listPoolTodos": {"GET", "/v1/pools/ann-pool-zq9/todos", nil, theirs, false},
	// Pool grants: an admin manages any agent's (design: Pool grants) but
	// cannot grant another person's agent to themself (403 grant_to_self);
	// ann's agent has no grants, so an admin's list is empty and a
	// revocation finds none.
	"grantPool":       {"POST", "/v1/agents/{agent}/pool-grants", map[string]any{"person": "{self}"}, expect{cMember: 404, cAdmin: 403, cAgent: 403, cRevoked: 401, cExpired: 401}, false},
	"listPoolGrants":  {"GET", "/v1/agents/{agent}/pool-grants", nil, expect{cMember: 404, cAdmin: 200, cAgent: 403, cRevoked: 401, cExpired: 401}, false},
	"revokePoolGrant": {"DELETE", "/v1/agents/{agent}/pool-grants/{self}", nil, theirs, false},
	// Deliveries carry no token: an unsigned one is 401 for everyone.
	"deliverHook": {"POST", "/v1/hooks/{hook}/deliveries", map[string]any{"zen": "x"}, expect{cMember: 401, cAdmin: 401, cAgent: 401, cRevoked: 401, cExpired: 401}, false},
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
	ann := e.AddPerson(t, "annika-q7x")
	annP, err := e.Service.AuthenticatePerson(t.Context(), ann)
	if err != nil {
		t.Fatal(err)
	}
	bob := e.AddPerson(t, "bob-matrix")
	bobP, _ := e.Service.AuthenticatePerson(t.Context(), bob)
	adminP, _ := e.Service.AuthenticatePerson(t.Context(), e.admin)
	agent := e.vend(t, ann, app.VendInput{Handle: "ann-bot", Name: "Annika's zq9 bot", Queues: []string{"q"}, Verbs: domain.ScopeVerbs})
	var todo domain.Todo
	e.do(t, "POST", "/v1/agents/ann-bot/todos", ann, map[string]any{"queue": "q", "title": "secret zq9 title", "payload": map[string]any{"k": "payload-zq9"}}).want(t, 201, &todo)
	bobAgent := e.vend(t, bob, app.VendInput{Handle: "bob-bot", Queues: []string{"q"}})
	adminAgent := e.vend(t, e.admin, app.VendInput{Handle: "admin-bot", Queues: []string{"q"}})
	mint := func(name string, expires *time.Time) app.MintedToken {
		var m app.MintedToken
		e.do(t, "POST", "/v1/tokens", ann, map[string]any{"name": name, "expires_at": expires}).want(t, 201, &m)
		return m
	}
	var pool domain.Pool
	e.do(t, "POST", "/v1/pools", ann, map[string]any{"name": "ann-pool-zq9", "queues": []string{"q"}, "members": []string{"ann-bot"}}).want(t, 201, &pool)
	var hook app.HookSecretResult
	e.do(t, "POST", "/v1/hooks", ann, map[string]any{"kind": "github", "agent": "ann-bot", "queue": "q"}).want(t, 201, &hook)
	live := mint("live", nil)
	revoked := mint("revoked", nil)
	e.do(t, "DELETE", "/v1/tokens/"+revoked.ID, ann, nil).want(t, 200, nil)
	soon := e.Clock.Now().Add(time.Hour)
	expired := mint("expires", &soon)
	e.Clock.Advance(2 * time.Hour)
	// ann's agent beats after the clock has moved, so it stays online for
	// the whole matrix: an offline transition of the tracker landing
	// between two snapshots would read as a change made by the caller.
	e.beat(t, agent.Credential, "ann-bot", `{"state":"online","billing_mode":"api"}`).want(t, 200, nil)

	tokens := map[string]string{cMember: bob, cAdmin: e.admin, cAgent: bobAgent.Credential, cRevoked: revoked.Token, cExpired: expired.Token}
	selves := map[string]string{cMember: bobP.ID, cAdmin: adminP.ID, cAgent: bobP.ID, cRevoked: annP.ID, cExpired: annP.ID}
	fill := func(s, caller string) string {
		return strings.NewReplacer("{agent}", agent.Agent.ID, "{todo}", todo.ID, "{person}", annP.ID, "{token}", live.ID, "{hook}", hook.Hook.ID,
			"{self}", selves[caller], "{caller}", strings.ReplaceAll(strings.Split(caller, " ")[1], "-", "")).Replace(s)
	}
	// What no other caller may read: everything that names or identifies
	// ann or her things. The person's id and name are listed apart: an
	// admin sees them on the person routes.
	annPerson := []string{annP.ID, "annika-q7x"}
	annThings := []string{agent.Agent.ID, "ann-bot", "Annika's zq9 bot", agent.Credential, todo.ID, "secret zq9 title", "payload-zq9",
		live.ID, revoked.ID, expired.ID, hook.Hook.ID, hook.Secret, pool.ID, "ann-pool-zq9"}
	// Each caller's stream must also carry its own agent's events, so a
	// leak on the stream has a moment to show before the stream is judged.
	own := map[string][2]string{cMember: {bobAgent.Credential, "bob-bot"}, cAdmin: {adminAgent.Credential, "admin-bot"}}
	modes := []string{"api", "max"}
	beats := 0
	rows := map[string]matrixOp{}
	for id, op := range matrixOps {
		rows[id] = op
	}
	for id, op := range matrixExtra {
		rows[id] = op
	}
	ids := make([]string, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		op := rows[id]
		for _, caller := range matrixCallers {
			t.Run(id+"/"+caller, func(t *testing.T) {
				before := e.annSnapshot(t, annP.ID)
				var body any
				if op.body != nil {
					body = fillBody(op.body, func(s string) string { return fill(s, caller) })
				}
				path := fill(op.path, caller)
				var status int
				var got []byte
				if id == "streamEvents" {
					beats++
					status, got = e.streamLeak(t, path, tokens[caller], func() {
						// ann's agent changes, then the caller's own: only the
						// latter may reach the caller's stream.
						e.beat(t, agent.Credential, "ann-bot", `{"state":"online","billing_mode":"`+modes[beats%2]+`"}`).want(t, 200, nil)
						if o, ok := own[caller]; ok {
							e.beat(t, o[0], o[1], `{"state":"online","billing_mode":"`+modes[beats%2]+`"}`).want(t, 200, nil)
						}
						before = e.annSnapshot(t, annP.ID) // the beats were the test's, not the stream's
					}, own[caller][1])
				} else {
					r := e.do(t, op.method, path, tokens[caller], body)
					status, got = r.status, r.body
				}
				if want := op.want[caller]; status != want {
					t.Errorf("%s %s as %s: status %d, want %d", op.method, path, caller, status, want)
				}
				if after := e.annSnapshot(t, annP.ID); after != before {
					t.Errorf("%s %s as %s changed ann's data:\nbefore %s\nafter  %s", op.method, path, caller, before, after)
				}
				sent := path + fmt.Sprint(body)
				secret := append([]string{}, annThings...)
				if !(op.personVisible && caller == cAdmin) {
					secret = append(secret, annPerson...)
				}
				for _, v := range secret {
					if !strings.Contains(sent, v) && strings.Contains(string(got), v) {
						t.Errorf("%s %s as %s: the answer holds ann's %q:\n%s", op.method, path, caller, v, got)
					}
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

// streamLeak opens an SSE stream and returns its status and what it
// carried: a refused stream's problem body; an open stream's lines from
// its opening until an event naming until (the caller's own agent, made to
// change by act after the stream opened), or only its opening when until
// is "".
func (e *env) streamLeak(t *testing.T, path, token string, act func(), until string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var got strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		got.WriteString(sc.Text() + "\n")
		if sc.Text() == ": stream open" {
			break
		}
	}
	if until == "" {
		return resp.StatusCode, []byte(got.String())
	}
	act()
	for sc.Scan() {
		got.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "data: ") && strings.Contains(sc.Text(), `"`+until+`"`) {
			return resp.StatusCode, []byte(got.String())
		}
	}
	t.Fatalf("the stream ended before the caller's own event: %v\n%s", sc.Err(), got.String())
	return 0, nil
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
