package storetest

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// oauthTests are the contract of store.OAuthStore (design: Authorization
// server state).
var oauthTests = []contractTest{
	{"OAuth/ClientsBoundedAndExpiring", testOAuthClients},
	{"OAuth/RequestCodeOnce", testOAuthRequestCode},
	{"OAuth/ConcurrentRedemptionOnce", testOAuthConcurrentRedemption},
	{"OAuth/TokensRotateAndRevoke", testOAuthTokens},
}

func oauthClient(t *testing.T, s store.Store, max int, created time.Time) (store.OAuthClient, bool) {
	t.Helper()
	exp := created.Add(time.Hour)
	c := store.OAuthClient{ID: "rcc_" + uuid.NewString(), Name: "c", RedirectURIs: []string{"http://127.0.0.1/cb"}, CreatedAt: created, ExpiresAt: &exp}
	ok, err := s.CreateOAuthClient(t.Context(), c, max, created)
	must(t, "CreateOAuthClient", err)
	return c, ok
}

func testOAuthClients(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a, ok := oauthClient(t, s, 2, at(0))
	_, ok2 := oauthClient(t, s, 2, at(0))
	if _, ok3 := oauthClient(t, s, 2, at(0)); !ok || !ok2 || ok3 {
		t.Fatalf("registrations under a bound of 2: %v %v %v, want true true false", ok, ok2, ok3)
	}
	got, err := s.OAuthClient(ctx, a.ID, at(time.Minute))
	must(t, "OAuthClient", err)
	diff(t, "client", []string{"http://127.0.0.1/cb"}, got.RedirectURIs)
	_, err = s.OAuthClient(ctx, a.ID, at(2*time.Hour))
	wantErr(t, "expired unused client", err, domain.ErrNotFound)
	// Expired registrations free their place.
	if _, ok := oauthClient(t, s, 2, at(2*time.Hour)); !ok {
		t.Fatal("a registration after the others expired was refused")
	}
	// A metadata-document client is refreshed in place, over the bound too.
	exp := at(3 * time.Hour)
	doc := store.OAuthClient{ID: "https://c.example/client.json", Name: "v1", RedirectURIs: []string{"https://c.example/cb"}, CreatedAt: at(2 * time.Hour), ExpiresAt: &exp}
	ok, err = s.PutOAuthMetadataClient(ctx, doc, 10, at(2*time.Hour))
	must(t, "PutOAuthMetadataClient", err)
	doc.Name, doc.CreatedAt = "v2", at(2*time.Hour+time.Minute)
	ok2, err = s.PutOAuthMetadataClient(ctx, doc, 1, at(2*time.Hour+time.Minute))
	must(t, "PutOAuthMetadataClient(refresh)", err)
	got, err = s.OAuthClient(ctx, doc.ID, at(2*time.Hour+time.Minute))
	if must(t, "OAuthClient(document)", err); !ok || !ok2 || got.Name != "v2" || !got.CreatedAt.Equal(doc.CreatedAt) {
		t.Fatalf("refreshed document client %+v (%v %v)", got, ok, ok2)
	}
}

