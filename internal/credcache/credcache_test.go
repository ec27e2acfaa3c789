package credcache

import (
	"errors"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

func principal(id string) domain.Principal {
	return domain.Principal{Agent: &domain.Agent{ID: id, Handle: "h-" + id}, CredentialID: "c-" + id}
}

// TestTTLAndForget: a lookup is served for the TTL only, as a copy, and
// ForgetAgent drops every lookup of that agent alone.
func TestTTLAndForget(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	c := New(2 * time.Second)
	c.Put("h1", principal("a"), t0)
	c.Put("h2", principal("a"), t0)
	c.Put("h3", principal("b"), t0)
	p, ok := c.Get("h1", t0.Add(1999*time.Millisecond))
	if !ok || p.Agent.ID != "a" || p.CredentialID != "c-a" {
		t.Fatalf("Get within the TTL = %+v, %v", p, ok)
	}
	p.Agent.Handle = "changed"
	if q, _ := c.Get("h1", t0); q.Agent.Handle != "h-a" {
		t.Fatalf("a caller's change reached the cache: %q", q.Agent.Handle)
	}
	if _, ok := c.Get("h1", t0.Add(2*time.Second)); ok {
		t.Fatal("served at the TTL")
	}
	if _, ok := c.Get("h1", t0.Add(-time.Second)); ok {
		t.Fatal("served before it was put (clock stepped back)")
	}
	c.ForgetAgent("a")
	if _, ok := c.Get("h2", t0); ok {
		t.Fatal("ForgetAgent left a lookup of the agent")
	}
	if _, ok := c.Get("h3", t0); !ok {
		t.Fatal("ForgetAgent dropped another agent's lookup")
	}
	c.Drop("h3")
	if _, ok := c.Get("h3", t0); ok {
		t.Fatal("Drop left the lookup")
	}
}

// TestBounded: past maxEntries the expired lookups go first; a fresh one
// put then is kept.
func TestBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	c := New(time.Second)
	for i := range maxEntries {
		c.Put(string(rune(0x1000+i)), principal("a"), t0)
	}
	c.Put("fresh", principal("b"), t0.Add(2*time.Second))
	if len(c.m.m) != 1 {
		t.Fatalf("%d entries after the prune, want 1", len(c.m.m))
	}
	if _, ok := c.Get("fresh", t0.Add(2*time.Second)); !ok {
		t.Fatal("the fresh lookup was not kept")
	}
}

// TestVerdicts: a verdict is served for the TTL only, yes and no alike.
func TestVerdicts(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	v := NewVerdicts(2 * time.Second)
	if _, seen := v.Get("h", t0); seen {
		t.Fatal("an empty set saw a verdict")
	}
	v.Put("yes", true, t0)
	v.Put("no", false, t0)
	if ok, seen := v.Get("yes", t0.Add(time.Second)); !ok || !seen {
		t.Fatalf("yes = %v, %v", ok, seen)
	}
	if ok, seen := v.Get("no", t0.Add(time.Second)); ok || !seen {
		t.Fatalf("no = %v, %v", ok, seen)
	}
	if _, seen := v.Get("yes", t0.Add(2*time.Second)); seen {
		t.Fatal("served at the TTL")
	}
}

// TestDecide: an unknown hash is remembered as no, a kept yes as yes, an
// unkept yes and a refusal are asked again, and a store error answers yes
// without being remembered.
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	v := NewVerdicts(2 * time.Second)
	calls := 0
	ask := func(hash string, ok, keep bool, err error) bool {
		return v.Decide(hash, t0, func() (bool, bool, error) { calls++; return ok, keep, err })
	}
	if ask("unknown", false, false, domain.ErrNotFound) || ask("unknown", true, true, nil) {
		t.Fatal("an unknown hash was not refused, or its no not remembered")
	}
	if !ask("kept", true, true, nil) || !ask("kept", false, false, nil) {
		t.Fatal("a kept yes was not remembered")
	}
	if !ask("unkept", true, false, nil) || ask("unkept", false, false, nil) {
		t.Fatal("an unkept yes was remembered")
	}
	if !ask("down", false, false, errors.New("store down")) || ask("down", false, false, domain.ErrNotFound) {
		t.Fatal("a store error did not answer yes, or was remembered")
	}
	if calls != 6 {
		t.Fatalf("%d lookups, want 6 (each remembered verdict saves one)", calls)
	}
}

