package httpapi_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
	"github.com/rollcall/rollcall/internal/store"
)

// Persons, roles, tokens, hand-over and revocation of streams (design: Persons and
// roles, Personal tokens, Revocation within 5 s, Console sessions, Owner only),
// on the real stack.

func TestPersonsAndRoles(t *testing.T) {
	e := newEnv(t)
	var res app.PersonCreated
	e.do(t, "POST", "/v1/persons", e.admin, map[string]any{"name": "carol", "role": "member"}).want(t, 201, &res)
	if res.Person.Role != domain.RoleMember || !res.Person.Active || !strings.HasPrefix(res.Token.Token, app.PersonTokenPrefix) {
		t.Fatalf("created %+v", res)
	}
	carol := res.Token.Token
	e.do(t, "GET", "/v1/tokens", carol, nil).want(t, 200, nil) // the first token works

	// A member cannot manage persons.
	p := e.do(t, "POST", "/v1/persons", carol, map[string]any{"name": "x"})
	if pr := p.problem(t); p.status != 403 || pr.Reason != "admin_required" {
		t.Fatalf("member creates a person: %d %+v", p.status, pr)
	}
	e.do(t, "GET", "/v1/persons", carol, nil).want(t, 403, nil)
	// ... but reads itself, also as "me" (how a member learns its id).
	var me domain.Person
	e.do(t, "GET", "/v1/persons/me", carol, nil).want(t, 200, &me)
	if me.ID != res.Person.ID || me.Name != "carol" {
		t.Fatalf("GET /v1/persons/me as carol: %+v, want %s", me, res.Person.ID)
	}
	e.do(t, "GET", "/v1/persons/"+res.Person.ID, carol, nil).want(t, 200, nil)
	e.do(t, "POST", "/v1/persons", e.admin, map[string]any{"name": "x", "role": "boss"}).want(t, 400, nil)
	e.do(t, "POST", "/v1/persons", e.admin, map[string]any{"name": ""}).want(t, 400, nil)

	var list struct{ Items []domain.Person }
	e.do(t, "GET", "/v1/persons", e.admin, nil).want(t, 200, &list)
	if len(list.Items) != 3 || list.Items[0].Role != domain.RoleAdmin {
		t.Fatalf("persons %+v", list.Items)
	}
	admin := list.Items[0]

	// The last active admin cannot be demoted, and nobody deactivates
	// themself (the last admin included: the same clear refusal).
	r0 := e.do(t, "PATCH", "/v1/persons/"+admin.ID, e.admin, map[string]any{"role": "member"})
	if pr := r0.problem(t); r0.status != 409 || pr.Reason != "last_admin" || !strings.Contains(pr.Detail, "last active admin") {
		t.Fatalf("demoting the last admin: %d %+v", r0.status, pr)
	}
	r0 = e.do(t, "PATCH", "/v1/persons/"+admin.ID, e.admin, map[string]any{"active": false})
	if pr := r0.problem(t); r0.status != 403 || pr.Reason != "deactivate_self" || pr.Detail != "you cannot deactivate yourself; another admin can" {
		t.Fatalf("the last admin deactivates themself: %d %+v", r0.status, pr)
	}
	// A second admin cannot deactivate themself either, but the first can.
	var dora app.PersonCreated
	e.do(t, "POST", "/v1/persons", e.admin, map[string]any{"name": "dora", "role": "admin"}).want(t, 201, &dora)
	r0 = e.do(t, "PATCH", "/v1/persons/"+dora.Person.ID, dora.Token.Token, map[string]any{"active": false})
	if pr := r0.problem(t); r0.status != 403 || pr.Reason != "deactivate_self" {
		t.Fatalf("an admin deactivates themself: %d %+v", r0.status, pr)
	}
	e.do(t, "PATCH", "/v1/persons/"+dora.Person.ID, e.admin, map[string]any{"active": false}).want(t, 200, nil)

	// Carol's agent keeps working after she is deactivated; her token and
	// her console-less streams stop.
	ag := e.vend(t, carol, app.VendInput{Handle: "carols", Queues: []string{"q"}})
	stream := e.events(t, carol, "").opened()
	var off domain.Person
	e.do(t, "PATCH", "/v1/persons/"+res.Person.ID, e.admin, map[string]any{"active": false}).want(t, 200, &off)
	if off.Active || off.DeactivatedAt == nil {
		t.Fatalf("deactivated %+v", off)
	}
	r := e.do(t, "GET", "/v1/agents", carol, nil)
	if pr := r.problem(t); r.status != 401 || pr.Reason != "person_deactivated" {
		t.Fatalf("deactivated person's token: %d %+v", r.status, pr)
	}
	for stream.sc.Scan() { // the stream ends (bus signal on this instance)
	}
	e.beat(t, ag.Credential, "carols", `{"state":"online"}`).want(t, 200, nil)

	// The admin hands the agent to bob; bob now sees it, carol's agent list
	// is gone with her, and the hand-over is audited.
	bobP, _ := e.Service.AuthenticatePerson(t.Context(), e.bob)
	var carols struct{ Items []domain.Agent }
	e.do(t, "GET", "/v1/agents?owner="+res.Person.ID, e.admin, nil).want(t, 200, &carols)
	if len(carols.Items) != 1 || carols.Items[0].Handle != "carols" {
		t.Fatalf("the admin lists carol's agents: %+v", carols.Items)
	}
	e.do(t, "GET", "/v1/agents?owner="+res.Person.ID, e.bob, nil).want(t, 403, nil)
	e.do(t, "GET", "/v1/agents?owner="+bobP.ID, e.bob, nil).want(t, 200, nil)
	e.do(t, "GET", "/v1/agents/carols", e.bob, nil).want(t, 404, nil)
	e.do(t, "PATCH", "/v1/agents/carols", e.admin, map[string]any{"owner": "nobody"}).want(t, 400, nil)
	e.do(t, "PATCH", "/v1/agents/carols", e.admin, map[string]any{"owner": res.Person.ID}).want(t, 400, nil) // deactivated
	e.do(t, "PATCH", "/v1/agents/carols", e.admin, map[string]any{"owner": bobP.ID, "name": "x"}).want(t, 400, nil)
	var handed domain.Agent
	e.do(t, "PATCH", "/v1/agents/carols", e.admin, map[string]any{"owner": bobP.ID}).want(t, 200, &handed)
	if handed.OwnerID != bobP.ID {
		t.Fatalf("handed over: %+v", handed)
	}
	e.do(t, "GET", "/v1/agents/carols", e.bob, nil).want(t, 200, nil)
	// Its events now reach bob's stream.
	bobStream := e.events(t, e.bob, "").opened()
	e.beat(t, ag.Credential, "carols", `{"state":"online","billing_mode":"api"}`).want(t, 200, nil)
	if ev := bobStream.next(); !strings.Contains(ev.data, `"carols"`) || !strings.Contains(ev.data, `"api"`) {
		t.Fatalf("bob's stream after the hand-over: %+v", ev)
	}
	r = e.do(t, "PATCH", "/v1/agents/carols", e.bob, map[string]any{"owner": admin.ID})
	if pr := r.problem(t); r.status != 403 || pr.Reason != "admin_required" {
		t.Fatalf("member hands its own agent over: %d %+v", r.status, pr)
	}
	// An admin renames itself as "me".
	var renamed domain.Person
	e.do(t, "PATCH", "/v1/persons/me", e.admin, map[string]any{"name": "root"}).want(t, 200, &renamed)
	if renamed.ID != admin.ID || renamed.Name != "root" {
		t.Errorf("PATCH /v1/persons/me as the admin = %+v, want %s renamed root", renamed, admin.ID)
	}
	seen := e.auditActions(t)
	for _, want := range []string{"person.create", "person.deactivate", "agent.hand_over"} {
		if seen[want] == 0 {
			t.Errorf("audit actions %v lack %s", seen, want)
		}
	}
}

