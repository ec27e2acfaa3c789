// Package httpapi is Rollcall's REST adapter: the operator API under /v1,
// described by the OpenAPI 3.1 document api/openapi.yaml (served at
// GET /v1/openapi.yaml), plus the probes /healthz and /readyz
// (design: Problem documents, Readiness). It holds no rules: every route
// decodes its input, calls one use case of app.Service and renders the
// result.
//
//	h := httpapi.New(svc, httpapi.Options{Log: logger})
//	http.ListenAndServe("127.0.0.1:7070", h)
//
// Conventions:
//   - Authentication: `Authorization: Bearer <person token>`. A missing,
//     unknown, revoked or expired token, or one of a deactivated person,
//     answers 401 with `WWW-Authenticate: Bearer` (every refusal passes
//     through authFailed). Person routes need an admin (403, reason
//     admin_required); token routes act on the caller's own tokens. A valid
//     agent credential on an operator route answers 403 forbidden with
//     reason subject_kind_not_allowed: the caller is known, but is the wrong
//     kind of principal (as on the agent-only heartbeat
//     route, where the owner gets the same 403; design: Heartbeat authorization).
//   - Another person's agent or todo answers 404, exactly like an unknown
//     one, so references do not leak (design: Owner only).
//   - Bodies: one strict decoder (decodeJSON) — application/json only (415),
//     at most 1 MiB (413), malformed JSON and trailing data → 400
//     invalid_argument naming the byte offset, unknown members anywhere →
//     400 unknown_member with the member's RFC 6901 pointer, wrong types →
//     400 invalid_argument with a pointer. Bad input is refused before any
//     use case runs, so it changes nothing.
//   - PATCH /v1/agents/{ref}: `handle`, `queues`, `verbs` and `scope` are
//     known members of an agent that cannot change; sending one answers 400
//     invalid_argument with its pointer (not unknown_member: the member is
//     not a typo, the scope is immutable by design).
//   - Query parameters: every route lists the ones it takes (Route.Query,
//     default none); wrap refuses unknown or repeated parameters, after
//     authentication and before the handler, with 400 invalid_argument
//     naming the parameter (no pointer). Bad values answer the same way.
//   - Responses: single objects as themselves, lists as {"items": [...]}.
//     Errors are RFC 9457 problem documents (see Problem and StatusOf).
//   - Unknown paths answer a 404 problem, a known path with another method a
//     405 problem (code method_not_allowed) with an Allow header.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	apidoc "github.com/rollcall/rollcall/api"
	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// Route describes one route of the API: what registration and the
// OpenAPI consistency test both read.
type Route struct {
	Method      string // "GET", "POST", …
	Path        string // ServeMux path pattern, e.g. "/v1/agents/{ref}"
	OperationID string // the operationId in api/openapi.yaml
	Auth        bool   // needs a person's bearer token
	// Query lists the query parameters the route takes, in the order the
	// errors name them; any other parameter (or one given twice) answers
	// 400 before the handler runs. nil = none.
	Query []string
}

type handlerFunc func(a *api, w http.ResponseWriter, r *http.Request, by domain.Person) error

type routeEntry struct {
	Route
	handle handlerFunc
}

