// Package oauth makes Rollcall the authorization server of its own /mcp
// resource (design: Sign-in for MCP clients): protected resource metadata
// (RFC 9728), authorization server metadata (RFC 8414), dynamic client
// registration (RFC 7591), and the authorization-code grant with PKCE S256,
// resource indicators (RFC 8707) and rotating refresh tokens, spoken by
// github.com/zitadel/oidc/v3/pkg/op (oauth.go, storage.go, metadata.go)
// over the sign-in use cases it holds too (grants.go: registration,
// consent, codes, grants, refresh rotation, what a token authenticates
// as), which reach internal/app only through the UseCases it declares.
// The person's consent is a console page (internal/console).
package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	httphelper "github.com/zitadel/oidc/v3/pkg/http"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/edge"
	"github.com/rollcall/rollcall/internal/ratelimit"
	"github.com/rollcall/rollcall/internal/strictjson"
)

// Paths the server mounts this handler on.
const (
	ProtectedResourcePath   = "/.well-known/oauth-protected-resource"
	AuthorizationServerPath = "/.well-known/oauth-authorization-server"
	Prefix                  = "/oauth/"

	authorizePath = "/oauth/authorize"
	tokenPath     = "/oauth/token"
	registerPath  = "/oauth/register"
	revokePath    = "/oauth/revoke"
)

// RegistrationsPerHour is how many client registrations one client address
// may make per hour on one instance (a burst of as many).
const RegistrationsPerHour = 20

// Options configures the handler.
type Options struct {
	Log *slog.Logger
	// ConsentURL is the console's consent page; the request id is appended.
	ConsentURL string
	// MetadataClient fetches client metadata documents; nil = a client
	// that reaches public addresses only (tests pass their TLS server's).
	MetadataClient *http.Client
	// NoMetadataDocuments turns client metadata documents off: an https
	// client_id is then an unknown client (design: Client registration).
	NoMetadataDocuments bool
}

// Handler serves the metadata documents and the /oauth/ endpoints.
type Handler struct {
	svc        *Grants
	log        *slog.Logger
	provider   *op.Provider
	authz      authorizer
	register   *ratelimit.Limiter
	clock      clockwork.Clock
	mux        *http.ServeMux
	prm, asm   []byte
	resource   string
	issuerURL  string
	consentURL string
	signedIn   func(*http.Request) bool // SetSignedIn; read by withPrompt (prompt.go)
}

// New builds the handler for the service's public URL (issuer and
// resource). Errors: an issuer the library refuses.
func New(svc *Grants, o Options) (*Handler, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	issuer := svc.OAuthIssuer()
	cfg := &op.Config{CodeMethodS256: true, GrantTypeRefreshToken: true, SupportedScopes: []string{OAuthScope, oidc.ScopeOfflineAccess}}
	opts := []op.Option{op.WithCrypto(sealer{}),
		op.WithCustomAuthEndpoint(op.NewEndpoint(strings.TrimPrefix(authorizePath, "/"))),
		op.WithCustomTokenEndpoint(op.NewEndpoint(strings.TrimPrefix(tokenPath, "/"))),
		op.WithCustomRevocationEndpoint(op.NewEndpoint(strings.TrimPrefix(revokePath, "/"))), noLibraryCORS}
	if strings.HasPrefix(issuer, "http://") {
		opts = append(opts, op.WithAllowInsecure()) // a loopback or test server without TLS
	}
	if o.MetadataClient == nil && !o.NoMetadataDocuments {
		o.MetadataClient = publicOnlyClient()
	}
	p, err := op.NewProvider(cfg, &storage{svc: svc, consentURL: o.ConsentURL, fetch: o.MetadataClient}, op.StaticIssuer(issuer), opts...)
	if err != nil {
		return nil, err
	}
	h := &Handler{svc: svc, log: o.Log, provider: p, clock: svc.Clock(), mux: http.NewServeMux(),
		register: ratelimit.New(RegistrationsPerHour/3600.0, RegistrationsPerHour), resource: svc.OAuthResource(), issuerURL: issuer, consentURL: o.ConsentURL}
	h.authz = authorizer{Provider: p, h: h}
	h.prm = mustJSON(map[string]any{
		"resource": h.resource, "authorization_servers": []string{issuer}, "scopes_supported": []string{OAuthScope},
		"bearer_methods_supported": []string{"header"}, "resource_name": "Rollcall",
	})
	h.asm = mustJSON(map[string]any{
		"issuer": issuer, "authorization_endpoint": issuer + authorizePath, "token_endpoint": issuer + tokenPath,
		"registration_endpoint": issuer + registerPath, "revocation_endpoint": issuer + revokePath,
		"scopes_supported": []string{OAuthScope, oidc.ScopeOfflineAccess}, "response_types_supported": []string{"code"},
		"response_modes_supported": []string{"query"}, "grant_types_supported": []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported": []string{"none"}, "revocation_endpoint_auth_methods_supported": []string{"none"},
		"code_challenge_methods_supported": []string{"S256"}, "authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported": !o.NoMetadataDocuments,
	})
	metadata := func(doc []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "max-age=300")
			w.Header().Set("Access-Control-Allow-Origin", "*")
			_, _ = w.Write(doc)
		}
	}
	h.mux.HandleFunc("GET "+ProtectedResourcePath, metadata(h.prm))
	h.mux.HandleFunc("GET "+ProtectedResourcePath+"/mcp", metadata(h.prm))
	h.mux.HandleFunc("GET "+AuthorizationServerPath, metadata(h.asm))
	h.mux.HandleFunc(authorizePath, h.authorize)
	h.mux.HandleFunc("GET "+OAuthCallbackPath, h.callback)
	h.mux.HandleFunc("POST "+tokenPath, h.token)
	h.mux.Handle("POST "+revokePath, p)
	h.mux.HandleFunc("POST "+registerPath, h.registerClient)
	return h, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ResourceMetadataURL is the URL of /mcp's protected resource metadata.
