package app

import (
	"context"
	"encoding/base64"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Sign-in for MCP clients (design: Sign-in for MCP clients): the use cases
// of Rollcall's authorization server for /mcp. The protocol (RFC 6749 with
// PKCE, RFC 8707, RFC 7591) is spoken by internal/oauth; these hold the
// rules it does not: what a registration may be, who may consent to what,
// one code per request, rotation with replay detection, and what a token
// authenticates as.

const (
	// OAuthAccessTokenPrefix starts every access token; the rest is the
	// protocol library's encoding of a 256-bit secret (stored hashed) and
	// the agent id.
	OAuthAccessTokenPrefix = "rco_"
	// OAuthRefreshTokenPrefix starts every refresh token (stored hashed).
	OAuthRefreshTokenPrefix = "rcr_"

	// OAuthAccessTokenTTL is an access token's life (design: OAuth tokens).
	OAuthAccessTokenTTL = time.Hour
	// OAuthRefreshTokenTTL is a refresh token's life; each use replaces it.
	OAuthRefreshTokenTTL = 30 * 24 * time.Hour
	// OAuthRequestTTL bounds an authorization request from its arrival to
	// its code's redemption.
	OAuthRequestTTL = 10 * time.Minute
	// OAuthUnusedClientTTL is how long a registration lives until a person
	// approves a request of it (design: Client registration).
	OAuthUnusedClientTTL = 24 * time.Hour
	// OAuthMaxUnusedClients bounds the registrations never used.
	OAuthMaxUnusedClients = 1000
	// OAuthMaxRedirectURIs bounds a registration's redirect URIs.
	OAuthMaxRedirectURIs = 10
	// OAuthScope is the one scope: the agent's own (its queues and verbs).
	OAuthScope = "mcp"
)

// errOAuthInvalidGrant is a code or refresh token that is unknown, expired,
// replayed or whose grant was revoked (RFC 6749 invalid_grant).
var errOAuthInvalidGrant = &domain.Error{Code: domain.CodeUnauthenticated, Reason: "invalid_grant", Detail: "the code or refresh token is invalid, expired, used or revoked"}

// OAuthResource is the resource every token is bound to (RFC 8707): the
// MCP endpoint's public URL.
func (s *Service) OAuthResource() string { return s.publicURL + "/mcp" }

// OAuthIssuer is the authorization server's issuer: the public URL.
func (s *Service) OAuthIssuer() string { return s.publicURL }

// RegisterOAuthClient registers a public client (design: Client
// registration): a name of at most 200 bytes and 1 to 10 redirect URIs,
// each https, or http on a loopback host (RFC 8252), without a fragment.
// Errors: invalid_argument (Reason names the RFC 7591 error), rate_limited
// when OAuthMaxUnusedClients registrations are unused.
func (s *Service) RegisterOAuthClient(ctx context.Context, name string, redirectURIs []string) (store.OAuthClient, error) {
	return s.putOAuthClient(ctx, "rcc_"+newID(), name, redirectURIs, s.store.CreateOAuthClient)
}

// OAuthMetadataClientTTL is how long a client metadata document fetched
// is used before it is fetched again (design: Client registration).
const OAuthMetadataClientTTL = 5 * time.Minute

// FreshOAuthMetadataClient returns the client of a metadata document URL
// fetched within OAuthMetadataClientTTL; false when it must be fetched.
func (s *Service) FreshOAuthMetadataClient(ctx context.Context, id string) (store.OAuthClient, bool) {
	c, err := s.store.OAuthClient(ctx, id, s.now())
	return c, err == nil && s.now().Sub(c.CreatedAt) < OAuthMetadataClientTTL
}

// PutOAuthMetadataClient stores what a client's metadata document says
// (id is its URL), under the rules of RegisterOAuthClient.
func (s *Service) PutOAuthMetadataClient(ctx context.Context, id, name string, redirectURIs []string) (store.OAuthClient, error) {
	return s.putOAuthClient(ctx, id, name, redirectURIs, s.store.PutOAuthMetadataClient)
}

func (s *Service) putOAuthClient(ctx context.Context, id, name string, redirectURIs []string,
	put func(context.Context, store.OAuthClient, int, time.Time) (bool, error)) (store.OAuthClient, error) {
	if len(redirectURIs) == 0 || len(redirectURIs) > OAuthMaxRedirectURIs {
		return store.OAuthClient{}, &domain.Error{Code: domain.CodeInvalidArgument, Reason: "invalid_redirect_uri", Detail: "give 1 to 10 redirect_uris"}
	}
	for _, u := range redirectURIs {
		if !validRedirectURI(u) {
			return store.OAuthClient{}, &domain.Error{Code: domain.CodeInvalidArgument, Reason: "invalid_redirect_uri",
				Detail: "a redirect_uri must be https, or http on localhost or a loopback address, without a fragment: " + u}
		}
	}
	name = strings.TrimSpace(name)
	if name == "" {
		name = "unnamed client"
	}
	if len(name) > 200 || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return store.OAuthClient{}, &domain.Error{Code: domain.CodeInvalidArgument, Reason: "invalid_client_metadata", Detail: "client_name must be at most 200 bytes without control characters"}
	}
	now := s.now()
	exp := now.Add(OAuthUnusedClientTTL)
	c := store.OAuthClient{ID: id, Name: name, RedirectURIs: redirectURIs, CreatedAt: now, ExpiresAt: &exp}
	created, err := put(ctx, c, OAuthMaxUnusedClients, now)
	if err != nil {
		return store.OAuthClient{}, err
	}
	if !created {
		return store.OAuthClient{}, domain.Errorf(domain.CodeRateLimited, "too many client registrations are waiting to be used; try again later")
	}
	s.log.Info("oauth client stored", "client_id", c.ID, "name", c.Name)
	return c, nil
}