// routes is the one table of the API's routes. New registers exactly these;
// the OpenAPI test checks the document against exactly these.
var routes = []routeEntry{
	{Route{"GET", "/healthz", "getHealth", false, nil}, (*api).getHealth},
	{Route{"GET", "/readyz", "getReady", false, nil}, (*api).getReady},
	{Route{"GET", "/v1/openapi.yaml", "getOpenAPI", false, nil}, (*api).getOpenAPI},
	{Route{"POST", "/v1/agents", "vendAgent", true, nil}, createCall((*app.Service).Vend, func(res app.VendResult) string { return "/v1/agents/" + res.Agent.ID })},
	{Route{"GET", "/v1/agents", "listAgents", true, []string{"owner", "limit", "cursor"}}, (*api).listAgents},
	{Route{"GET", "/v1/agents/{ref}", "getAgent", true, nil}, pathCall(http.StatusOK, "ref", (*app.Service).OwnedAgent)},
	{Route{"PATCH", "/v1/agents/{ref}", "updateAgent", true, nil}, (*api).updateAgent},
	{Route{"DELETE", "/v1/agents/{ref}", "revokeAgent", true, nil}, pathCall(http.StatusOK, "ref", (*app.Service).RevokeAgent)},
	{Route{"POST", "/v1/agents/{ref}/credentials", "rotateCredential", true, nil}, pathCall(http.StatusCreated, "ref", (*app.Service).RotateCredential)},
	{Route{"POST", "/v1/agents/{ref}/todos", "pushTodo", true, nil}, (*api).pushTodo},
	{Route{"GET", "/v1/agents/{ref}/todos", "listAgentTodos", true, []string{"queue", "state", "limit", "cursor"}}, (*api).listAgentTodos},
	{Route{"GET", "/v1/todos/{id}", "getTodo", true, nil}, pathCall(http.StatusOK, "id", (*app.Service).GetTodo)},
	// Pools (design: Pools): the person's own, addressed by name.
	{Route{"POST", "/v1/pools", "createPool", true, nil}, createCall((*app.Service).CreatePool, func(p domain.Pool) string { return "/v1/pools/" + p.Name })},
	{Route{"GET", "/v1/pools", "listPools", true, []string{"limit", "cursor"}}, pageCall("pool", (*app.Service).ListPools, func(p domain.Pool) string { return p.Name })},
	{Route{"GET", "/v1/pools/{name}", "getPool", true, nil}, pathCall(http.StatusOK, "name", (*app.Service).GetPool)},
	{Route{"PATCH", "/v1/pools/{name}", "updatePool", true, nil}, pathBodyCall("name", (*app.Service).UpdatePool)},
	{Route{"DELETE", "/v1/pools/{name}", "deletePool", true, nil}, pathCall(http.StatusOK, "name", (*app.Service).DeletePool)},
	{Route{"POST", "/v1/pools/{name}/todos", "pushPoolTodo", true, nil}, (*api).pushPoolTodo},
	{Route{"GET", "/v1/pools/{name}/todos", "listPoolTodos", true, []string{"limit", "cursor"}}, (*api).listPoolTodos},
	// Pool grants (design: Pool grants): the agent's owner (or an admin) lets another person pool it.
	{Route{"POST", "/v1/agents/{ref}/pool-grants", "grantPool", true, nil}, (*api).grantPool},
	{Route{"GET", "/v1/agents/{ref}/pool-grants", "listPoolGrants", true, []string{"limit", "cursor"}}, (*api).listPoolGrants},
	{Route{"DELETE", "/v1/agents/{ref}/pool-grants/{person}", "revokePoolGrant", true, nil}, (*api).revokePoolGrant},
	{Route{"GET", "/v1/agents/{ref}/presence", "getPresence", true, nil}, pathCall(http.StatusOK, "ref", (*app.Service).GetPresence)},
	{Route{"PUT", "/v1/agents/{ref}/presence", "setPresence", true, nil}, pathBodyCall("ref", (*app.Service).SetPresence)},
	{Route{"DELETE", "/v1/agents/{ref}/presence", "clearPresence", true, nil}, pathCall(http.StatusOK, "ref", (*app.Service).ClearPresence)},
	{Route{"PUT", "/v1/agents/{ref}/shift", "setShift", true, nil}, (*api).setShift},
	{Route{"POST", "/v1/agents/{agent}/heartbeat", "sendHeartbeat", true, nil}, (*api).sendHeartbeat},
	{Route{"GET", "/v1/agents/{ref}/status", "getAgentStatus", true, nil}, pathCall(http.StatusOK, "ref", (*app.Service).AgentStatus)},
	{Route{"GET", "/v1/events", "streamEvents", true, nil}, (*api).streamEvents},
	{Route{"GET", "/v1/audit", "listAudit", true, []string{"agent", "after", "limit", "cursor"}}, (*api).listAudit},
	{Route{"GET", "/v1/audit/verify", "verifyAudit", true, nil}, (*api).verifyAudit},
	// Persons and personal tokens (design: Persons and roles, Personal tokens). Person
	// routes are for admins (403 forbidden, reason admin_required, for a
	// member; a member may read itself with GET /v1/persons/{id}); token
	// routes act on the caller's own tokens, so another person's token id
	// answers 404.
	{Route{"POST", "/v1/persons", "createPerson", true, nil}, createCall((*app.Service).CreatePerson, func(res app.PersonCreated) string { return "/v1/persons/" + res.Person.ID })},
	{Route{"GET", "/v1/persons", "listPersons", true, []string{"limit", "cursor"}}, pageCall("person", (*app.Service).ListPersons, func(p domain.Person) string { return p.ID })},
	{Route{"GET", "/v1/persons/{id}", "getPerson", true, nil}, pathCall(http.StatusOK, "id", (*app.Service).GetPerson)},
	{Route{"PATCH", "/v1/persons/{id}", "updatePerson", true, nil}, pathBodyCall("id", (*app.Service).UpdatePerson)},
	{Route{"POST", "/v1/tokens", "createToken", true, nil}, createCall((*app.Service).CreateToken, nil)},
	{Route{"GET", "/v1/tokens", "listTokens", true, []string{"limit", "cursor"}}, pageCall("token", (*app.Service).ListTokens, func(t domain.PersonToken) string { return t.ID })},
	{Route{"DELETE", "/v1/tokens/{id}", "revokeToken", true, nil}, pathCall(http.StatusOK, "id", (*app.Service).RevokeToken)},
}