func oauthRequest(t *testing.T, s store.Store, clientID string, now time.Time) store.OAuthRequest {
	t.Helper()
	r := store.OAuthRequest{ID: uuid.NewString(), ClientID: clientID, RedirectURI: "http://127.0.0.1:1/cb", State: "s", Scopes: []string{"mcp"},
		CodeChallenge: "ch", Resource: "http://x/mcp", CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
	must(t, "CreateOAuthRequest", s.CreateOAuthRequest(t.Context(), r))
	return r
}

func testOAuthRequestCode(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ag := vend(t, s, newAgent("oauth-code", ownerID, "q"))
	c, _ := oauthClient(t, s, 10, at(0))
	r := oauthRequest(t, s, c.ID, at(0))
	wantErr(t, "code before approval", s.SaveOAuthCode(ctx, r.ID, "h1", at(time.Second)), domain.ErrConflict)
	must(t, "ApproveOAuthRequest", s.ApproveOAuthRequest(ctx, r.ID, ag.ID, at(time.Second)))
	wantErr(t, "second approval", s.ApproveOAuthRequest(ctx, r.ID, ag.ID, at(time.Second)), domain.ErrNotFound)
	if got, err := s.OAuthClient(ctx, c.ID, at(48*time.Hour)); err != nil || got.ExpiresAt != nil {
		t.Fatalf("an approved client still expires: %+v %v", got, err)
	}
	must(t, "SaveOAuthCode", s.SaveOAuthCode(ctx, r.ID, "h1", at(time.Second)))
	wantErr(t, "second code", s.SaveOAuthCode(ctx, r.ID, "h2", at(time.Second)), domain.ErrConflict)
	got, err := s.RedeemOAuthCode(ctx, "h1", at(2*time.Second))
	must(t, "RedeemOAuthCode", err)
	if got.AgentID != ag.ID || got.ApprovedAt == nil || got.CodeChallenge != "ch" || got.Resource != "http://x/mcp" {
		t.Fatalf("redeemed request %+v", got)
	}
	_, err = s.RedeemOAuthCode(ctx, "h1", at(3*time.Second))
	wantErr(t, "code redeemed twice", err, domain.ErrConflict)
	_, err = s.RedeemOAuthCode(ctx, "unknown", at(3*time.Second))
	wantErr(t, "unknown code", err, domain.ErrNotFound)
	late := oauthRequest(t, s, c.ID, at(0))
	must(t, "approve", s.ApproveOAuthRequest(ctx, late.ID, ag.ID, at(time.Second)))
	must(t, "code", s.SaveOAuthCode(ctx, late.ID, "h3", at(time.Second)))
	_, err = s.RedeemOAuthCode(ctx, "h3", at(11*time.Minute))
	wantErr(t, "expired code", err, domain.ErrNotFound)
}

// testOAuthConcurrentRedemption: a code presented by eight requests at
// once (across two instances where the adapter can) is redeemed by exactly
// one; the others are refused as replays.
func testOAuthConcurrentRedemption(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	stores := twoStores(t, in)
	ag := vend(t, s, newAgent("oauth-race", ownerID, "q"))
	c, _ := oauthClient(t, s, 10, at(0))
	for round := range 5 {
		r := oauthRequest(t, s, c.ID, at(0))
		code := "race-" + string(rune('a'+round))
		must(t, "ApproveOAuthRequest", s.ApproveOAuthRequest(ctx, r.ID, ag.ID, at(time.Second)))
		must(t, "SaveOAuthCode", s.SaveOAuthCode(ctx, r.ID, code, at(time.Second)))
		won := 0
		for _, err := range parallel(8, func(i int) error {
			_, err := stores[i%len(stores)].RedeemOAuthCode(ctx, code, at(2*time.Second))
			return err
		}) {
			if err == nil {
				won++
				continue
			}
			wantErr(t, "a concurrent redemption that lost", err, domain.ErrConflict)
		}
		if won != 1 {
			t.Fatalf("round %d: %d concurrent redemptions of one code succeeded, want exactly 1", round, won)
		}
	}
}

func testOAuthTokens(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ag := vend(t, s, newAgent("oauth-tokens", ownerID, "q"))
	c, _ := oauthClient(t, s, 10, at(0))
	r := oauthRequest(t, s, c.ID, at(0))
	g := &store.OAuthGrant{ID: uuid.NewString(), AgentID: ag.ID, ClientID: c.ID, ClientName: "c", Resource: "http://x/mcp", Scopes: []string{"mcp"}}
	must(t, "IssueOAuthTokens(new grant)", s.IssueOAuthTokens(ctx, store.IssueOAuthTokensParams{NewGrant: g, CredentialHash: "g-" + g.ID, RequestID: r.ID,
		AccessHash: "a1", AccessExpires: at(time.Hour), RefreshHash: "r1", RefreshExpires: at(48 * time.Hour), Now: at(0)}))
	live, err := s.LiveCredentials(ctx, []string{g.ID})
	must(t, "LiveCredentials", err)
	if !live[g.ID] {
		t.Fatal("a grant is not a live credential")
	}
	tok, err := s.OAuthAccessToken(ctx, "a1", at(time.Minute))
	must(t, "OAuthAccessToken", err)
	if tok.Grant.AgentID != ag.ID || tok.Grant.Resource != "http://x/mcp" || !tok.Live {
		t.Fatalf("access token %+v", tok)
	}
	_, err = s.OAuthAccessToken(ctx, "a1", at(time.Hour))
	wantErr(t, "expired access token", err, domain.ErrNotFound)
	_, err = s.OAuthAccessToken(ctx, "r1", at(time.Minute))
	wantErr(t, "refresh token as access token", err, domain.ErrNotFound)

	rotate := store.IssueOAuthTokensParams{GrantID: g.ID, RotateHash: "r1", AccessHash: "a2", AccessExpires: at(2 * time.Hour),
		RefreshHash: "r2", RefreshExpires: at(49 * time.Hour), Now: at(time.Hour)}
	must(t, "IssueOAuthTokens(rotate)", s.IssueOAuthTokens(ctx, rotate))
	old, err := s.OAuthRefreshToken(ctx, "r1")
	must(t, "OAuthRefreshToken(rotated)", err)
	if old.RotatedAt == nil {
		t.Fatal("the used refresh token is not marked rotated")
	}
	rotate.AccessHash, rotate.RefreshHash = "a3", "r3"
	wantErr(t, "rotating a rotated refresh token", s.IssueOAuthTokens(ctx, rotate), domain.ErrConflict)
	if _, err := s.OAuthAccessToken(ctx, "a3", at(time.Hour)); err == nil {
		t.Fatal("a refused rotation issued an access token")
	}
	must(t, "TouchOAuthGrant", s.TouchOAuthGrant(ctx, g.ID, at(time.Hour), time.Minute))
	grants, err := s.ListOAuthGrants(ctx, ag.ID)
	must(t, "ListOAuthGrants", err)
	if len(grants) != 1 || grants[0].ID != g.ID || grants[0].LastUsedAt == nil {
		t.Fatalf("grants %+v", grants)
	}
	wantErr(t, "revoking another agent's grant", s.RevokeOAuthGrant(ctx, "other", g.ID, at(time.Hour)), domain.ErrNotFound)
	must(t, "RevokeOAuthGrant", s.RevokeOAuthGrant(ctx, ag.ID, g.ID, at(time.Hour)))
	_, err = s.OAuthAccessToken(ctx, "a2", at(time.Hour))
	wantErr(t, "access token of a revoked grant", err, domain.ErrNotFound)
	if rt, err := s.OAuthRefreshToken(ctx, "r2"); err != nil || rt.Live {
		t.Fatalf("refresh token of a revoked grant: live %v, %v", rt.Live, err)
	}
	if grants, _ := s.ListOAuthGrants(ctx, ag.ID); len(grants) != 0 {
		t.Fatalf("revoked grant listed: %+v", grants)
	}
	// A revoked agent gets no new grant.
	_, err = s.RevokeAgent(ctx, store.RevokeAgentParams{ID: ag.ID, Now: at(time.Hour), Audit: domain.AuditRecord{Actor: "operator:" + ownerID, Action: "agent.revoke", AgentID: ag.ID}})
	must(t, "RevokeAgent", err)
	g2 := &store.OAuthGrant{ID: uuid.NewString(), AgentID: ag.ID, ClientID: c.ID, ClientName: "c", Resource: "http://x/mcp", Scopes: []string{"mcp"}}
	wantErr(t, "grant for a revoked agent", s.IssueOAuthTokens(ctx, store.IssueOAuthTokensParams{NewGrant: g2, CredentialHash: "g-" + g2.ID, RequestID: r.ID,
		AccessHash: "a9", AccessExpires: at(2 * time.Hour), RefreshHash: "r9", RefreshExpires: at(48 * time.Hour), Now: at(time.Hour)}), domain.ErrNotFound)
}