func validRedirectURI(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Fragment != "" || u.Host == "" || !u.IsAbs() {
		return false
	}
	switch u.Scheme {
	case "https":
		return true
	case "http":
		h := u.Hostname()
		return h == "localhost" || h == "127.0.0.1" || h == "::1"
	}
	return false
}

// OAuthClient returns a registered client. Errors: not_found (unknown, or
// an unused registration that expired).
func (s *Service) OAuthClient(ctx context.Context, id string) (store.OAuthClient, error) {
	c, err := s.store.OAuthClient(ctx, id, s.now())
	return c, storeErr(err, "unknown client", "")
}

// CreateOAuthRequest stores a validated authorization request under a new
// id (the consent page's address), valid for OAuthRequestTTL.
func (s *Service) CreateOAuthRequest(ctx context.Context, r store.OAuthRequest) (store.OAuthRequest, error) {
	now := s.now()
	r.ID, r.CreatedAt, r.ExpiresAt = newID(), now, now.Add(OAuthRequestTTL)
	return r, s.store.CreateOAuthRequest(ctx, r)
}

// OAuthRequest returns an unexpired authorization request. Errors:
// not_found.
func (s *Service) OAuthRequest(ctx context.Context, id string) (store.OAuthRequest, error) {
	r, err := s.store.OAuthRequest(ctx, id, s.now())
	return r, storeErr(err, "this sign-in request is unknown or has expired; start again from the application", "")
}

// OAuthConsent is what the consent page shows: the request, its client and
// the person's agents that a token may act as (active, unrevoked).
type OAuthConsent struct {
	Request store.OAuthRequest
	Client  store.OAuthClient
	Agents  []domain.Agent
}

// OAuthConsentFor reads the consent page of a request for a person.
// Errors: not_found (request or client gone).
func (s *Service) OAuthConsentFor(ctx context.Context, by domain.Person, id string) (OAuthConsent, error) {
	r, err := s.OAuthRequest(ctx, id)
	if err != nil {
		return OAuthConsent{}, err
	}
	c, err := s.OAuthClient(ctx, r.ClientID)
	if err != nil {
		return OAuthConsent{}, err
	}
	all, err := s.store.ListAgents(ctx, store.ListAgentsParams{OwnerID: by.ID})
	if err != nil {
		return OAuthConsent{}, err
	}
	out := OAuthConsent{Request: r, Client: c}
	for _, a := range all {
		if a.Active && !a.Revoked() {
			out.Agents = append(out.Agents, a)
		}
	}
	return out, nil
}

