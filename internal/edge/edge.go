// Package edge is Rollcall's HTTP edge: one middleware in front of every
// route (MCP, REST, gateway, console, probes) that
//
//   - decides who the client is: X-Forwarded-For/Proto/Host are believed
//     only from a peer inside trusted_proxies; from any other peer they are
//     deleted before a handler sees them (so nothing downstream can be
//     fooled into a Secure cookie or a forged client address);
//   - checks Host and Origin (DNS-rebinding and cross-site protection;
//     design: Host and Origin): on a loopback listener the Host must be a
//     loopback name (localhost, 127.0.0.0/8, ::1), the host of public_url or
//     one of allowed_hosts; an Origin, when sent, must be the request's own
//     origin, public_url's, one of allowed_origins, or a loopback origin on
//     the same port as a loopback Host (localhost:7070 = 127.0.0.1:7070 =
//     [::1]:7070; no other loopback name),
//     except where CORS opens a route to pages of other origins (design:
//     Browser clients; see CORS), whose preflights the edge answers;
//   - bounds the time a request body may take (http.read_timeout) without a
//     write timeout, so SSE streams, MCP streams and the WebSocket gateway
//     are never cut;
//   - counts failed authentications (401 answers) per client IP and per
//     credential prefix; past auth.max_failures a minute a request whose
//     credential does not verify is answered 429 with Retry-After instead
//     of 401 (see Limiter) — a bearer credential is checked by
//     Options.Verify before the handler runs, a request without one by the
//     handler's answer — logging every refusal at info with the client
//     IP and a reason, never the token. A credential that verifies is
//     served whatever others failed from the same address: credentials are
//     too long to guess, so the limit keeps failures cheap and visible and
//     must not itself lock out a host, a NAT or a CI runner;
//   - ends the connection of every request it refuses (403, 429) and of
//     every failed authentication that announced a body: the read deadline
//     is set to now and the answer carries Connection: close, so a client
//     that sends headers and never the body cannot hold the connection
//     (net/http would otherwise wait for the unread body before answering);
//   - caps the connections one client address holds (Listener).
//
// The middleware knows nothing of how authentication works: it watches the
// status of the answers, so the authenticators stay where they are; the
// one check it makes itself, for clients over the limit, goes through the
// Verify port the server wires to the service.
package edge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/ratelimit"
)

// Options configures the edge. Zero values take the defaults below.
type Options struct {
	// PublicURL is the base URL clients use (public_url); its host and
	// origin are always accepted. "" = none.
	PublicURL string
	// AllowedHosts are extra Host names (port ignored, case-insensitive).
	AllowedHosts []string
	// AllowedOrigins are extra Origin values, compared case-insensitively.
	AllowedOrigins []string
	// TrustedProxies are the peers whose X-Forwarded-* headers are believed.
	TrustedProxies []netip.Prefix
	// ReadTimeout bounds the time from the start of the handler to the last
	// byte of the request body. 0 = DefaultReadTimeout; negative disables.
	ReadTimeout time.Duration
	// MaxFailures is the number of failed authentications a client IP or a
	// credential prefix may make per Window. 0 = DefaultMaxFailures.
	MaxFailures int
	// Window is the counting window of MaxFailures. 0 = one minute.
	Window time.Duration
	// MaxConnsPerClient bounds the connections one client address (IPv6:
	// its /64) holds open at once on a Listener; trusted proxies are not
	// bounded. 0 = DefaultMaxConnsPerClient; negative = no bound.
	MaxConnsPerClient int
	// Verify reports whether a bearer credential (the token after
	// "Bearer ") would authenticate. The edge asks it only for a client
	// over the failed-auth limit, before the handler runs: false = refuse
	// with 429 at once; true = serve (also when it cannot tell, e.g. the
	// store is down: the handler decides). It must be cheap: a credential
	// seen recently (valid or unknown) without a store round trip, any
	// other in at most one indexed lookup. nil = the handler verifies and a 401 past the limit
	// becomes 429.
	Verify func(ctx context.Context, token string) bool
	// Signed reports the requests that authenticate by a signature of their
	// own rather than a bearer credential (webhook deliveries, whose
	// senders such as GitHub share addresses): their 401s are not failed
	// authentications of the client address — the handler limits bad
	// signatures per hook — and the failed-auth limit never refuses them.
	// nil = none.
	Signed func(r *http.Request) bool
	// Shared, when set, counts failed authentications in a store all
	// instances share (PostgreSQL), so together they allow MaxFailures per
	// Window (design: Limits shared by instances). nil = per process.
	Shared ratelimit.Shared
	// CORS names the routes pages of other origins may call (design:
	// Browser clients). Zero = none: every foreign Origin is refused.
	CORS CORS
	// Log receives the refusals (info); nil = slog.Default().
	Log *slog.Logger
	// Clock drives the failure windows; nil = real clock.
	Clock clockwork.Clock
}

