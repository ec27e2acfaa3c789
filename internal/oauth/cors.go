package oauth

import "net/http"

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