// TestForgetRacesALookup: a lookup begun before a forget is not cached
// (its row may predate the revocation the forget announces); one begun
// after is.
func TestForgetRacesALookup(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	c := New(2 * time.Second)
	gen := c.Gen()
	c.ForgetAgent("a") // a revocation lands while the lookup runs
	c.PutAt("h1", principal("a"), t0, gen)
	if _, ok := c.Get("h1", t0); ok {
		t.Fatal("a lookup begun before the forget was cached")
	}
	c.PutAt("h1", principal("a"), t0, c.Gen())
	if _, ok := c.Get("h1", t0); !ok {
		t.Fatal("a lookup begun after the forget was not cached")
	}
}

// TestTokensForget (the TTL is ttlMap's, tested above): ForgetToken
// drops that token's, ForgetPerson every token of the person, and a
// lookup that raced either is not cached.
func TestTokensForget(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	c := NewTokens(2 * time.Second)
	pt := func(person, token string) PersonToken {
		return PersonToken{Person: domain.Person{ID: person}, Token: domain.PersonToken{ID: token, PersonID: person}}
	}
	c.PutAt("h1", pt("p", "t1"), t0, c.Gen())
	c.PutAt("h2", pt("p", "t2"), t0, c.Gen())
	c.PutAt("h3", pt("q", "t3"), t0, c.Gen())
	if v, ok := c.Get("h1", t0); !ok || v.Token.ID != "t1" {
		t.Fatalf("Get = %+v, %v", v, ok)
	}
	c.ForgetToken("t1")
	served(t, c.Get, "h1", t0, false, "ForgetToken left the token's lookup")
	served(t, c.Get, "h2", t0, true, "ForgetToken dropped another token's lookup")
	gen := c.Gen()
	c.ForgetPerson("p")
	served(t, c.Get, "h2", t0, false, "ForgetPerson left a token of the person")
	served(t, c.Get, "h3", t0, true, "ForgetPerson dropped another person's token")
	c.PutAt("h2", pt("p", "t2"), t0, gen)
	served(t, c.Get, "h2", t0, false, "a lookup begun before ForgetPerson was cached")
	c.Drop("h3")
	served(t, c.Get, "h3", t0, false, "Drop left the lookup")
}

// TestAgentsForget: refs of one agent are dropped together by
// ForgetAgent; another agent's stay.
func TestAgentsForget(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	c := NewAgents(2 * time.Second)
	c.PutAt("ada", domain.Agent{ID: "a", Handle: "ada"}, t0, c.Gen())
	c.PutAt("a", domain.Agent{ID: "a", Handle: "ada"}, t0, c.Gen())
	c.PutAt("eve", domain.Agent{ID: "e", Handle: "eve"}, t0, c.Gen())
	gen := c.Gen()
	c.ForgetAgent("a")
	served(t, c.Get, "ada", t0, false, "ForgetAgent left the handle")
	served(t, c.Get, "a", t0, false, "ForgetAgent left the id")
	if a, ok := c.Get("eve", t0); !ok || a.ID != "e" {
		t.Fatalf("another agent's ref: %+v, %v", a, ok)
	}
	c.PutAt("ada", domain.Agent{ID: "a"}, t0, gen)
	served(t, c.Get, "ada", t0, false, "a lookup begun before ForgetAgent was cached")
}

// served fails t with why unless get serves k at now exactly when want.
func served[V any](t *testing.T, get func(string, time.Time) (V, bool), k string, now time.Time, want bool, why string) {
	t.Helper()
	if _, ok := get(k, now); ok != want {
		t.Fatal(why)
	}
}