// Defaults of Options.
const (
	DefaultReadTimeout = 15 * time.Second
	DefaultMaxFailures = 20
	DefaultWindow      = time.Minute
	// DefaultMaxConnsPerClient leaves room for a host running dozens of
	// agents (an MCP stream, a gateway connection and REST calls each)
	// while keeping one address far below a process's descriptor limit.
	DefaultMaxConnsPerClient = 256
)

// Edge is the middleware. It is safe for concurrent use.
type Edge struct {
	opts    Options
	log     *slog.Logger
	limiter *Limiter
}

// New returns an edge for opts.
func New(opts Options) *Edge {
	opts.ReadTimeout = cmp.Or(opts.ReadTimeout, DefaultReadTimeout)
	opts.MaxFailures = cmp.Or(opts.MaxFailures, DefaultMaxFailures)
	opts.Window = cmp.Or(opts.Window, DefaultWindow)
	opts.MaxConnsPerClient = cmp.Or(opts.MaxConnsPerClient, DefaultMaxConnsPerClient)
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	e := &Edge{opts: opts, log: cmp.Or(opts.Log, slog.Default())}
	e.limiter = NewLimiter(opts.MaxFailures, opts.Window, opts.Clock)
	if opts.Shared != nil {
		e.limiter.SetShared(opts.Shared, e.log)
	}
	return e
}

// Limiter returns the failure counter the middleware uses (for adapters that
// authenticate outside an HTTP status, such as the gateway's identify frame).
func (e *Edge) Limiter() *Limiter { return e.limiter }

// Handler wraps next with the edge checks.
func (e *Edge) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.forwarded(r)
		cors := e.opts.CORS.kind(r)
		detail := e.policy().checkHost(r)
		if detail == "" && cors == corsNone { // else the Origin is one CORS allows here
			detail = e.opts.CORS.originRefusal(r, e.policy().checkOrigin(r))
		}
		if detail != "" {
			e.log.Info("request refused", "client", ClientIP(r), "reason", "host_or_origin", "detail", detail, "method", r.Method, "path", r.URL.Path)
			refuse(w, http.StatusForbidden, "forbidden", detail)
			return
		}
		if cors.serve(w, r) {
			return // a preflight, answered
		}
		if e.opts.ReadTimeout > 0 && r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(e.opts.ReadTimeout)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		if e.opts.Signed != nil && e.opts.Signed(r) {
			next.ServeHTTP(w, r)
			return
		}
		ip, cred := ClientIP(r), credentialKey(r)
		if e.refusedUnverified(w, r, ip, cred) {
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), edgeKey{}, e))
		ww := &watch{ResponseWriter: w, r: r, e: e, ip: ip, cred: cred}
		next.ServeHTTP(ww, r)
	})
}