// selfAuthenticated lists the routes that need a bearer token but resolve
// it themselves: the heartbeat is for an agent credential, not a person's.
var selfAuthenticated = map[string]bool{"sendHeartbeat": true}

// The routes that only decode their input, call one use case and answer its
// result are built by these adapters; each answers the result as JSON, or
// the use case's error.

// pathCall answers status with use(by, the path value param).
func pathCall[T any](status int, param string, use func(*app.Service, context.Context, domain.Person, string) (T, error)) handlerFunc {
	return func(a *api, w http.ResponseWriter, r *http.Request, by domain.Person) error {
		v, err := use(a.svc, r.Context(), by, r.PathValue(param))
		return answer(w, status, v, err)
	}
}

// pathBodyCall answers 200 with use(by, the path value param, the decoded
// body).
func pathBodyCall[In, T any](param string, use func(*app.Service, context.Context, domain.Person, string, In) (T, error)) handlerFunc {
	return func(a *api, w http.ResponseWriter, r *http.Request, by domain.Person) error {
		var in In
		if err := decodeJSON(w, r, &in); err != nil {
			return err
		}
		v, err := use(a.svc, r.Context(), by, r.PathValue(param), in)
		return answer(w, http.StatusOK, v, err)
	}
}

// createCall answers 201 with use(by, the decoded body), with a Location
// header of location(result) unless location is nil.
func createCall[In, T any](use func(*app.Service, context.Context, domain.Person, In) (T, error), location func(T) string) handlerFunc {
	return func(a *api, w http.ResponseWriter, r *http.Request, by domain.Person) error {
		var in In
		if err := decodeJSON(w, r, &in); err != nil {
			return err
		}
		v, err := use(a.svc, r.Context(), by, in)
		if err == nil && location != nil {
			w.Header().Set("Location", location(v))
		}
		return answer(w, http.StatusCreated, v, err)
	}
}

// pageCall answers one page (limit and cursor, see writePageOf) of the
// whole list use(by) returns; key is an item's cursor key.
func pageCall[T any](kind string, use func(*app.Service, context.Context, domain.Person) ([]T, error), key func(T) string) handlerFunc {
	return func(a *api, w http.ResponseWriter, r *http.Request, by domain.Person) error {
		all, err := use(a.svc, r.Context(), by)
		return answerPage(w, r, kind, all, err, key)
	}
}

