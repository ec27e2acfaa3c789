package console_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/console"
)

// copyCookies returns the browser's cookies, as an attacker who copied them
// would send them.
func copyCookies(e *env, b *browser) []*http.Cookie {
	u, _ := url.Parse(e.url)
	return b.c.Jar.Cookies(u)
}

// openWith requests the fleet page with the cookies on a console instance
// (h, or this env's server when h is nil) and returns the status.
func openWith(t *testing.T, e *env, h http.Handler, cookies []*http.Cookie) int {
	t.Helper()
	req := httptest.NewRequest("GET", "/console/", nil)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// TestSignOutEndsTheSessionEverywhere: a copied cookie stops working after
// sign-out, on this instance and on another one with the same key
// (design: Console sessions); revoking the token or deactivating the person
// ends sessions too.
func TestSignOutEndsTheSessionEverywhere(t *testing.T) {
	key := []byte("a shared secret of enough length for the test")
	e := newEnv(t, console.Options{SessionKey: key})
	other, err := console.New(e.Service, console.Options{SessionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signIn(e.AdminToken)
	copied := copyCookies(e, b)
	if code := openWith(t, e, other, copied); code != http.StatusOK {
		t.Fatalf("the other instance before sign-out: %d", code)
	}
	resp, body := b.post("/console/signout", nil)
	wantStatus(t, resp, body, http.StatusSeeOther)
	if code := openWith(t, e, other, copied); code != http.StatusSeeOther {
		t.Fatalf("a copied cookie after sign-out opens the fleet on another instance: %d", code)
	}

	// A member signed in with a second token: revoking that token ends it.
	bobTok := e.AddPerson(t, "bob")
	bob, _ := e.Service.AuthenticatePerson(t.Context(), bobTok)
	m, err := e.Service.CreateToken(t.Context(), bob, app.TokenInput{Name: "browser"})
	if err != nil {
		t.Fatal(err)
	}
	bb := e.browser(t)
	bb.signIn(m.Token)
	if _, err := e.Service.RevokeToken(t.Context(), bob, m.ID); err != nil {
		t.Fatal(err)
	}
	if code := openWith(t, e, other, copyCookies(e, bb)); code != http.StatusSeeOther {
		t.Fatalf("a session of a revoked token: %d", code)
	}

	// Deactivation ends the sessions of every token of the person.
	bb.signIn(bobTok)
	root := admin(t, e)
	off := false
	if _, err := e.Service.UpdatePerson(t.Context(), root, bob.ID, app.PersonUpdate{Active: &off}); err != nil {
		t.Fatal(err)
	}
	if code := openWith(t, e, other, copyCookies(e, bb)); code != http.StatusSeeOther {
		t.Fatalf("a session of a deactivated person: %d", code)
	}
}

var secretRE = regexp.MustCompile(`value="(rcp_[A-Za-z0-9_-]+)"`)

// TestTokensAndPeoplePages: everyone manages its tokens; only admins see
// People, where a new person's token is shown once.
func TestTokensAndPeoplePages(t *testing.T) {
	e := newEnv(t, console.Options{})
	b := e.browser(t)
	b.signIn(e.AdminToken)
	resp, body := b.get("/console/tokens")
	wantStatus(t, resp, body, http.StatusOK)
	wantContains(t, body, "bootstrap", "this session", "Create a token")
	resp, body = b.post("/console/tokens", url.Values{"name": {"laptop"}, "days": {"30"}})
	wantStatus(t, resp, body, http.StatusCreated)
	m := secretRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no token shown:\n%s", body)
	}
	if _, err := e.Service.AuthenticatePerson(t.Context(), m[1]); err != nil {
		t.Fatalf("the shown token does not work: %v", err)
	}
	_, body = b.get("/console/tokens")
	wantContains(t, body, "laptop")
	if secretRE.MatchString(body) {
		t.Fatal("the tokens page shows a secret again")
	}
	resp, body = b.post("/console/tokens", url.Values{"name": {""}})
	wantStatus(t, resp, body, http.StatusUnprocessableEntity)

	resp, body = b.get("/console/people")
	wantStatus(t, resp, body, http.StatusOK)
	resp, body = b.post("/console/people", url.Values{"name": {"carol"}, "role": {"member"}})
	wantStatus(t, resp, body, http.StatusCreated)
	m = secretRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no first token shown:\n%s", body)
	}
	carol, err := e.Service.AuthenticatePerson(t.Context(), m[1])
	if err != nil || carol.Admin {
		t.Fatalf("carol: %+v %v", carol, err)
	}
	root := admin(t, e)
	resp, body = b.post("/console/people/"+root.ID, url.Values{"role": {"member"}})
	wantStatus(t, resp, body, http.StatusConflict)
	wantContains(t, body, "last active admin")
	resp, body = b.post("/console/people/"+carol.ID, url.Values{"active": {"false"}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if _, err := e.Service.AuthenticatePerson(t.Context(), m[1]); err == nil {
		t.Fatal("a deactivated person's token still works")
	}

	// No Deactivate button on "you", and deactivating oneself is refused.
	_, body = b.get("/console/people")
	if strings.Contains(body, `Deactivate<span class="visually-hidden"> `+root.Name+`</span>`) {
		t.Fatalf("the people page offers to deactivate the signed-in admin:\n%s", body)
	}
	resp, body = b.post("/console/people/"+root.ID, url.Values{"active": {"false"}})
	wantStatus(t, resp, body, http.StatusForbidden)
	wantContains(t, body, "you cannot deactivate yourself")

	// Hand carol's agent to dave; not to the admin themself.
	dave := e.AddPerson(t, "dave")
	daveP, _ := e.Service.AuthenticatePerson(t.Context(), dave)
	vend(t, e, carol, "carols")
	_, body = b.get("/console/people")
	wantContains(t, body, "agents: carols", `Deactivate<span class="visually-hidden"> dave</span>`)
	resp, body = b.post("/console/handover", url.Values{"agent": {"carols"}, "owner": {root.ID}})
	wantStatus(t, resp, body, http.StatusForbidden)
	resp, body = b.post("/console/handover", url.Values{"agent": {"carols"}, "owner": {daveP.ID}})
	wantStatus(t, resp, body, http.StatusSeeOther)
	if a, err := e.Service.OwnedAgent(t.Context(), daveP, "carols"); err != nil || a.OwnerID != daveP.ID {
		t.Fatalf("after the hand-over: %+v %v", a, err)
	}
	resp, body = b.post("/console/handover", url.Values{"agent": {"nobody"}, "owner": {root.ID}})
	wantStatus(t, resp, body, http.StatusNotFound)

	// A member has Tokens but no People.
	db := e.browser(t)
	db.signIn(dave)
	resp, body = db.get("/console/people")
	wantStatus(t, resp, body, http.StatusForbidden)
	_, body = db.get("/console/")
	if regexp.MustCompile(`href="/console/people"`).MatchString(body) {
		t.Fatal("a member's page links to People")
	}
	wantContains(t, body, `href="/console/tokens"`)
}
