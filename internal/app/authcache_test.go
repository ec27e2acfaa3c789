package app_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// agentReads counts the agent reads by ref that reach the store, besides
// lookupCounter's lookups by hash.
type agentReads struct {
	lookupCounter
	agents atomic.Int64
}

func (c *agentReads) GetAgent(ctx context.Context, ref store.AgentRef) (domain.Agent, error) {
	c.agents.Add(1)
	return c.Store.GetAgent(ctx, ref)
}

// reason is the Reason of err's domain.Error ("" when it has none).
func reason(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return de.Reason
	}
	return ""
}

// code is the Code of err's domain.Error ("" when it has none).
func code(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return string(de.Code)
	}
	return ""
}

// TestPersonTokenCache (design: Credential cache): a personal token is
// looked up in the store once per CredentialCacheTTL; revoking it,
// deactivating its person or changing the person's role takes hold at once
// on the instance that did it; done on another instance whose signal never
// arrives, within the TTL.
func TestPersonTokenCache(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clock := clockwork.NewFakeClock()
	counted := &lookupCounter{Store: st}
	here := app.New(app.Options{Store: counted, Clock: clock})
	other := app.New(app.Options{Store: st, Clock: clock}) // no bus between them

	adminToken, _, err := here.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := here.AuthenticatePerson(ctx, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	bob, err := here.CreatePerson(ctx, admin, app.PersonInput{Name: "bob", Role: domain.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	counted.n.Store(0)
	for range 3 {
		p, err := here.AuthenticatePerson(ctx, bob.Token.Token)
		if err != nil || !p.Admin || p.TokenID != bob.Token.ID {
			t.Fatalf("bob: %+v, %v", p, err)
		}
	}
	if n := counted.n.Load(); n != 1 {
		t.Fatalf("three authentications: %d store lookups, want 1", n)
	}

	// A role change here: at once.
	member := domain.RoleMember
	if _, err := here.UpdatePerson(ctx, admin, bob.Person.ID, app.PersonUpdate{Role: &member}); err != nil {
		t.Fatal(err)
	}
	if p, err := here.AuthenticatePerson(ctx, bob.Token.Token); err != nil || p.Admin {
		t.Fatalf("bob after the role change here: admin=%v, %v; want a member", p.Admin, err)
	}

	// used mints a token of the admin's and authenticates with it here,
	// so that its lookup is cached.
	used := func(name string) app.MintedToken {
		t.Helper()
		tok, err := here.CreateToken(ctx, admin, app.TokenInput{Name: name})
		if err == nil {
			_, err = here.AuthenticatePerson(ctx, tok.Token)
		}
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	// Revoked here: at once.
	tok := used("t1")
	if _, err := here.RevokeToken(ctx, admin, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := here.AuthenticatePerson(ctx, tok.Token); reason(err) != "token_revoked" {
		t.Fatalf("token revoked here: %v, want token_revoked at once", err)
	}

	// Revoked on the other instance, no signal: refused once the cached
	// lookup is older than the TTL.
	tok2 := used("t2")
	if _, err := other.RevokeToken(ctx, admin, tok2.ID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(app.CredentialCacheTTL)
	if _, err := here.AuthenticatePerson(ctx, tok2.Token); reason(err) != "token_revoked" {
		t.Fatalf("token revoked elsewhere, after the TTL: %v, want token_revoked", err)
	}

	// Deactivated here: at once.
	if _, err := here.AuthenticatePerson(ctx, bob.Token.Token); err != nil {
		t.Fatal(err)
	}
	off := false
	if _, err := here.UpdatePerson(ctx, admin, bob.Person.ID, app.PersonUpdate{Active: &off}); err != nil {
		t.Fatal(err)
	}
	if _, err := here.AuthenticatePerson(ctx, bob.Token.Token); reason(err) != "person_deactivated" {
		t.Fatalf("bob deactivated here: %v, want person_deactivated at once", err)
	}
}

// TestPushTargetCache (design: Credential cache): pushes to one agent do
// not read it from the store again within CredentialCacheTTL; revoking it or handing it
// over takes hold at once on the instance that did it, and within the TTL
// on one whose signal never arrives.
func TestPushTargetCache(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clock := clockwork.NewFakeClock()
	counted := &agentReads{lookupCounter: lookupCounter{Store: st}}
	here := app.New(app.Options{Store: counted, Clock: clock})
	other := app.New(app.Options{Store: st, Clock: clock}) // no bus between them
	admin := bootstrapAdmin(t, here)
	bob, err := here.CreatePerson(ctx, admin, app.PersonInput{Name: "bob", Role: domain.RoleMember})
	if err != nil {
		t.Fatal(err)
	}
	vendAgent(t, here, admin, app.VendInput{Handle: "ada", Queues: []string{"q"}})
	vendAgent(t, here, admin, app.VendInput{Handle: "eve", Queues: []string{"q"}})
	push := func(s *app.Service, by domain.Person, ref string) error {
		_, _, err := s.PushTodo(ctx, by, ref, app.PushInput{Queue: "q", Title: "t"})
		return err
	}

	if err := push(here, admin, "ada"); err != nil {
		t.Fatal(err)
	}
	counted.agents.Store(0)
	for range 3 {
		if err := push(here, admin, "ada"); err != nil {
			t.Fatal(err)
		}
	}
	if n := counted.agents.Load(); n != 0 {
		t.Fatalf("three more pushes within the TTL: %d agent reads, want 0", n)
	}
	if err := push(here, bob.Person, "ada"); code(err) != string(domain.CodeNotFound) {
		t.Fatalf("bob pushes to the admin's cached agent: %v, want not_found", err)
	}

	// Handed over here: the old owner is refused at once, the new one served.
	bobID := bob.Person.ID
	if _, err := here.UpdateAgent(ctx, admin, "ada", app.UpdateInput{Owner: &bobID}); err != nil {
		t.Fatal(err)
	}
	if err := push(here, admin, "ada"); code(err) != string(domain.CodeNotFound) {
		t.Fatalf("the old owner pushes after the hand-over here: %v, want not_found at once", err)
	}
	if err := push(here, bob.Person, "ada"); err != nil {
		t.Fatalf("the new owner pushes: %v", err)
	}

	// Revoked here: refused at once.
	if err := push(here, admin, "eve"); err != nil {
		t.Fatal(err)
	}
	if _, err := here.RevokeAgent(ctx, admin, "eve"); err != nil {
		t.Fatal(err)
	}
	if err := push(here, admin, "eve"); code(err) != string(domain.CodeConflict) {
		t.Fatalf("push to an agent revoked here: %v, want conflict at once", err)
	}

	// Revoked on the other instance, no signal: refused once the cached
	// lookup is older than the TTL.
	if err := push(here, bob.Person, "ada"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.RevokeAgent(ctx, bob.Person, "ada"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(app.CredentialCacheTTL)
	if err := push(here, bob.Person, "ada"); code(err) != string(domain.CodeConflict) {
		t.Fatalf("push to an agent revoked elsewhere, after the TTL: %v, want conflict", err)
	}
}