func TestPersonalTokens(t *testing.T) {
	e := newEnv(t)
	exp := e.Clock.Now().Add(time.Hour)
	var m app.MintedToken
	e.do(t, "POST", "/v1/tokens", e.bob, map[string]any{"name": "ci", "expires_at": exp}).want(t, 201, &m)
	if m.ExpiresAt == nil || !m.ExpiresAt.Equal(exp) || m.Token == "" {
		t.Fatalf("minted %+v", m)
	}
	e.do(t, "POST", "/v1/tokens", e.bob, map[string]any{"name": "past", "expires_at": e.Clock.Now().Add(-time.Minute)}).want(t, 400, nil)
	e.do(t, "GET", "/v1/agents", m.Token, nil).want(t, 200, nil)
	r := e.do(t, "GET", "/v1/tokens", e.bob, nil)
	if strings.Contains(string(r.body), m.Token) || strings.Contains(string(r.body), `"token"`) {
		t.Fatalf("the list shows a secret: %s", r.body)
	}
	var list struct{ Items []domain.PersonToken }
	r.want(t, 200, &list)
	if len(list.Items) != 2 || list.Items[1].Name != "ci" || list.Items[1].LastUsedAt == nil {
		t.Fatalf("tokens %+v", list.Items)
	}

	// Another person cannot revoke it; expiry ends it.
	e.do(t, "DELETE", "/v1/tokens/"+m.ID, e.admin, nil).want(t, 404, nil)
	e.Clock.Advance(time.Hour)
	r = e.do(t, "GET", "/v1/agents", m.Token, nil)
	if pr := r.problem(t); r.status != 401 || pr.Reason != "token_expired" {
		t.Fatalf("expired token: %d %+v", r.status, pr)
	}

	// Revoked without any bus signal (in the store behind the hub's back,
	// as by an instance whose signal was lost): REST refuses the token once
	// its cached lookup is CredentialCacheTTL old (design: Credential
	// cache), and its event stream ends through the periodic re-check.
	var m2 app.MintedToken
	e.do(t, "POST", "/v1/tokens", e.bob, map[string]any{"name": "stream"}).want(t, 201, &m2)
	stream := e.events(t, m2.Token, "").opened()
	bob, _ := e.Service.AuthenticatePerson(t.Context(), e.bob)
	if _, err := e.Store.RevokeToken(t.Context(), store.RevokeTokenParams{PersonID: bob.ID, ID: m2.ID, Now: e.Clock.Now(),
		Audit: domain.AuditRecord{Actor: "system", Action: "token.revoke"}}); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(app.CredentialCacheTTL)
	e.do(t, "GET", "/v1/agents", m2.Token, nil).want(t, 401, nil)
	ended := make(chan struct{})
	go func() {
		for stream.sc.Scan() {
		}
		close(ended)
	}()
	deadline := time.After(30 * time.Second)
	for done := false; !done; {
		e.Clock.Advance(app.RecheckInterval)
		select {
		case <-ended:
			done = true
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatal("the revoked token's event stream did not end")
		}
	}
	e.do(t, "DELETE", "/v1/tokens/"+m2.ID, e.bob, nil).want(t, 404, nil) // already revoked
}