func (h *Handler) ResourceMetadataURL() string { return h.issuerURL + ProtectedResourcePath + "/mcp" }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// authorizer adds Rollcall's rules to the library's validation of an
// authorization request.
type authorizer struct {
	*op.Provider
	h *Handler
}

// ValidateAuthRequest implements op.AuthorizeValidator: a registered
// client and one of its redirect URIs (exact, or loopback on any port)
// before anything else, so no error is ever sent to an unregistered URI;
// then response type code, response mode query, PKCE S256, the scope
// "mcp" (added when absent) and the resource this server's /mcp. Every
// answer, a refusal of another response mode too, goes back in the query:
// the one mode the metadata advertises (response_modes_supported), where
// iss (RFC 9207) is added beside it (design: Authorization requests).
func (a authorizer) ValidateAuthRequest(ctx context.Context, ar *oidc.AuthRequest, st op.Storage, _ *op.IDTokenHintVerifier) (string, error) {
	c, err := st.GetClientByClientID(ctx, ar.ClientID)
	if err != nil {
		return "", oidc.ErrInvalidRequestRedirectURI().WithDescription("unknown client_id")
	}
	if err := op.ValidateAuthReqRedirectURI(c, ar.RedirectURI, ar.ResponseType); err != nil {
		return "", err
	}
	mode := ar.ResponseMode
	ar.ResponseMode = oidc.ResponseModeQuery
	if ar.ResponseType != oidc.ResponseTypeCode {
		return "", oidc.ErrUnauthorizedClient().WithDescription("only response_type=code is supported")
	}
	if mode != "" && mode != oidc.ResponseModeQuery {
		return "", oidc.ErrInvalidRequest().WithDescription("only response_mode=query is supported")
	}
	if ar.CodeChallenge == "" || ar.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return "", oidc.ErrInvalidRequest().WithDescription("PKCE is required: code_challenge with code_challenge_method=S256")
	}
	scopes := []string{OAuthScope}
	for _, s := range ar.Scopes {
		switch s {
		case OAuthScope:
		case oidc.ScopeOfflineAccess:
			scopes = append(scopes, s)
		default:
			return "", oidc.ErrInvalidScope().WithDescription("unknown scope %s; the scope is mcp", strconv.Quote(s))
		}
	}
	ar.Scopes = scopes
	if res, _ := ctx.Value(resourceKey{}).(string); res == "" {
		return "", oidc.ErrInvalidTarget().WithDescription("resource must be %s", a.h.resource)
	}
	return "", promptNone(ctx, ar)
}

// resourceOf checks the resource parameters of a request (RFC 8707): none
// (this server's /mcp is meant) or exactly one naming /mcp. ok false means
// invalid_target.
func (h *Handler) resourceOf(values []string) (string, bool) {
	switch {
	case len(values) == 0:
		return h.resource, true
	case len(values) == 1 && strings.TrimSuffix(values[0], "/") == h.resource:
		return h.resource, true
	}
	return "", false
}

