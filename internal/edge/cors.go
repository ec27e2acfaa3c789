package edge

import (
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// CORS names the routes pages of other web origins may call (design:
// Browser clients). Two kinds:
//
//   - Public routes carry no cookies and authenticate, when at all, by
//     what their body says (the OAuth metadata documents, the token,
//     registration and revocation endpoints): any Origin may call them,
//     their answers carry Access-Control-Allow-Origin: * and never
//     Access-Control-Allow-Credentials, and their Origin is not checked
//     (the Host still is: DNS-rebinding protection).
//   - Bearer routes (the MCP endpoint) take a bearer token: only the
//     Origins listed may call them from a page, and get their origin
//     back in Access-Control-Allow-Origin (never with credentials); any
//     other foreign Origin is refused as before. An Origin matches a
//     listed one only as a browser serialises it (RFC 6454: scheme and
//     host lower-case, no default port, no trailing slash), byte for
//     byte, and the answer names the listed origin in that form — the one
//     string a browser's CORS check accepts.
//
// The edge answers the CORS preflights (OPTIONS with
// Access-Control-Request-Method) of both kinds itself, before any
// authentication or handler: a preflight carries no credential.
type CORS struct {
	// Public reports the public routes; nil = none.
	Public func(r *http.Request) bool
	// Bearer reports the bearer routes; nil = none.
	Bearer func(r *http.Request) bool
	// Origins are the web origins (scheme://host[:port], in any case,
	// with or without a trailing slash) allowed on the bearer routes.
	Origins []string
}

// Headers of the CORS answers.
const (
	publicAllowMethods  = "GET, POST"
	publicAllowHeaders  = "Authorization, Content-Type, Mcp-Protocol-Version"
	publicExposeHeaders = "Retry-After, WWW-Authenticate"
	bearerAllowMethods  = "GET, POST, DELETE"
	bearerAllowHeaders  = "Authorization, Content-Type, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID"
	bearerExposeHeaders = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate, Retry-After"
	// corsMaxAge is how long (seconds) a browser may keep a preflight's
	// answer (Chromium caps it at 7200).
	corsMaxAge = "600"
)

// corsKind is what CORS makes of a request.
type corsKind int

const (
	corsNone   corsKind = iota // no Origin, or a route without CORS: the Origin rule applies
	corsPublic                 // a public route: any Origin
	corsBearer                 // a bearer route and a listed Origin
)

// kind classifies r: only a request with an Origin is a CORS request.
func (c CORS) kind(r *http.Request) corsKind {
	origin := r.Header.Get("Origin")
	switch {
	case origin == "":
		return corsNone
	case c.Public != nil && c.Public(r):
		return corsPublic
	case c.Bearer != nil && c.Bearer(r) && slices.ContainsFunc(c.Origins, func(o string) bool { return serialisedOrigin(o) == origin }):
		return corsBearer
	}
	return corsNone
}

// serialisedOrigin is the origin o (scheme://host[:port]) as a browser
// sends it in Origin (RFC 6454, section 6.1): scheme and host lower-case,
// the scheme's default port and a trailing slash dropped.
func serialisedOrigin(o string) string {
	u, err := url.Parse(strings.TrimSuffix(o, "/"))
	if err != nil || u.Host == "" {
		return o
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host = net.JoinHostPort(strings.Trim(host, "[]"), port)
	}
	return scheme + "://" + host
}

// originRefusal is detail, the Origin rule's refusal of r, or on a bearer
// route the hint an operator needs there: a browser client's origin
// belongs in mcp.browser_origins, not in allowed_origins (which opens
// every route, the console too).
func (c CORS) originRefusal(r *http.Request, detail string) string {
	if detail == "" || c.Bearer == nil || !c.Bearer(r) {
		return detail
	}
	return "Origin " + quote(r.Header.Get("Origin")) + " is not allowed; a page of another origin may call this route only if mcp.browser_origins lists its origin"
}

// serve adds the CORS headers of kind k to w and answers r when it is a
// preflight (true: the request is done).
func (k corsKind) serve(w http.ResponseWriter, r *http.Request) bool {
	if k == corsNone {
		return false
	}
	h := w.Header()
	origin, methods, headers, expose := "*", publicAllowMethods, publicAllowHeaders, publicExposeHeaders
	if k == corsBearer {
		origin, methods, headers, expose = r.Header.Get("Origin"), bearerAllowMethods, bearerAllowHeaders, bearerExposeHeaders
		h.Add("Vary", "Origin")
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		h.Set("Access-Control-Expose-Headers", expose)
		return false
	}
	h.Set("Access-Control-Allow-Methods", methods)
	h.Set("Access-Control-Allow-Headers", headers)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}