// TestNothingRevealedAboutOthers: bob's audit verify answer and event ids
// do not change with, or count, what admin's agents do (design: Operator event stream).
func TestNothingRevealedAboutOthers(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.bob, app.VendInput{Handle: "bobs", Queues: []string{"q"}})
	var before, after domain.AuditVerifyResult
	e.do(t, "GET", "/v1/audit/verify", e.bob, nil).want(t, 200, &before)
	a := e.vend(t, e.admin, app.VendInput{Handle: "admins", Queues: []string{"q"}})
	e.do(t, "PATCH", "/v1/agents/admins", e.admin, map[string]any{"name": "busy"}).want(t, 200, nil)
	e.do(t, "GET", "/v1/audit/verify", e.bob, nil).want(t, 200, &after)
	if before.Checked != 1 || after.Checked != before.Checked || !after.OK {
		t.Fatalf("bob's verify before %+v, after the admin's activity %+v; want 1 entry both times", before, after)
	}
	var whole domain.AuditVerifyResult
	e.do(t, "GET", "/v1/audit/verify", e.admin, nil).want(t, 200, &whole)
	if whole.Checked <= after.Checked {
		t.Fatalf("the admin's verify %+v sees no more than bob's %+v", whole, after)
	}

	stream := e.events(t, e.admin, "").opened()
	e.beat(t, a.Credential, "admins", `{"state":"online"}`).want(t, 200, nil)
	ev := stream.next()
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(ev.id) {
		t.Fatalf("event id %q is not 128 random bits in hex", ev.id)
	}
}