// refusedUnverified answers 429 and reports true for a request of a client
// over the failed-auth limit whose Authorization does not verify (design:
// Failed-authentication limit: a credential that verifies is served whatever
// others failed from its address; one that does not is refused before its
// body is read or a handler runs, so a guess past the limit costs one
// credential lookup). Requests without Authorization (a console form, a
// DELETE naming its session, the gateway's upgrade) go on to the handler,
// whose 401 the watch turns into 429.
func (e *Edge) refusedUnverified(w http.ResponseWriter, r *http.Request, ip, cred string) bool {
	if e.opts.Verify == nil {
		return false
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return false
	}
	wait, blocked := e.limiter.Blocked(ip, cred)
	if !blocked {
		return false
	}
	scheme, tok, _ := strings.Cut(h, " ")
	if tok = strings.TrimSpace(tok); strings.EqualFold(scheme, "Bearer") && tok != "" && e.opts.Verify(r.Context(), tok) {
		return false
	}
	e.limiter.Fail(ip, cred) // counted like any failure: the window does not move
	e.log.Info("authentication refused", "client", ip, "reason", "rate_limited", "method", r.Method, "path", r.URL.Path, "retry_after", wait.Round(time.Second))
	refuseLimited(w, wait)
	return true
}

// refuse answers a request the edge turns away and ends its connection
// without reading what is left of its body (see the package
// documentation).
func refuse(w http.ResponseWriter, status int, code, detail string) {
	endConnection(w)
	writeProblem(w, status, code, detail)
}

// endConnection makes the answer being written the connection's last: no
// further read waits (the deadline is now) and net/http closes instead of
// draining an unread body.
func endConnection(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	w.Header().Set("Connection", "close")
}

// refuseLimited answers 429 rate_limited with Retry-After (whole seconds,
// at least 1) and ends the connection.
func refuseLimited(w http.ResponseWriter, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(max(int((wait+time.Second-1)/time.Second), 1)))
	endConnection(w)
	writeBody(w, http.StatusTooManyRequests, limitedBody)
}

// limitedBody is the 429 problem, encoded once: every guess past the limit
// gets the same answer, so refusing one costs no encoding.
var limitedBody = problemBody(http.StatusTooManyRequests, "rate_limited",
	"too many failed authentications from this client; retry after the Retry-After delay")

type edgeKey struct{}

// FailureFunc returns the function an adapter calls when it refuses a
// credential outside an HTTP 401 (the gateway's identify frame, after the
// WebSocket upgrade): it counts one failure of r's client IP and of the
// token's prefix and logs the refusal at info (never the token). Outside
// the edge it does nothing.
func FailureFunc(r *http.Request) func(reason, token string) {
	e, _ := r.Context().Value(edgeKey{}).(*Edge)
	if e == nil {
		return func(string, string) {}
	}
	ip := ClientIP(r)
	return func(reason, token string) {
		cred := token
		if len(cred) > 12 {
			cred = cred[:12]
		}
		e.Failed(r, ip, cred, reason)
	}
}

// forwarded applies or strips the X-Forwarded-* headers. From a trusted
// peer the client address becomes the rightmost X-Forwarded-For entry that
// is not itself a trusted proxy (r.RemoteAddr is rewritten to it, port 0)
// and X-Forwarded-Host replaces r.Host; X-Forwarded-Proto stays for
// handlers that choose Secure cookies. From any other peer all three (and
// Forwarded) are deleted.
func (e *Edge) forwarded(r *http.Request) {
	peer := addrOf(r.RemoteAddr)
	if !peer.IsValid() || !e.trusted(peer) {
		for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "Forwarded"} {
			r.Header.Del(h)
		}
		return
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a := addrOf(hops[i])
		if !a.IsValid() {
			break // garbage: stop believing, keep the last good hop
		}
		peer = a
		if !e.trusted(a) {
			break
		}
	}
	r.RemoteAddr = net.JoinHostPort(peer.String(), "0")
	if h := strings.TrimSpace(r.Header.Get("X-Forwarded-Host")); h != "" && !strings.ContainsAny(h, ", /") {
		r.Host = h
	}
	if p := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto"))); p != "http" && p != "https" {
		r.Header.Del("X-Forwarded-Proto")
	}
}

func (e *Edge) trusted(a netip.Addr) bool {
	return slices.ContainsFunc(e.opts.TrustedProxies, func(p netip.Prefix) bool { return p.Contains(a) })
}