// authorize is the library's authorization endpoint with the resource
// checked first, and iss added to every answer it sends to the client.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "malformed request", http.StatusBadRequest)
		return
	}
	res, _ := h.resourceOf(r.Form["resource"])
	if len(r.Form["scope"]) == 0 {
		// A client that asks for no scope gets the one there is.
		r.Form.Set("scope", OAuthScope)
	}
	r = withPrompt(r.WithContext(context.WithValue(r.Context(), resourceKey{}, res)), h.signedIn)
	op.Authorize(&issWriter{ResponseWriter: w, iss: h.issuerURL, consent: h.consentURL}, r, h.authz)
}

func asDomain(err error, de **domain.Error) bool { return errors.As(err, de) }

// issWriter adds iss (RFC 9207) to a redirect to the client.
type issWriter struct {
	http.ResponseWriter
	iss, consent string
}

func (w *issWriter) WriteHeader(status int) {
	if status == http.StatusFound {
		if loc := w.Header().Get("Location"); loc != "" && (w.consent == "" || !strings.HasPrefix(loc, w.consent)) {
			w.Header().Set("Location", withIss(loc, w.iss))
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func withIss(loc, iss string) string {
	u, err := url.Parse(loc)
	if err != nil {
		return loc
	}
	q := u.Query()
	q.Set("iss", iss)
	u.RawQuery = q.Encode()
	return u.String()
}

// callback answers the client once the person decided on the consent page:
// the code (once) or access_denied, with state and iss.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	req, err := h.svc.OAuthRequest(r.Context(), r.URL.Query().Get("id"))
	if err != nil {
		http.Error(w, "This sign-in request is unknown or has expired. Start again from the application.", http.StatusBadRequest)
		return
	}
	ar := &authRequest{req}
	if !ar.Done() {
		op.AuthRequestError(&issWriter{ResponseWriter: w, iss: h.issuerURL}, r, ar, oidc.ErrAccessDenied().WithDescription("the person declined"), h.authz)
		return
	}
	loc, err := op.BuildAuthResponseCallbackURL(r.Context(), ar, h.authz)
	if err != nil {
		http.Error(w, "A code was issued for this sign-in request already. Start again from the application.", http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, withIss(loc, h.issuerURL), http.StatusFound)
}

// token is the library's token endpoint with the resource checked first
// (RFC 8707: a token for any other resource is refused, invalid_target).
func (h *Handler) token(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		op.RequestError(w, r, oidc.ErrInvalidRequest().WithDescription("malformed form"), nil)
		return
	}
	if _, ok := h.resourceOf(r.PostForm["resource"]); !ok {
		op.RequestError(w, r, oidc.ErrInvalidTarget().WithDescription("resource must be %s", h.resource), nil)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	switch r.PostForm.Get("grant_type") {
	case string(oidc.GrantTypeCode):
		h.exchange(w, r, func() (op.TokenRequest, op.Client, string, error) {
			req, err := op.ParseAccessTokenRequest(r, h.provider.Decoder())
			if err != nil {
				return nil, nil, "", err
			}
			if req.Code == "" {
				return nil, nil, "", oidc.ErrInvalidRequest().WithDescription("code missing")
			}
			ar, c, err := op.ValidateAccessTokenRequest(r.Context(), req, h.provider)
			return ar, c, "", err
		})
	case string(oidc.GrantTypeRefreshToken):
		h.exchange(w, r, func() (op.TokenRequest, op.Client, string, error) {
			req, err := op.ParseRefreshTokenRequest(r, h.provider.Decoder())
			if err != nil {
				return nil, nil, "", err
			}
			rr, c, err := op.ValidateRefreshTokenRequest(r.Context(), req, h.provider)
			return rr, c, req.RefreshToken, err
		})
	case "":
		op.RequestError(w, r, oidc.ErrInvalidRequest().WithDescription("grant_type missing"), nil)
	default:
		op.RequestError(w, r, oidc.ErrUnsupportedGrantType().WithDescription("only authorization_code and refresh_token are supported"), nil)
	}
}

// exchange answers a token request the library parsed and validated
// (validate): an access token and a refresh token, no ID token (this is
// OAuth for /mcp, not OpenID Connect).
func (h *Handler) exchange(w http.ResponseWriter, r *http.Request, validate func() (op.TokenRequest, op.Client, string, error)) {
	req, c, refresh, err := validate()
	if err != nil {
		op.RequestError(w, r, err, nil)
		return
	}
	access, next, validity, err := op.CreateAccessToken(r.Context(), req, c.AccessTokenType(), h.provider, c, refresh)
	if err != nil {
		op.RequestError(w, r, err, nil)
		return
	}
	httphelper.MarshalJSON(w, &oidc.AccessTokenResponse{AccessToken: access, RefreshToken: next, TokenType: oidc.BearerToken,
		ExpiresIn: uint64(validity.Seconds()), Scope: req.GetScopes()})
}

// registration is the part of an RFC 7591 request Rollcall reads; other
// members are ignored, as the RFC allows.
type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
}

// registerClient is dynamic client registration (design: Client
// registration): public clients only, at most RegistrationsPerHour per
// client address, expiring unless used.
func (h *Handler) registerClient(w http.ResponseWriter, r *http.Request) {
	if ok, wait := h.register.Allow(edge.ClientIP(r), h.clock.Now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		writeOAuthError(w, http.StatusTooManyRequests, "temporarily_unavailable", "too many registrations from this address; try again later")
		return
	}
	var reg registration
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<10))
	if err == nil {
		// No member name twice, in any letter case, before encoding/json
		// takes the last one (design: One reading of a body).
		var ne *strictjson.NameError
		if errors.As(strictjson.CheckNames(body), &ne) {
			writeOAuthError(w, http.StatusBadRequest, "invalid_client_metadata", "member "+strconv.Quote(ne.Name)+" at "+ne.Pointer+" repeats a member name of its object; names are compared without regard to letter case")
			return
		}
		err = json.NewDecoder(bytes.NewReader(body)).Decode(&reg)
	}
	if err != nil {
		writeOAuthError(w, http.StatusBadRequest, "invalid_client_metadata", "the body must be a JSON object of client metadata")
		return
	}
	for _, g := range reg.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			writeOAuthError(w, http.StatusBadRequest, "invalid_client_metadata", "grant_types may be authorization_code and refresh_token only")
			return
		}
	}
	for _, t := range reg.ResponseTypes {
		if t != "code" {
			writeOAuthError(w, http.StatusBadRequest, "invalid_client_metadata", "response_types may be code only")
			return
		}
	}
	c, err := h.svc.RegisterOAuthClient(r.Context(), reg.ClientName, reg.RedirectURIs)
	if err != nil {
		var de *domain.Error
		switch {
		case asDomain(err, &de) && de.Code == domain.CodeRateLimited:
			writeOAuthError(w, http.StatusTooManyRequests, "temporarily_unavailable", de.Detail)
		case asDomain(err, &de) && de.Code == domain.CodeInvalidArgument:
			writeOAuthError(w, http.StatusBadRequest, de.Reason, de.Detail)
		default:
			h.log.Error("oauth client registration failed", "err", err)
			writeOAuthError(w, http.StatusInternalServerError, "server_error", "the registration could not be stored")
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"client_id": c.ID, "client_id_issued_at": c.CreatedAt.Unix(), "client_name": c.Name, "redirect_uris": c.RedirectURIs,
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none",
	})
}

func writeOAuthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// SetSignedIn names the function that reports whether a request carries
// a live console session (the console's); without one every prompt=none
// request is answered login_required. Call it before serving.
func (h *Handler) SetSignedIn(f func(*http.Request) bool) { h.signedIn = f }

// CrossOrigin reports the requests of the endpoints any web origin may
// call (design: Browser clients): the metadata documents and the token,
// registration and revocation endpoints. None of them reads a cookie; a
// token or revocation request authenticates by its body (code and PKCE
// verifier, refresh token), a registration by nothing, so a page of
// another origin learns nothing it did not send. The edge answers their
// CORS preflights and adds Access-Control-Allow-Origin: * (never
// Access-Control-Allow-Credentials). The authorization endpoint, the
// callback and the consent page are top-level navigations with the
// console's cookie and stay same-origin.
func CrossOrigin(r *http.Request) bool {
	switch r.URL.Path {
	case ProtectedResourcePath, ProtectedResourcePath + "/mcp", AuthorizationServerPath, tokenPath, registerPath, revokePath:
		return true
	}
	return false
}

// noLibraryCORS turns off the protocol library's own CORS layer, which
// answers any origin with Access-Control-Allow-Credentials: true on the
// endpoints it serves (revocation): the edge is the one place CORS is
// decided.
var noLibraryCORS = op.WithCORSOptions(nil)
