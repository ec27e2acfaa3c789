package oauth

import (
	"net/http"

	"github.com/zitadel/oidc/v3/pkg/op"
)

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