// addrOf parses "ip", "ip:port" or "[ip]:port".
func addrOf(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// ClientIP is the address of the client of r as the edge decided it (after
// Handler ran: the forwarded client behind a trusted proxy), without port.
func ClientIP(r *http.Request) string {
	if a := addrOf(r.RemoteAddr); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}

// Scheme is "https" when r came over TLS or, from a trusted proxy, with
// X-Forwarded-Proto: https (after Handler ran); "http" otherwise.
func Scheme(r *http.Request) string {
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		return "https"
	}
	return "http"
}

// CheckHostOrigin returns why r is refused, or "" (see the package
// documentation for the rules).
func (e *Edge) CheckHostOrigin(r *http.Request) string { return e.policy().Check(r) }

func (e *Edge) policy() Policy {
	return Policy{PublicURL: e.opts.PublicURL, AllowedHosts: e.opts.AllowedHosts, AllowedOrigins: e.opts.AllowedOrigins}
}

// Policy is the Host/Origin rule on its own, for handlers (the MCP
// endpoint) that check again behind the middleware.
type Policy struct {
	PublicURL      string
	AllowedHosts   []string
	AllowedOrigins []string
}

// Check returns why r is refused, or "".
func (p Policy) Check(r *http.Request) string {
	if detail := p.checkHost(r); detail != "" {
		return detail
	}
	return p.checkOrigin(r)
}

// checkOrigin is the Origin half of Check: an Origin, when sent, must be
// the request's own, public_url's or one of AllowedOrigins.
func (p Policy) checkOrigin(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	var publicOrig string
	if u, err := url.Parse(p.PublicURL); err == nil && u.Host != "" {
		publicOrig = u.Scheme + "://" + u.Host
	}
	host := r.Host
	if strings.EqualFold(origin, publicOrig) || originIn(p.AllowedOrigins, origin) {
		return ""
	}
	if u, err := url.Parse(origin); err == nil && u.Host != "" {
		if strings.EqualFold(u.Host, host) {
			return ""
		}
		// localhost:7070, 127.0.0.1:7070 and [::1]:7070 are the same server.
		if sameServerName(u.Hostname()) && sameServerName(hostName(host)) && portOf(u.Host, u.Scheme) == portOf(host, Scheme(r)) {
			return ""
		}
	}
	return "Origin " + quote(origin) + " is not allowed; add it to allowed_origins"
}

// checkHost is the Host half of Check: on a loopback listener the Host
// must be a loopback name, public_url's host or one of AllowedHosts.
func (p Policy) checkHost(r *http.Request) string {
	var publicHost string
	if u, err := url.Parse(p.PublicURL); err == nil && u.Host != "" {
		publicHost = u.Hostname()
	}
	host := r.Host
	// No Host at all (HTTP/1.0 probes) is not a browser: only a named host
	// can be a rebinding attack.
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil && IsLoopback(local.String()) && host != "" {
		name := hostName(host)
		if !IsLoopback(name) && !strings.EqualFold(name, publicHost) &&
			!slices.ContainsFunc(p.AllowedHosts, func(a string) bool { return strings.EqualFold(hostName(a), name) }) {
			return "Host " + quote(host) + " is not allowed on this listener; add it to allowed_hosts or set public_url"
		}
	}
	return ""
}

// sameServerName reports whether h (a host without port or brackets) is
// one of the names Host and Origin (design) counts as this server on
// any of them: localhost (any case), 127.0.0.1 or ::1. Other loopback
// names (127.0.0.2, *.localhost) are only their own origin.
func sameServerName(h string) bool {
	return strings.EqualFold(h, "localhost") || h == "127.0.0.1" || h == "::1"
}

// originIn reports whether origin is one of list (case-insensitive, a
// trailing slash in list ignored).
func originIn(list []string, origin string) bool {
	return slices.ContainsFunc(list, func(a string) bool { return strings.EqualFold(strings.TrimSuffix(a, "/"), origin) })
}

