package oauth

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Sign-in for MCP clients (design: Sign-in for MCP clients): the use cases
// of Rollcall's authorization server for /mcp. The protocol (RFC 6749 with
// PKCE, RFC 8707, RFC 7591) is spoken by the Handler; these hold the rules
// it does not: what a registration may be, who may consent to what, one
// code per request, rotation with replay detection, and what a token
// authenticates as.

// UseCases is what the sign-in use cases need of internal/app's Service,
// which does not import this package: the person's own agent, closing a
// revoked grant's sessions on every instance, the database clock and the
// public URL.
type UseCases interface {
	OwnedAgent(ctx context.Context, by domain.Person, ref string) (domain.Agent, error)
	CloseSessions(ctx context.Context, agentID string, credentials []string)
	Clock() clockwork.Clock
	PublicURL() string
}

// Grants holds the sign-in use cases over the store: clients, requests,
// consent, codes, grants and their tokens. It is safe for concurrent use.
type Grants struct {
	store   store.Store
	uc      UseCases
	log     *slog.Logger
	touchMu sync.Mutex
	touched map[string]time.Time // grant id → last use written by this instance
}

// NewGrants builds the sign-in use cases over st and uc. log nil =
// slog.Default().
func NewGrants(st store.Store, uc UseCases, log *slog.Logger) *Grants {
	if log == nil {
		log = slog.Default()
	}
	return &Grants{store: st, uc: uc, log: log, touched: map[string]time.Time{}}
}

// Clock is the database clock the use cases run on.
func (g *Grants) Clock() clockwork.Clock { return g.uc.Clock() }

// now is the clock's time as the store keeps it (design: Database clock).
func (g *Grants) now() time.Time { return g.uc.Clock().Now().UTC().Truncate(time.Microsecond) }

// errUnauthenticated is a token that authenticates nobody.
var errUnauthenticated = &domain.Error{Code: domain.CodeUnauthenticated, Detail: "missing or invalid bearer token"}

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
func (g *Grants) OAuthResource() string { return g.uc.PublicURL() + "/mcp" }

// OAuthIssuer is the authorization server's issuer: the public URL.
func (g *Grants) OAuthIssuer() string { return g.uc.PublicURL() }

// RegisterOAuthClient registers a public client (design: Client
// registration): a name of at most 200 bytes and 1 to 10 redirect URIs,
// each https, or http on a loopback host (RFC 8252), without a fragment.
// Errors: invalid_argument (Reason names the RFC 7591 error), rate_limited
// when OAuthMaxUnusedClients registrations are unused.
func (g *Grants) RegisterOAuthClient(ctx context.Context, name string, redirectURIs []string) (store.OAuthClient, error) {
	return g.putOAuthClient(ctx, "rcc_"+newID(), name, redirectURIs, g.store.CreateOAuthClient)
}

// OAuthMetadataClientTTL is how long a client metadata document fetched
// is used before it is fetched again (design: Client registration).
const OAuthMetadataClientTTL = 5 * time.Minute

// FreshOAuthMetadataClient returns the client of a metadata document URL
// fetched within OAuthMetadataClientTTL; false when it must be fetched.
func (g *Grants) FreshOAuthMetadataClient(ctx context.Context, id string) (store.OAuthClient, bool) {
	c, err := g.store.OAuthClient(ctx, id, g.now())
	return c, err == nil && g.now().Sub(c.CreatedAt) < OAuthMetadataClientTTL
}

// PutOAuthMetadataClient stores what a client's metadata document says
// (id is its URL), under the rules of RegisterOAuthClient.
func (g *Grants) PutOAuthMetadataClient(ctx context.Context, id, name string, redirectURIs []string) (store.OAuthClient, error) {
	return g.putOAuthClient(ctx, id, name, redirectURIs, g.store.PutOAuthMetadataClient)
}

func (g *Grants) putOAuthClient(ctx context.Context, id, name string, redirectURIs []string,
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
	// The consent page shows the name to a person deciding whom to trust:
	// no control or format characters (a right-to-left override, a
	// zero-width joiner) that make it read as another name.
	if len(name) > 200 || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
		return store.OAuthClient{}, &domain.Error{Code: domain.CodeInvalidArgument, Reason: "invalid_client_metadata",
			Detail: "client_name must be at most 200 bytes of UTF-8 without control or format characters (such as U+202E)"}
	}
	now := g.now()
	exp := now.Add(OAuthUnusedClientTTL)
	c := store.OAuthClient{ID: id, Name: name, RedirectURIs: redirectURIs, CreatedAt: now, ExpiresAt: &exp}
	created, err := put(ctx, c, OAuthMaxUnusedClients, now)
	if err != nil {
		return store.OAuthClient{}, err
	}
	if !created {
		return store.OAuthClient{}, domain.Errorf(domain.CodeRateLimited, "too many client registrations are waiting to be used; try again later")
	}
	g.log.Info("oauth client stored", "client_id", c.ID, "name", c.Name)
	return c, nil
}