// Routes returns the routes New registers, in table order.
func Routes() []Route {
	out := make([]Route, len(routes))
	for i, r := range routes {
		out[i] = r.Route
		out[i].Query = slices.Clone(r.Query)
	}
	return out
}

// OpenAPI returns the embedded OpenAPI 3.1 document (YAML) that
// GET /v1/openapi.yaml serves.
func OpenAPI() []byte { return apidoc.OpenAPI }

type api struct {
	svc   *app.Service
	log   *slog.Logger
	ready func(ctx context.Context) error
	mux   *http.ServeMux
}

// New returns the handler of the REST API (all routes of Routes) wrapped in
// request logging and panic recovery. It is safe for concurrent use.
func New(svc *app.Service, opts Options) http.Handler {
	a := &api{svc: svc, log: opts.Log, ready: opts.Ready, mux: http.NewServeMux()}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.ready == nil {
		a.ready = a.storeReachable
	}
	for _, rt := range routes {
		a.mux.Handle(rt.Method+" "+rt.Path, a.wrap(rt))
	}
	return a.logRequests(http.HandlerFunc(a.serve))
}

// serve routes through the mux, answering unknown paths and methods with
// problem documents instead of the mux's plain-text 404/405.
func (a *api) serve(w http.ResponseWriter, r *http.Request) {
	if _, pattern := a.mux.Handler(r); pattern != "" {
		a.mux.ServeHTTP(w, r)
		return
	}
	// Let the mux decide between 404, 405 (with Allow) and a redirect to
	// the cleaned path, then render its verdict as a problem.
	probe := &probeWriter{h: http.Header{}}
	h, _ := a.mux.Handler(r)
	h.ServeHTTP(probe, r)
	switch probe.status {
	case http.StatusMethodNotAllowed:
		allow := probe.h.Get("Allow")
		w.Header().Set("Allow", allow)
		writeProblem(w, r, http.StatusMethodNotAllowed, domain.Errorf(domain.CodeMethodNotAllowed,
			"method %s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, allow))
	case http.StatusNotFound:
		writeProblem(w, r, http.StatusNotFound, domain.Errorf(domain.CodeNotFound, "no route %s %s; see GET /v1/openapi.yaml", r.Method, r.URL.Path))
	default: // redirects
		for k, v := range probe.h {
			w.Header()[k] = v
		}
		w.WriteHeader(probe.status)
	}
}

// probeWriter records the status and headers of the mux's own handlers.
type probeWriter struct {
	h      http.Header
	status int
}

func (p *probeWriter) Header() http.Header { return p.h }
func (p *probeWriter) WriteHeader(s int) {
	if p.status == 0 {
		p.status = s
	}
}
func (p *probeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}

// wrap authenticates (for Auth routes), checks the query parameters
// against rt.Query, runs the handler and renders its error as a problem.
// (A self-authenticated route has its query checked before the handler
// authenticates.)
func (a *api) wrap(rt routeEntry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var by domain.Person
		if rt.Auth && !selfAuthenticated[rt.OperationID] {
			p, err := a.authenticate(r)
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			by = p
		}
		if _, err := queryParams(r, rt.Query...); err != nil {
			a.writeError(w, r, err)
			return
		}
		if err := rt.handle(a, w, r, by); err != nil {
			a.writeError(w, r, err)
		}
	})
}

// writeError renders err as a problem document. A *domain.Error keeps its
// code, detail, pointer and reason; an Unavailable store error is logged
// and answered 503 unavailable with Retry-After; anything else (and code
// internal) is logged with its text and answered with a generic 500 that
// leaks nothing.
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var se *statusError
	if errors.As(err, &se) { // built by this package: safe to show
		writeProblem(w, r, se.status, se.err)
		return
	}
	var wb *wholeBodyError
	if errors.As(err, &wb) {
		writeProblemDoc(w, NewProblem(http.StatusBadRequest, wb.err, r.URL.Path), true)
		return
	}
	var de *domain.Error
	switch {
	case errors.As(err, &de) && de.Code != domain.CodeInternal:
	case Unavailable(r.Context(), err):
		a.log.Warn("request failed: the store is unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		de = unavailableError
	default:
		level := slog.LevelError
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			level = slog.LevelInfo // the client went away
		}
		a.log.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		de = &domain.Error{Code: domain.CodeInternal, Detail: "internal error; the server log has the cause"}
	}
	if de.Code == domain.CodeUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(UnavailableRetryAfter/time.Second)))
	}
	if de.Code == domain.CodeUnauthenticated {
		v := `Bearer realm="rollcall"`
		if r.Header.Get("Authorization") != "" {
			v += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", v)
	}
	writeProblem(w, r, StatusOf(de.Code), de)
}