// hostName strips the port (and IPv6 brackets) of a Host value.
func hostName(h string) string {
	if n, _, err := net.SplitHostPort(h); err == nil {
		return n
	}
	return strings.Trim(h, "[]")
}

func portOf(hostport, scheme string) string {
	if _, p, err := net.SplitHostPort(hostport); err == nil {
		return p
	}
	if strings.EqualFold(scheme, "https") {
		return "443"
	}
	return "80"
}

// IsLoopback reports whether addr (a host, host:port or [v6]:port) names
// the loopback interface: "localhost" (any case, also with a trailing dot
// or as a *.localhost name, RFC 6761) or a loopback IP.
func IsLoopback(addr string) bool {
	host := hostName(addr)
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// credentialKey is the limiter key of the bearer credential of r: its
// first 12 characters (kind prefix + 8), never logged. "" without one.
func credentialKey(r *http.Request) string {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return ""
	}
	if len(tok) > 12 {
		tok = tok[:12]
	}
	return tok
}

// watch observes the status of the answer: a 401 is a failed
// authentication. Verification comes first: only a request whose
// credential did not verify (the handler answered 401) is refused for
// being over the limit, its 401 replaced by the edge's 429 and the
// handler's body dropped.
type watch struct {
	http.ResponseWriter
	r       *http.Request
	e       *Edge
	ip      string
	cred    string
	wrote   bool
	refused bool // the 401 became a 429: the handler's writes are dropped
}

func (w *watch) WriteHeader(code int) {
	if w.refused {
		return
	}
	if !w.wrote {
		w.wrote = true
		if code == http.StatusUnauthorized {
			wait, blocked := w.e.limiter.FailBlocked(w.ip, w.cred) // counted either way: the window does not move
			if blocked {
				w.refused = true
				w.e.log.Info("authentication refused", "client", w.ip, "reason", "rate_limited", "method", w.r.Method, "path", w.r.URL.Path, "retry_after", wait.Round(time.Second))
				w.Header().Del("WWW-Authenticate")
				refuseLimited(w.ResponseWriter, wait)
				return
			}
			w.e.log.Info("authentication refused", "client", w.ip, "reason", reasonOf(w.r, w.Header()), "method", w.r.Method, "path", w.r.URL.Path)
			if w.r.ContentLength != 0 {
				endConnection(w.ResponseWriter) // the body may never come
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *watch) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.refused {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flush, hijack).
func (w *watch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush forwards to the underlying writer (for handlers that type-assert).
func (w *watch) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// reasonOf names why a 401 was answered, from what the request carried and
// the WWW-Authenticate error the handler set.
func reasonOf(r *http.Request, h http.Header) string {
	switch {
	case strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`):
		return "invalid_token"
	case r.Header.Get("Authorization") == "" && r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/console/"):
		return "invalid_token" // the console's sign-in form carries the token in its body
	case r.Header.Get("Authorization") == "":
		return "missing_credential"
	}
	return "invalid_token"
}

// Failed counts one failed authentication of the client ip with the
// credential key cred ("" = none) and logs it at info with the reason.
func (e *Edge) Failed(r *http.Request, ip, cred, reason string) {
	e.limiter.Fail(ip, cred)
	e.log.Info("authentication refused", "client", ip, "reason", reason, "method", r.Method, "path", r.URL.Path)
}

// deadlineBody clears the read deadline once the body is complete, so a
// handler that goes on streaming (or the server's background read that
// notices a closed connection) is not cut off.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done {
		b.done = true
		if errors.Is(err, io.EOF) {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	writeBody(w, status, problemBody(status, code, detail))
}

// writeBody answers status with the problem document body.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// problemBody is the application/problem+json document of a refusal, with
// a trailing newline.
func problemBody(status int, code, detail string) []byte {
	titles := map[string]string{"forbidden": "Forbidden", "rate_limited": "Rate limited"}
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(map[string]any{"type": "urn:rollcall:problem:" + code, "title": titles[code], "status": status, "detail": detail, "code": code})
	return b.Bytes()
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
