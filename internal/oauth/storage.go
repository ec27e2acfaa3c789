package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// storage is the protocol library's op.Storage over the use cases (design:
// Sign-in for MCP clients). Only what the authorization-code grant with
// PKCE, the refresh grant and revocation need is supported; OpenID Connect
// (ID tokens, userinfo, signing keys) is not offered.
type storage struct {
	svc        *Grants
	consentURL string       // the console page; the request id is appended
	fetch      *http.Client // fetches client metadata documents (metadata.go)
}

var errNotOffered = errors.New("not offered by this authorization server")

type resourceKey struct{}

// CreateAuthRequest implements op.Storage: the validated request with the
// resource the authorize handler put in ctx.
func (s *storage) CreateAuthRequest(ctx context.Context, ar *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	res, _ := ctx.Value(resourceKey{}).(string)
	r, err := s.svc.CreateOAuthRequest(ctx, store.OAuthRequest{ClientID: ar.ClientID, RedirectURI: ar.RedirectURI, State: ar.State,
		Scopes: ar.Scopes, CodeChallenge: ar.CodeChallenge, Resource: res})
	if err != nil {
		return nil, err
	}
	return &authRequest{r}, nil
}

// AuthRequestByID implements op.Storage.
func (s *storage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	r, err := s.svc.OAuthRequest(ctx, id)
	if err != nil {
		return nil, err
	}
	return &authRequest{r}, nil
}

// AuthRequestByCode implements op.Storage: it redeems the code (once).
func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	r, err := s.svc.RedeemOAuthCode(ctx, code)
	if err != nil {
		return nil, err
	}
	return &authRequest{r}, nil
}

// SaveAuthCode implements op.Storage.
func (s *storage) SaveAuthCode(ctx context.Context, id, code string) error {
	if err := s.svc.SaveOAuthCode(ctx, id, code); err != nil {
		return oidc.ErrInvalidRequest().WithDescription("a code was issued for this request already").WithParent(err)
	}
	return nil
}

// DeleteAuthRequest implements op.Storage. The request stays until it
// expires: a code presented again must still be recognised (and its grant
// revoked).
func (s *storage) DeleteAuthRequest(context.Context, string) error { return nil }

// CreateAccessToken implements op.Storage; never called, since every grant
// issues a refresh token too.
func (s *storage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return "", time.Time{}, oidc.ErrServerError().WithDescription("access tokens are issued with refresh tokens only")
}

// CreateAccessAndRefreshTokens implements op.Storage: a new grant for a
// redeemed code, a rotation for a refresh token.
func (s *storage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	var t OAuthTokens
	var err error
	switch r := req.(type) {
	case *authRequest:
		t, err = s.svc.IssueOAuthTokensForCode(ctx, r.r)
	case *refreshRequest:
		t, err = s.svc.RotateOAuthTokens(ctx, r.t.Grant.ID, current)
	default:
		return "", "", time.Time{}, oidc.ErrUnsupportedGrantType()
	}
	if err != nil {
		return "", "", time.Time{}, grantErr(err)
	}
	return t.AccessSecret, t.Refresh, t.AccessExpires, nil
}

// grantErr turns a use-case refusal of a code or refresh token into
// invalid_grant; anything else stays a server error.
func grantErr(err error) error {
	var de *domain.Error
	if errors.As(err, &de) && de.Reason == "invalid_grant" {
		return oidc.ErrInvalidGrant().WithDescription("%s", de.Detail)
	}
	return err
}

// TokenRequestByRefreshToken implements op.Storage.
func (s *storage) TokenRequestByRefreshToken(ctx context.Context, refresh string) (op.RefreshTokenRequest, error) {
	t, err := s.svc.RefreshOAuth(ctx, refresh)
	if err != nil {
		return nil, grantErr(err)
	}
	return &refreshRequest{t}, nil
}

// TerminateSession implements op.Storage (end_session is not offered).
func (s *storage) TerminateSession(context.Context, string, string) error { return errNotOffered }

// RevokeToken implements op.Storage (RFC 7009): the token's grant.
func (s *storage) RevokeToken(ctx context.Context, tokenOrID, _ string, clientID string) *oidc.Error {
	if err := s.svc.RevokeOAuthToken(ctx, tokenOrID, clientID); err != nil {
		return oidc.ErrServerError()
	}
	return nil
}

// GetRefreshTokenInfo implements op.Storage for revocation.
func (s *storage) GetRefreshTokenInfo(_ context.Context, _ string, token string) (string, string, error) {
	if _, ok := OpenOAuthValue(token); ok {
		return "", "", op.ErrInvalidRefreshToken // an access token
	}
	return "", token, nil
}

// SigningKey implements op.Storage: no ID tokens, so no key.
func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return nil, errNotOffered }

// SignatureAlgorithms implements op.Storage.
func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return nil, nil
}

// KeySet implements op.Storage.
func (s *storage) KeySet(context.Context) ([]op.Key, error) { return nil, nil }

// GetClientByClientID implements op.Storage.
func (s *storage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	var c store.OAuthClient
	var err error
	if s.fetch != nil && isMetadataClientID(id) {
		c, err = s.metadataClient(ctx, id)
	} else {
		c, err = s.svc.OAuthClient(ctx, id)
	}
	if err != nil {
		return nil, oidc.ErrInvalidClient().WithDescription("unknown client").WithParent(err)
	}
	return &opClient{c: c, consentURL: s.consentURL}, nil
}

// AuthorizeClientIDSecret implements op.Storage: every client is public.
func (s *storage) AuthorizeClientIDSecret(context.Context, string, string) error {
	return oidc.ErrInvalidClient().WithDescription("clients are public: use token_endpoint_auth_method none with PKCE")
}