// ApproveOAuthRequest records that the person lets the request's client act
// as their agent ref (design: Consent). Errors: not_found (request gone or
// decided, or not the person's agent), conflict (agent revoked or
// inactive).
func (s *Service) ApproveOAuthRequest(ctx context.Context, by domain.Person, id, ref string) error {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return err
	}
	if a.Revoked() || !a.Active {
		return domain.Errorf(domain.CodeConflict, "agent %s is revoked or inactive; pick another", a.Handle)
	}
	if err := s.store.ApproveOAuthRequest(ctx, id, a.ID, s.now()); err != nil {
		return storeErr(err, "this sign-in request is unknown, expired or already decided; start again from the application", "")
	}
	s.log.Info("oauth request approved", "request_id", id, "agent", a.Handle, "by", by.ID)
	_, err = s.store.AppendAudit(ctx, s.now(), domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.oauth_consent", AgentID: a.ID, Data: map[string]any{"request_id": id}})
	return err
}

// SaveOAuthCode records the hash of an approved request's one code.
// Errors: conflict (a code was issued already).
func (s *Service) SaveOAuthCode(ctx context.Context, id, code string) error {
	return storeErr(s.store.SaveOAuthCode(ctx, id, HashToken(code), s.now()), "unknown sign-in request", "a code was issued for this sign-in request already")
}

// RedeemOAuthCode takes an authorization code once. A code presented again
// revokes what its first redemption issued (RFC 6749 section 4.1.2: a
// replayed code may have been stolen). Errors: unauthenticated
// (invalid_grant).
func (s *Service) RedeemOAuthCode(ctx context.Context, code string) (store.OAuthRequest, error) {
	r, err := s.store.RedeemOAuthCode(ctx, HashToken(code), s.now())
	switch {
	case errors.Is(err, domain.ErrConflict):
		s.log.Warn("oauth code presented twice; revoking its grant", "request_id", r.ID, "grant_id", r.GrantID)
		if r.GrantID != "" {
			s.revokeGrant(ctx, r.AgentID, r.GrantID)
		}
		return store.OAuthRequest{}, errOAuthInvalidGrant
	case errors.Is(err, domain.ErrNotFound):
		return store.OAuthRequest{}, errOAuthInvalidGrant
	}
	return r, err
}

// OAuthTokens is one issued pair: the access token's secret (the protocol
// layer wraps it into the token), the refresh token and the access token's
// expiry.
type OAuthTokens struct {
	AccessSecret  string
	Refresh       string
	AccessExpires time.Time
}

// IssueOAuthTokensForCode starts the grant of a redeemed request: a new
// agent credential nobody is shown, an access and a refresh token.
// Errors: unauthenticated (invalid_grant: the agent was revoked or
// deactivated since consent).
func (s *Service) IssueOAuthTokensForCode(ctx context.Context, r store.OAuthRequest) (OAuthTokens, error) {
	c, err := s.OAuthClient(ctx, r.ClientID)
	if err != nil {
		return OAuthTokens{}, errOAuthInvalidGrant
	}
	g := &store.OAuthGrant{ID: newID(), AgentID: r.AgentID, ClientID: c.ID, ClientName: c.Name, Resource: r.Resource, Scopes: r.Scopes}
	return s.issue(ctx, store.IssueOAuthTokensParams{NewGrant: g, CredentialHash: HashToken(NewToken("rcg_")), RequestID: r.ID})
}

