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