// authenticate resolves the bearer token of an operator route into a person
// (with Person.TokenID set). Errors: unauthenticated (missing, malformed,
// unknown, revoked or expired token; deactivated person; revoked agent
// credential), forbidden with reason subject_kind_not_allowed (a valid
// agent credential, active or not). Every failure goes through authFailed.
func (a *api) authenticate(r *http.Request) (domain.Person, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return domain.Person{}, a.authFailed(r, "missing", domain.Errorf(domain.CodeUnauthenticated, "missing Authorization header; send Authorization: Bearer <person token>"))
	}
	scheme, tok, ok := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return domain.Person{}, a.authFailed(r, "malformed", domain.Errorf(domain.CodeUnauthenticated, "the Authorization header must be Bearer <person token>"))
	}
	if strings.HasPrefix(tok, app.AgentTokenPrefix) {
		_, err := a.svc.AuthenticateAgent(r.Context(), tok)
		if err != nil && domain.CodeOf(err) != domain.CodeForbidden {
			return domain.Person{}, a.authFailed(r, "invalid_agent_credential", err)
		}
		return domain.Person{}, &domain.Error{Code: domain.CodeForbidden, Reason: "subject_kind_not_allowed",
			Detail: "this route is for persons; an agent credential was presented (agents use /mcp and their heartbeat)"}
	}
	p, err := a.svc.AuthenticatePerson(r.Context(), tok)
	if err != nil {
		reason := "invalid_token"
		var de *domain.Error
		if errors.As(err, &de) && de.Reason != "" {
			reason = de.Reason
		}
		return domain.Person{}, a.authFailed(r, reason, err)
	}
	return p, nil
}

// authFailed is the one exit of every failed authentication of an
// operator route: reason is a short machine word (missing, malformed,
// invalid_token, token_revoked, token_expired, person_deactivated,
// invalid_agent_credential); err is what the client receives. Rate
// limiting and logging of refusals hook in here. It never sees the token.
func (a *api) authFailed(r *http.Request, reason string, err error) error {
	if domain.CodeOf(err) == domain.CodeInternal {
		return err
	}
	a.log.Debug("authentication refused", "reason", reason, "method", r.Method, "path", r.URL.Path)
	return err
}

// storeReachable is the default readiness check: one indexed query for the
// agents of an owner that cannot exist.
func (a *api) storeReachable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return a.svc.StoreReachable(ctx)
}

// logRequests logs one record per request and turns a panic into a 500
// problem (the stack goes to the log).
func (a *api) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				a.log.Error("handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
				if rec.status == 0 {
					writeProblem(rec, r, http.StatusInternalServerError, &domain.Error{Code: domain.CodeInternal, Detail: "internal error; the server log has the cause"})
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			a.log.LogAttrs(r.Context(), slog.LevelInfo, "http request",
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", status), slog.Duration("duration", time.Since(start)),
				slog.Int64("bytes", rec.bytes), slog.String("client", clientHost(r.RemoteAddr)))
		}()
		next.ServeHTTP(rec, r)
	})
}

// clientHost is the client address of a request without its port (behind
// a trusted proxy the edge has already put the forwarded client there).
func clientHost(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}

// statusRecorder remembers the status and size of a response. Unwrap lets
// http.ResponseController reach the underlying writer (flush for SSE).
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.bytes += int64(n)
	return n, err
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