func validRedirectURI(raw string) bool {
	u, err := url.Parse(raw)
	// No fragment at all (RFC 6749 3.1.2): a bare "#" parses to an empty
	// one. A port must exist (loopback URIs match any port at use).
	if err != nil || strings.Contains(raw, "#") || u.Host == "" || !u.IsAbs() {
		return false
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n > 65535 {
			return false
		}
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
func (g *Grants) OAuthClient(ctx context.Context, id string) (store.OAuthClient, error) {
	c, err := g.store.OAuthClient(ctx, id, g.now())
	return c, domain.StoreError(err, "unknown client", "")
}

// CreateOAuthRequest stores a validated authorization request under a new
// id (the consent page's address), valid for OAuthRequestTTL.
func (g *Grants) CreateOAuthRequest(ctx context.Context, r store.OAuthRequest) (store.OAuthRequest, error) {
	now := g.now()
	r.ID, r.CreatedAt, r.ExpiresAt = newID(), now, now.Add(OAuthRequestTTL)
	return r, g.store.CreateOAuthRequest(ctx, r)
}

// OAuthRequest returns an unexpired authorization request. Errors:
// not_found.
func (g *Grants) OAuthRequest(ctx context.Context, id string) (store.OAuthRequest, error) {
	r, err := g.store.OAuthRequest(ctx, id, g.now())
	return r, domain.StoreError(err, "this sign-in request is unknown or has expired; start again from the application", "")
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
func (g *Grants) OAuthConsentFor(ctx context.Context, by domain.Person, id string) (OAuthConsent, error) {
	r, err := g.OAuthRequest(ctx, id)
	if err != nil {
		return OAuthConsent{}, err
	}
	c, err := g.OAuthClient(ctx, r.ClientID)
	if err != nil {
		return OAuthConsent{}, err
	}
	all, err := g.store.ListAgents(ctx, store.ListAgentsParams{OwnerID: by.ID})
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
func (g *Grants) ApproveOAuthRequest(ctx context.Context, by domain.Person, id, ref string) error {
	a, err := g.uc.OwnedAgent(ctx, by, ref)
	if err != nil {
		return err
	}
	if a.Revoked() || !a.Active {
		return domain.Errorf(domain.CodeConflict, "agent %s is revoked or inactive; pick another", a.Handle)
	}
	if err := g.store.ApproveOAuthRequest(ctx, id, a.ID, g.now()); err != nil {
		return domain.StoreError(err, "this sign-in request is unknown, expired or already decided; start again from the application", "")
	}
	g.log.Info("oauth request approved", "request_id", id, "agent", a.Handle, "by", by.ID)
	_, err = g.store.AppendAudit(ctx, g.now(), domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.oauth_consent", AgentID: a.ID, Data: map[string]any{"request_id": id}})
	return err
}

// SaveOAuthCode records the hash of an approved request's one code.
// Errors: conflict (a code was issued already).
func (g *Grants) SaveOAuthCode(ctx context.Context, id, code string) error {
	return domain.StoreError(g.store.SaveOAuthCode(ctx, id, domain.HashToken(code), g.now()), "unknown sign-in request", "a code was issued for this sign-in request already")
}

// RedeemOAuthCode takes an authorization code once. A code presented again
// revokes what its first redemption issued (RFC 6749 section 4.1.2: a
// replayed code may have been stolen). Errors: unauthenticated
// (invalid_grant).
func (g *Grants) RedeemOAuthCode(ctx context.Context, code string) (store.OAuthRequest, error) {
	r, err := g.store.RedeemOAuthCode(ctx, domain.HashToken(code), g.now())
	switch {
	case errors.Is(err, domain.ErrConflict):
		g.log.Warn("oauth code presented twice; revoking its grant", "request_id", r.ID, "grant_id", r.GrantID)
		if r.GrantID != "" {
			g.revokeGrant(ctx, r.AgentID, r.GrantID)
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
func (g *Grants) IssueOAuthTokensForCode(ctx context.Context, r store.OAuthRequest) (OAuthTokens, error) {
	c, err := g.OAuthClient(ctx, r.ClientID)
	if err != nil {
		return OAuthTokens{}, errOAuthInvalidGrant
	}
	ng := &store.OAuthGrant{ID: newID(), AgentID: r.AgentID, ClientID: c.ID, ClientName: c.Name, Resource: r.Resource, Scopes: r.Scopes}
	return g.issue(ctx, store.IssueOAuthTokensParams{NewGrant: ng, CredentialHash: domain.HashToken(domain.NewToken("rcg_")), RequestID: r.ID})
}

// RefreshOAuth looks a refresh token up for the refresh grant. A rotated
// one presented again revokes its whole grant (design: OAuth tokens).
// Errors: unauthenticated (invalid_grant).
func (g *Grants) RefreshOAuth(ctx context.Context, refresh string) (store.OAuthToken, error) {
	if !strings.HasPrefix(refresh, OAuthRefreshTokenPrefix) {
		return store.OAuthToken{}, errOAuthInvalidGrant
	}
	t, err := g.store.OAuthRefreshToken(ctx, domain.HashToken(refresh))
	if errors.Is(err, domain.ErrNotFound) {
		return store.OAuthToken{}, errOAuthInvalidGrant
	}
	if err != nil {
		return store.OAuthToken{}, err
	}
	if t.RotatedAt != nil {
		g.log.Warn("rotated oauth refresh token presented again; revoking its grant", "grant_id", t.Grant.ID, "agent_id", t.Grant.AgentID)
		g.revokeGrant(ctx, t.Grant.AgentID, t.Grant.ID)
		return store.OAuthToken{}, errOAuthInvalidGrant
	}
	if !t.Live || !t.ExpiresAt.After(g.now()) {
		return store.OAuthToken{}, errOAuthInvalidGrant
	}
	return t, nil
}

// RotateOAuthTokens replaces a refresh token with a new pair of the same
// grant. Errors: unauthenticated (invalid_grant: rotated meanwhile, expired
// or revoked).
func (g *Grants) RotateOAuthTokens(ctx context.Context, grantID, refresh string) (OAuthTokens, error) {
	return g.issue(ctx, store.IssueOAuthTokensParams{GrantID: grantID, RotateHash: domain.HashToken(refresh)})
}

func (g *Grants) issue(ctx context.Context, p store.IssueOAuthTokensParams) (OAuthTokens, error) {
	now := g.now()
	t := OAuthTokens{AccessSecret: domain.NewToken(""), Refresh: domain.NewToken(OAuthRefreshTokenPrefix), AccessExpires: now.Add(OAuthAccessTokenTTL)}
	p.AccessHash, p.AccessExpires = domain.HashToken(t.AccessSecret), t.AccessExpires
	p.RefreshHash, p.RefreshExpires, p.Now = domain.HashToken(t.Refresh), now.Add(OAuthRefreshTokenTTL), now
	err := g.store.IssueOAuthTokens(ctx, p)
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
func (g *Grants) AuthenticateOAuth(ctx context.Context, secret string) (domain.Principal, error) {
	now := g.now()
	t, err := g.store.OAuthAccessToken(ctx, domain.HashToken(secret), now)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Principal{}, errUnauthenticated
	}
	if err != nil {
		return domain.Principal{}, err
	}
	if t.Grant.Resource != g.OAuthResource() {
		return domain.Principal{}, &domain.Error{Code: domain.CodeUnauthenticated, Reason: "wrong_resource", Detail: "this token was issued for another resource"}
	}
	a, err := g.store.GetAgent(ctx, store.AgentRef{ID: t.Grant.AgentID})
	if err != nil || a.Revoked() {
		return domain.Principal{}, errUnauthenticated
	}
	if !a.Active {
		return domain.Principal{}, domain.Errorf(domain.CodeForbidden, "agent %s is inactive; its owner can set active=true", a.Handle)
	}
	g.touchGrant(ctx, t.Grant.ID, now)
	return domain.Principal{Agent: &a, CredentialID: t.Grant.ID}, nil
}

// Authenticate resolves a bearer token that is an access token
// (AuthenticateOAuth); false when the token is not one, for the use cases
// to authenticate (design: OAuth tokens).
func (g *Grants) Authenticate(ctx context.Context, token string) (domain.Principal, bool, error) {
	secret, ok := OAuthAccessSecret(token)
	if !ok {
		return domain.Principal{}, false, nil
	}
	p, err := g.AuthenticateOAuth(ctx, secret)
	return p, true, err
}

// MayAuthenticate is the edge's check (app.Service.MayAuthenticate) for an
// access token: one probe, no cache; false in ok when the token is not
// one (design: OAuth tokens).
func (g *Grants) MayAuthenticate(ctx context.Context, token string) (may, ok bool) {
	secret, ok := OAuthAccessSecret(token)
	if !ok {
		return false, false
	}
	_, err := g.store.OAuthAccessToken(ctx, domain.HashToken(secret), g.now())
	return err == nil || !errors.Is(err, domain.ErrNotFound), true
}

func (g *Grants) touchGrant(ctx context.Context, id string, now time.Time) {
	g.touchMu.Lock()
	last, ok := g.touched[id]
	if ok && now.Sub(last) < domain.TokenTouchEvery {
		g.touchMu.Unlock()
		return
	}
	g.touched[id] = now
	g.touchMu.Unlock()
	if err := g.store.TouchOAuthGrant(ctx, id, now, domain.TokenTouchEvery); err != nil {
		g.log.Warn("recording a grant's last use failed", "grant_id", id, "err", err)
	}
}

// ListOAuthGrants lists the live sign-ins of the person's agent ref.
// Errors: not_found.
func (g *Grants) ListOAuthGrants(ctx context.Context, by domain.Person, ref string) ([]store.OAuthGrant, error) {
	a, err := g.uc.OwnedAgent(ctx, by, ref)
	if err != nil {
		return nil, err
	}
	return g.store.ListOAuthGrants(ctx, a.ID)
}

// RevokeOAuthGrant revokes one sign-in of the person's agent ref: its
// tokens stop working and the sessions opened with them close on every
// instance. Errors: not_found.
func (g *Grants) RevokeOAuthGrant(ctx context.Context, by domain.Person, ref, grantID string) error {
	a, err := g.uc.OwnedAgent(ctx, by, ref)
	if err != nil {
		return err
	}
	if err := g.store.RevokeOAuthGrant(ctx, a.ID, grantID, g.now()); err != nil {
		return domain.StoreError(err, "no such sign-in", "")
	}
	g.log.Info("oauth grant revoked", "agent", a.Handle, "grant_id", grantID, "by", by.ID)
	g.uc.CloseSessions(ctx, a.ID, []string{grantID})
	_, err = g.store.AppendAudit(ctx, g.now(), domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.oauth_revoke", AgentID: a.ID, Data: map[string]any{"grant_id": grantID}})
	return err
}

// revokeGrant revokes a grant on the server's own motion (a replayed code
// or refresh token) and closes its sessions.
func (g *Grants) revokeGrant(ctx context.Context, agentID, grantID string) {
	if err := g.store.RevokeOAuthGrant(ctx, agentID, grantID, g.now()); err != nil {
		g.log.Error("revoking a replayed grant failed", "grant_id", grantID, "err", err)
		return
	}
	g.uc.CloseSessions(ctx, agentID, []string{grantID})
}

// SealOAuthValue is how the protocol layer turns a value into a token or
// code (its Crypto): the prefix, the value in base64url, a dot and 256
// fresh random bits, so a code is unguessable even to whoever saw the
// request id it wraps. An access token wraps "<secret>:<agent id>"; only
// the secret's hash is stored.
func SealOAuthValue(v string) string {
	return OAuthAccessTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(v)) + "." + domain.NewToken("")
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
func (g *Grants) RevokeOAuthToken(ctx context.Context, tokenOrSecret, clientID string) error {
	var t store.OAuthToken
	var err error
	if strings.HasPrefix(tokenOrSecret, OAuthRefreshTokenPrefix) {
		t, err = g.store.OAuthRefreshToken(ctx, domain.HashToken(tokenOrSecret))
	} else {
		t, err = g.store.OAuthAccessToken(ctx, domain.HashToken(tokenOrSecret), g.now())
	}
	if errors.Is(err, domain.ErrNotFound) || (err == nil && t.Grant.ClientID != clientID) {
		return nil
	}
	if err != nil {
		return err
	}
	g.revokeGrant(ctx, t.Grant.AgentID, t.Grant.ID)
	return nil
}

// newID is a new time-ordered id (UUIDv7), as the use cases name rows.
func newID() string { return uuid.Must(uuid.NewV7()).String() }
