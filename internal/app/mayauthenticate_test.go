package app_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// lookupCounter counts the credential lookups and probes by hash that reach
// the store.
type lookupCounter struct {
	store.Store
	n atomic.Int64
}

func (c *lookupCounter) CredentialMayAuthenticate(ctx context.Context, h string) (bool, error) {
	c.n.Add(1)
	return c.Store.CredentialMayAuthenticate(ctx, h)
}

func (c *lookupCounter) TokenMayAuthenticate(ctx context.Context, h string, now time.Time) (bool, error) {
	c.n.Add(1)
	return c.Store.TokenMayAuthenticate(ctx, h, now)
}

func (c *lookupCounter) AgentByCredentialHash(ctx context.Context, h string) (domain.Agent, string, error) {
	c.n.Add(1)
	return c.Store.AgentByCredentialHash(ctx, h)
}

func (c *lookupCounter) TokenByHash(ctx context.Context, h string) (domain.Person, domain.PersonToken, error) {
	c.n.Add(1)
	return c.Store.TokenByHash(ctx, h)
}

// MayAuthenticate, the edge's check past the failed-auth limit (design: The
// failed-auth limit): a token it has seen within CredentialCacheTTL costs no
// store lookup, an unknown one at most one; a credential created on another
// instance (its own service on the same store, no bus between them)
// verifies at once although this instance has just remembered unknown
// hashes; a revoked token or agent is a no once its remembered yes expires,
// and that no is remembered too; a deactivated person's token is a no, and
// a yes again once the person is reactivated and the no has expired.
func TestMayAuthenticate(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clock := clockwork.NewFakeClock()
	other := app.New(app.Options{Store: st, Clock: clock})
	counted := &lookupCounter{Store: st}
	here := app.New(app.Options{Store: counted, Clock: clock})

	adminToken, created, err := other.Bootstrap(ctx, "")
	if err != nil || !created {
		t.Fatalf("bootstrap: %v %v", created, err)
	}
	admin, err := other.AuthenticatePerson(ctx, adminToken)
	if err != nil {
		t.Fatal(err)
	}

	// lookups reports the store lookups since the last call.
	var seen int64
	lookups := func() int64 {
		n := counted.n.Load()
		d := n - seen
		seen = n
		return d
	}
	check := func(what, token string, want bool, wantLookups int64) {
		t.Helper()
		if got := here.MayAuthenticate(ctx, token); got != want {
			t.Errorf("%s: MayAuthenticate = %v, want %v", what, got, want)
		}
		if n := lookups(); n != wantLookups {
			t.Errorf("%s: %d store lookups, want %d", what, n, wantLookups)
		}
	}

	check("not a Rollcall token", "Basic-abc", false, 0)
	check("unknown person token", "rcp_unknown-secretsecretsecret", false, 1)
	check("unknown person token again", "rcp_unknown-secretsecretsecret", false, 0)
	check("unknown person token a third time", "rcp_unknown-secretsecretsecret", false, 0)
	check("unknown agent credential", "rca_unknown-secretsecretsecret", false, 1)
	check("unknown agent credential again", "rca_unknown-secretsecretsecret", false, 0)

	// Created on the other instance after this one remembered unknown
	// hashes: they verify at once, then from memory.
	v, err := other.Vend(ctx, admin, app.VendInput{Handle: "fresh", Queues: []string{"q1"}, Verbs: domain.ScopeVerbs})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := other.CreateToken(ctx, admin, app.TokenInput{Name: "fresh"})
	if err != nil {
		t.Fatal(err)
	}
	check("agent credential vended elsewhere", v.Credential, true, 1)
	check("agent credential again", v.Credential, true, 0)
	check("person token created elsewhere", tok.Token, true, 1)
	check("person token again", tok.Token, true, 0)
	// The probe filled no cache: the MCP path looks the credential up once
	// and fills the credential cache, which answers from then on.
	if _, err := here.AuthenticateAgentCached(ctx, v.Credential); err != nil {
		t.Fatalf("cached agent credential: %v", err)
	}
	if n := lookups(); n != 1 {
		t.Errorf("the MCP path's first authentication: %d lookups, want 1", n)
	}
	if _, err := here.AuthenticateAgentCached(ctx, v.Credential); err != nil {
		t.Fatalf("cached agent credential: %v", err)
	}
	check("agent credential in the credential cache", v.Credential, true, 0)

	// Revoked elsewhere (no signal reaches this instance): a no once what
	// was remembered is older than CredentialCacheTTL.
	if _, err := other.RevokeToken(ctx, admin, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := other.RevokeAgent(ctx, admin, v.Agent.ID); err != nil {
		t.Fatal(err)
	}
	clock.Advance(app.CredentialCacheTTL)
	check("revoked person token", tok.Token, false, 1)
	check("revoked agent credential", v.Credential, false, 1)
	check("unknown person token after the TTL", "rcp_unknown-secretsecretsecret", false, 1)
	check("the admin token", adminToken, true, 1)
	check("revoked person token again", tok.Token, false, 0)
	check("revoked agent credential again", v.Credential, false, 0)

	// A deactivated person's token: a no; reactivated, a yes once the
	// remembered no is older than the TTL.
	bob, err := other.CreatePerson(ctx, admin, app.PersonInput{Name: "bob", Role: domain.RoleMember})
	if err != nil {
		t.Fatal(err)
	}
	off, on := false, true
	if _, err := other.UpdatePerson(ctx, admin, bob.Person.ID, app.PersonUpdate{Active: &off}); err != nil {
		t.Fatal(err)
	}
	check("deactivated person's token", bob.Token.Token, false, 1)
	if _, err := other.UpdatePerson(ctx, admin, bob.Person.ID, app.PersonUpdate{Active: &on}); err != nil {
		t.Fatal(err)
	}
	check("reactivated person's token within the TTL", bob.Token.Token, false, 0)
	clock.Advance(app.CredentialCacheTTL)
	check("reactivated person's token after the TTL", bob.Token.Token, true, 1)
}