// RefreshOAuth looks a refresh token up for the refresh grant. A rotated
// one presented again revokes its whole grant (design: OAuth tokens).
// Errors: unauthenticated (invalid_grant).
func (s *Service) RefreshOAuth(ctx context.Context, refresh string) (store.OAuthToken, error) {
	if !strings.HasPrefix(refresh, OAuthRefreshTokenPrefix) {
		return store.OAuthToken{}, errOAuthInvalidGrant
	}
	t, err := s.store.OAuthRefreshToken(ctx, HashToken(refresh))
	if errors.Is(err, domain.ErrNotFound) {
		return store.OAuthToken{}, errOAuthInvalidGrant
	}
	if err != nil {
		return store.OAuthToken{}, err
	}
	if t.RotatedAt != nil {
		s.log.Warn("rotated oauth refresh token presented again; revoking its grant", "grant_id", t.Grant.ID, "agent_id", t.Grant.AgentID)
		s.revokeGrant(ctx, t.Grant.AgentID, t.Grant.ID)
		return store.OAuthToken{}, errOAuthInvalidGrant
	}
	if !t.Live || !t.ExpiresAt.After(s.now()) {
		return store.OAuthToken{}, errOAuthInvalidGrant
	}
	return t, nil
}

// RotateOAuthTokens replaces a refresh token with a new pair of the same
// grant. Errors: unauthenticated (invalid_grant: rotated meanwhile, expired
// or revoked).
func (s *Service) RotateOAuthTokens(ctx context.Context, grantID, refresh string) (OAuthTokens, error) {
	return s.issue(ctx, store.IssueOAuthTokensParams{GrantID: grantID, RotateHash: HashToken(refresh)})
}

func (s *Service) issue(ctx context.Context, p store.IssueOAuthTokensParams) (OAuthTokens, error) {
	now := s.now()
	t := OAuthTokens{AccessSecret: NewToken(""), Refresh: NewToken(OAuthRefreshTokenPrefix), AccessExpires: now.Add(OAuthAccessTokenTTL)}
	p.AccessHash, p.AccessExpires = HashToken(t.AccessSecret), t.AccessExpires
	p.RefreshHash, p.RefreshExpires, p.Now = HashToken(t.Refresh), now.Add(OAuthRefreshTokenTTL), now
	err := s.store.IssueOAuthTokens(ctx, p)
	if errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrConflict) {
		return OAuthTokens{}, errOAuthInvalidGrant
	}
	return t, err
}

// AuthenticateOAuth resolves an access token's secret into the principal of
// its agent: CredentialID is the grant, so sessions opened with it are
// re-checked and closed like those of any credential (design: Revocation
// within 5 s). The token must be unexpired, its grant live, bound to this
// server's /mcp (RFC 8707) and its agent active. Its use is recorded at
// most once per TokenTouchEvery. Errors: unauthenticated, forbidden (agent
// inactive).
func (s *Service) AuthenticateOAuth(ctx context.Context, secret string) (domain.Principal, error) {
	now := s.now()
	t, err := s.store.OAuthAccessToken(ctx, HashToken(secret), now)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Principal{}, errUnauthenticated
	}
	if err != nil {
		return domain.Principal{}, err
	}
	if t.Grant.Resource != s.OAuthResource() {
		return domain.Principal{}, &domain.Error{Code: domain.CodeUnauthenticated, Reason: "wrong_resource", Detail: "this token was issued for another resource"}
	}
	a, err := s.store.GetAgent(ctx, store.AgentRef{ID: t.Grant.AgentID})
	if err != nil || a.Revoked() {
		return domain.Principal{}, errUnauthenticated
	}
	if !a.Active {
		return domain.Principal{}, domain.Errorf(domain.CodeForbidden, "agent %s is inactive; its owner can set active=true", a.Handle)
	}
	s.touchGrant(ctx, t.Grant.ID, now)
	return domain.Principal{Agent: &a, CredentialID: t.Grant.ID}, nil
}

// oauthMayAuthenticate is MayAuthenticate for an access token's secret:
// one probe, no cache.
func (s *Service) oauthMayAuthenticate(ctx context.Context, secret string) bool {
	_, err := s.store.OAuthAccessToken(ctx, HashToken(secret), s.now())
	return err == nil || !errors.Is(err, domain.ErrNotFound)
}