// TestChildTokenNeverOutlivesParent: a token minted with an expiring token
// gets the parent's expiry when it asks for none, and a later expiry is
// refused; a token without expiry mints as asked.
func TestChildTokenNeverOutlivesParent(t *testing.T) {
	e := newEnv(t)
	exp := e.Clock.Now().Add(time.Hour)
	var parent app.MintedToken
	e.do(t, "POST", "/v1/tokens", e.bob, map[string]any{"name": "parent", "expires_at": exp}).want(t, 201, &parent)

	var child app.MintedToken
	e.do(t, "POST", "/v1/tokens", parent.Token, map[string]any{"name": "child"}).want(t, 201, &child)
	if child.ExpiresAt == nil || !child.ExpiresAt.Equal(exp) {
		t.Fatalf("child without expires_at: expires %v, want the parent's %v", child.ExpiresAt, exp)
	}
	r := e.do(t, "POST", "/v1/tokens", parent.Token, map[string]any{"name": "later", "expires_at": exp.Add(time.Second)})
	if pr := r.problem(t); r.status != 400 || pr.Pointer != "/expires_at" || !strings.Contains(pr.Detail, "when the token of this request expires") {
		t.Fatalf("child expiring after its parent: %d %+v", r.status, pr)
	}
	var sooner app.MintedToken
	e.do(t, "POST", "/v1/tokens", parent.Token, map[string]any{"name": "sooner", "expires_at": exp.Add(-time.Minute)}).want(t, 201, &sooner)
	if !sooner.ExpiresAt.Equal(exp.Add(-time.Minute)) {
		t.Fatalf("sooner child expires %v", sooner.ExpiresAt)
	}
	// A grandchild is bound by the child, and everything ends with the parent.
	var grand app.MintedToken
	e.do(t, "POST", "/v1/tokens", sooner.Token, map[string]any{"name": "grand"}).want(t, 201, &grand)
	if !grand.ExpiresAt.Equal(exp.Add(-time.Minute)) {
		t.Fatalf("grandchild expires %v", grand.ExpiresAt)
	}
	e.Clock.Advance(time.Hour)
	e.do(t, "GET", "/v1/agents", child.Token, nil).want(t, 401, nil)

	// A token that never expires mints what it asks for.
	var free app.MintedToken
	e.do(t, "POST", "/v1/tokens", e.bob, map[string]any{"name": "free"}).want(t, 201, &free)
	if free.ExpiresAt != nil {
		t.Fatalf("child of a non-expiring token expires %v", free.ExpiresAt)
	}
}

// TestHandOverRules: an admin cannot hand another person's agent to
// themself; MCP lookups see the new owner at once (the credential cache is
// cleared); the agent's hooks get new, unshown secrets.
func TestHandOverRules(t *testing.T) {
	e := newEnv(t)
	admin, _ := e.Service.AuthenticatePerson(t.Context(), e.admin)
	bob, _ := e.Service.AuthenticatePerson(t.Context(), e.bob)
	ag := e.vend(t, e.bob, app.VendInput{Handle: "bobs", Queues: []string{"q"}})
	hk := e.createHook(t, e.bob, app.HookInput{Kind: "github", Agent: "bobs", Queue: "q"})
	ping := func(id string) response {
		h, body := intaketest.GitHub(t, "ping")
		h.Set("X-GitHub-Delivery", id)
		intaketest.SignGitHub(h, hk.Secret, body)
		return e.deliver(t, hk.URL, h, body)
	}
	ping("before").want(t, 200, nil)

	r := e.do(t, "PATCH", "/v1/agents/bobs", e.admin, map[string]any{"owner": admin.ID})
	if pr := r.problem(t); r.status != 403 || pr.Reason != "hand_over_to_self" {
		t.Fatalf("admin hands bob's agent to themself: %d %+v", r.status, pr)
	}
	e.do(t, "GET", "/v1/agents/bobs", e.bob, nil).want(t, 200, nil) // still bob's
	e.vend(t, e.admin, app.VendInput{Handle: "mine", Queues: []string{"q"}})
	e.do(t, "PATCH", "/v1/agents/mine", e.admin, map[string]any{"owner": admin.ID}).want(t, 200, nil) // already theirs: nothing changes

	// Hand bob's agent to carol: a cached MCP lookup made just before must
	// not keep the old owner.
	carol := e.AddPerson(t, "carol")
	carolP, _ := e.Service.AuthenticatePerson(t.Context(), carol)
	if p, err := e.Service.AuthenticateAgentCached(t.Context(), ag.Credential); err != nil || p.Agent.OwnerID != bob.ID {
		t.Fatalf("before: %+v %v", p.Agent, err)
	}
	e.do(t, "PATCH", "/v1/agents/bobs", e.admin, map[string]any{"owner": carolP.ID}).want(t, 200, nil)
	if p, err := e.Service.AuthenticateAgentCached(t.Context(), ag.Credential); err != nil || p.Agent.OwnerID != carolP.ID {
		t.Fatalf("the cached lookup after the hand-over has owner %q (%v), want carol %q", p.Agent.OwnerID, err, carolP.ID)
	}

	// The secret bob knew no longer signs; carol rotates to get one.
	if r := ping("after"); r.status != 401 {
		t.Fatalf("delivery signed with the pre-hand-over secret = %d %s", r.status, r.body)
	}
	var rot app.HookSecretResult
	e.do(t, "POST", "/v1/hooks/"+hk.Hook.ID+"/secret", carol, nil).want(t, 200, &rot)
	hk.Secret = rot.Secret
	ping("rotated").want(t, 200, nil)
	if n := e.auditActions(t)["hook.rotate_secret"]; n != 2 {
		t.Fatalf("hook.rotate_secret entries %d, want 2 (the hand-over's and carol's)", n)
	}
}
