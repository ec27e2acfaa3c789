package app_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// lookupCounter counts the credential lookups by hash that reach the store.
type lookupCounter struct {
	store.Store
	n atomic.Int64
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
// hashes; a revoked token or agent is a no once its remembered yes expires.
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
	// The agent's lookup filled the credential cache the MCP path reads.
	if _, err := here.AuthenticateAgentCached(ctx, v.Credential); err != nil {
		t.Fatalf("cached agent credential: %v", err)
	}
	if n := lookups(); n != 0 {
		t.Errorf("the MCP path looked the credential up again: %d lookups", n)
	}

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
}