// SetUserinfoFromScopes implements op.Storage (no userinfo).
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return errNotOffered
}

// SetUserinfoFromToken implements op.Storage (no userinfo).
func (s *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errNotOffered
}

// SetIntrospectionFromToken implements op.Storage (no introspection).
func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errNotOffered
}

// GetPrivateClaimsFromScopes implements op.Storage.
func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// GetKeyByIDAndClientID implements op.Storage (no JWT client auth).
func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotOffered
}

// ValidateJWTProfileScopes implements op.Storage (no JWT profile grant).
func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errNotOffered
}

// Health implements op.Storage.
func (s *storage) Health(context.Context) error { return nil }

// authRequest is a stored authorization request as the library reads it.
type authRequest struct{ r store.OAuthRequest }

func (a *authRequest) GetID() string                      { return a.r.ID }
func (a *authRequest) GetACR() string                     { return "" }
func (a *authRequest) GetAMR() []string                   { return nil }
func (a *authRequest) GetAudience() []string              { return []string{a.r.ClientID} }
func (a *authRequest) GetClientID() string                { return a.r.ClientID }
func (a *authRequest) GetNonce() string                   { return "" }
func (a *authRequest) GetRedirectURI() string             { return a.r.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return oidc.ResponseTypeCode }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return oidc.ResponseModeQuery }
func (a *authRequest) GetState() string                   { return a.r.State }
func (a *authRequest) GetSubject() string                 { return a.r.AgentID }
func (a *authRequest) Done() bool                         { return a.r.ApprovedAt != nil && a.r.AgentID != "" }

// GetAuthTime is when the person consented.
func (a *authRequest) GetAuthTime() time.Time {
	if a.r.ApprovedAt == nil {
		return time.Time{}
	}
	return *a.r.ApprovedAt
}

// GetCodeChallenge is the S256 challenge (the only method accepted).
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: a.r.CodeChallenge, Method: oidc.CodeChallengeMethodS256}
}

// GetScopes always holds offline_access: every grant gets a refresh token.
func (a *authRequest) GetScopes() []string {
	if slices.Contains(a.r.Scopes, oidc.ScopeOfflineAccess) {
		return a.r.Scopes
	}
	return append(slices.Clone(a.r.Scopes), oidc.ScopeOfflineAccess)
}

// refreshRequest is a live refresh token's grant as the library reads it.
type refreshRequest struct{ t store.OAuthToken }

func (r *refreshRequest) GetAMR() []string          { return nil }
func (r *refreshRequest) GetAudience() []string     { return []string{r.t.Grant.ClientID} }
func (r *refreshRequest) GetAuthTime() time.Time    { return r.t.Grant.CreatedAt }
func (r *refreshRequest) GetClientID() string       { return r.t.Grant.ClientID }
func (r *refreshRequest) GetScopes() []string       { return r.t.Grant.Scopes }
func (r *refreshRequest) GetSubject() string        { return r.t.Grant.AgentID }
func (r *refreshRequest) SetCurrentScopes([]string) {}

// opClient is the library's op.Client of a registered public client:
// native (loopback redirect URIs match on any port, RFC 8252), no secret,
// PKCE.
type opClient struct {
	c          store.OAuthClient
	consentURL string
}

func (c *opClient) GetID() string                       { return c.c.ID }
func (c *opClient) RedirectURIs() []string              { return c.c.RedirectURIs }
func (c *opClient) PostLogoutRedirectURIs() []string    { return nil }
func (c *opClient) ApplicationType() op.ApplicationType { return op.ApplicationTypeNative }
func (c *opClient) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodNone }
func (c *opClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *opClient) LoginURL(id string) string            { return c.consentURL + id }
func (c *opClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *opClient) IDTokenLifetime() time.Duration       { return 0 }
func (c *opClient) DevMode() bool                        { return false }
func (c *opClient) IsScopeAllowed(scope string) bool     { return scope == OAuthScope }
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *opClient) ClockSkew() time.Duration             { return 0 }
func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// GrantTypes are the authorization code and the refresh token.
func (c *opClient) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}

// sealer is the library's Crypto: SealOAuthValue (codes and access
// tokens carry 256 fresh random bits; only hashes are stored).
type sealer struct{}

func (sealer) Encrypt(v string) (string, error) { return SealOAuthValue(v), nil }

func (sealer) Decrypt(s string) (string, error) {
	v, ok := OpenOAuthValue(s)
	if !ok {
		return "", errors.New("not a Rollcall OAuth value")
	}
	return v, nil
}

// metadataClient returns the client a metadata document URL names,
// fetching the document when the stored copy is older than
// OAuthMetadataClientTTL.
func (s *storage) metadataClient(ctx context.Context, id string) (store.OAuthClient, error) {
	if c, fresh := s.svc.FreshOAuthMetadataClient(ctx, id); fresh {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return store.OAuthClient{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.fetch.Do(req)
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata: status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return store.OAuthClient{}, fmt.Errorf("fetch client metadata: %w", err)
	}
	if len(body) > maxMetadataBytes {
		return store.OAuthClient{}, errors.New("client metadata document larger than 5 KiB")
	}
	var doc metadataDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return store.OAuthClient{}, fmt.Errorf("client metadata document: %w", err)
	}
	if doc.ClientID != id {
		return store.OAuthClient{}, errors.New("client metadata document: client_id is not the document's URL")
	}
	if doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != "none" {
		return store.OAuthClient{}, errors.New("client metadata document: only token_endpoint_auth_method none is supported")
	}
	return s.svc.PutOAuthMetadataClient(ctx, id, doc.ClientName, doc.RedirectURIs)
}