func (s *Service) touchGrant(ctx context.Context, id string, now time.Time) {
	s.touchMu.Lock()
	last, ok := s.touched["grant:"+id]
	if ok && now.Sub(last) < TokenTouchEvery {
		s.touchMu.Unlock()
		return
	}
	s.touched["grant:"+id] = now
	s.touchMu.Unlock()
	if err := s.store.TouchOAuthGrant(ctx, id, now, TokenTouchEvery); err != nil {
		s.log.Warn("recording a grant's last use failed", "grant_id", id, "err", err)
	}
}

// ListOAuthGrants lists the live sign-ins of the person's agent ref.
// Errors: not_found.
func (s *Service) ListOAuthGrants(ctx context.Context, by domain.Person, ref string) ([]store.OAuthGrant, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return nil, err
	}
	return s.store.ListOAuthGrants(ctx, a.ID)
}

// RevokeOAuthGrant revokes one sign-in of the person's agent ref: its
// tokens stop working and the sessions opened with them close on every
// instance. Errors: not_found.
func (s *Service) RevokeOAuthGrant(ctx context.Context, by domain.Person, ref, grantID string) error {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return err
	}
	if err := s.store.RevokeOAuthGrant(ctx, a.ID, grantID, s.now()); err != nil {
		return storeErr(err, "no such sign-in", "")
	}
	s.log.Info("oauth grant revoked", "agent", a.Handle, "grant_id", grantID, "by", by.ID)
	s.closeSessions(ctx, a.ID, []string{grantID})
	_, err = s.store.AppendAudit(ctx, s.now(), domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.oauth_revoke", AgentID: a.ID, Data: map[string]any{"grant_id": grantID}})
	return err
}

// revokeGrant revokes a grant on the server's own motion (a replayed code
// or refresh token) and closes its sessions.
func (s *Service) revokeGrant(ctx context.Context, agentID, grantID string) {
	if err := s.store.RevokeOAuthGrant(ctx, agentID, grantID, s.now()); err != nil {
		s.log.Error("revoking a replayed grant failed", "grant_id", grantID, "err", err)
		return
	}
	s.closeSessions(ctx, agentID, []string{grantID})
}

// SealOAuthValue is how the protocol layer turns a value into a token or
// code (its Crypto): the prefix, the value in base64url, a dot and 256
// fresh random bits, so a code is unguessable even to whoever saw the
// request id it wraps. An access token wraps "<secret>:<agent id>"; only
// the secret's hash is stored.
func SealOAuthValue(v string) string {
	return OAuthAccessTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(v)) + "." + NewToken("")
}

// OpenOAuthValue reverses SealOAuthValue; false when s is not one.
func OpenOAuthValue(s string) (string, bool) {
	body, ok := strings.CutPrefix(s, OAuthAccessTokenPrefix)
	if !ok {
		return "", false
	}
	enc, _, ok := strings.Cut(body, ".")
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// OAuthAccessSecret is the secret inside an access token; false when the
// token is not one.
func OAuthAccessSecret(token string) (string, bool) {
	v, ok := OpenOAuthValue(token)
	if !ok {
		return "", false
	}
	secret, _, ok := strings.Cut(v, ":")
	return secret, ok && secret != ""
}

// OAuthCallbackPath is where the consent page sends the browser once the
// person decided: the authorization server answers the client from there.
const OAuthCallbackPath = "/oauth/authorize/callback"

// RevokeOAuthToken revokes the grant of a refresh token or of an access
// token's secret presented by its client (RFC 7009): unknown tokens and
// other clients' tokens are ignored, as the RFC asks.
func (s *Service) RevokeOAuthToken(ctx context.Context, tokenOrSecret, clientID string) error {
	var t store.OAuthToken
	var err error
	if strings.HasPrefix(tokenOrSecret, OAuthRefreshTokenPrefix) {
		t, err = s.store.OAuthRefreshToken(ctx, HashToken(tokenOrSecret))
	} else {
		t, err = s.store.OAuthAccessToken(ctx, HashToken(tokenOrSecret), s.now())
	}
	if errors.Is(err, domain.ErrNotFound) || (err == nil && t.Grant.ClientID != clientID) {
		return nil
	}
	if err != nil {
		return err
	}
	s.revokeGrant(ctx, t.Grant.AgentID, t.Grant.ID)
	return nil
}
