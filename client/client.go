// Package client is the public typed Go client for Rollcall's operator REST
// API (api/openapi.yaml), import path github.com/rollcall/rollcall/client.
// The rollcall CLI's client commands are built on it, so there is one client,
// not two.
//
// Construct one with the server's base URL and a person token:
//
//	c := client.New("http://127.0.0.1:7070", os.Getenv("ROLLCALL_TOKEN"))
//	res, err := c.VendAgent(ctx, wire.VendInput{Handle: "builder", Queues: []string{"build"}})
//
// Requests and answers are the api/wire types.
//
// Errors: a response with an error status is returned as *client.Error, which
// carries the HTTP status, the RFC 9457 problem document's type, title and
// instance, and unwraps to the decoded error (code, detail, pointer, reason;
// its message is "<code>: <detail> (at <pointer>)"). StatusOf(err) returns the
// HTTP status of an *Error in err's chain, or 0:
//
//	if client.StatusOf(err) == http.StatusNotFound { … }
//	var ce *client.Error
//	if errors.As(err, &ce) { … ce.Status, ce.Err.Code, ce.Err.Detail … }
//
// Transport failures are returned as they are, wrapped with the method and URL.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/domain"
)

// Client calls one Rollcall server with one person's token. It is safe for
// concurrent use.
type Client struct {
	base  string
	token string
	// HTTPClient sends the requests; New sets one with a 30 s timeout.
	HTTPClient *http.Client
	// UserAgent is sent with every request.
	UserAgent string
}

// New returns a client for the server at baseURL (e.g.
// "http://127.0.0.1:7070"; a trailing slash is ignored) that authenticates
// with the person token (sent as `Authorization: Bearer <token>`; "" sends
// no header).
func New(baseURL, token string) *Client {
	return &Client{
		base:       strings.TrimRight(baseURL, "/"),
		token:      token,
		HTTPClient: &http.Client{Timeout: 30 * time.Second},
		UserAgent:  "rollcall-client",
	}
}

// Error is an error response of the API: the HTTP status and the problem
// document's code, detail, pointer and reason as a *domain.Error (returned
// by Unwrap). Its message is the domain error's: "<code>: <detail> (at
// <pointer>)".
type Error struct {
	Status   int    // HTTP status, e.g. 404
	Type     string // the problem type URI
	Title    string
	Instance string
	Err      *domain.Error
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the *domain.Error.
func (e *Error) Unwrap() error { return e.Err }

// Code is the problem's code, e.g. "not_found" or "invalid_argument".
func (e *Error) Code() string { return string(e.Err.Code) }

// Detail is the problem's human-readable detail.
func (e *Error) Detail() string { return e.Err.Detail }

// Pointer is the RFC 6901 pointer of the request member the problem is
// about, or "".
func (e *Error) Pointer() string { return e.Err.Pointer }

// Reason is the problem's machine-readable reason, or "".
func (e *Error) Reason() string { return e.Err.Reason }

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// send makes one request (see do) and returns its answer decoded into a T.
func send[T any](c *Client, ctx context.Context, method, path string, q url.Values, body any) (T, error) {
	var out T
	_, err := c.do(ctx, method, path, q, body, &out)
	return out, err
}

// items makes one GET of a listing (see do) and returns its items.
func items[T any](c *Client, ctx context.Context, path string, q url.Values) ([]T, error) {
	out, err := send[listOf[T]](c, ctx, http.MethodGet, path, q, nil)
	return out.Items, err
}

// --- agents ---

// VendAgent vends an agent (POST /v1/agents). The result holds the
// credential, shown only this once.
// Errors: invalid_argument / unknown_member (400, with pointer), conflict
// (409, handle taken), unauthenticated (401), forbidden (403).
func (c *Client) VendAgent(ctx context.Context, in wire.VendInput) (wire.VendResult, error) {
	return send[wire.VendResult](c, ctx, http.MethodPost, "/v1/agents", nil, in)
}

// ListAgents lists all the caller's agents ordered by handle (GET
// /v1/agents, following next_cursor over every page).
func (c *Client) ListAgents(ctx context.Context) ([]wire.Agent, error) {
	var all []wire.Agent
	q := url.Values{"limit": {"500"}}
	for {
		var out listOf[wire.Agent]
		if _, err := c.do(ctx, http.MethodGet, "/v1/agents", q, nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Items...)
		if out.NextCursor == "" {
			if all == nil {
				all = []wire.Agent{}
			}
			return all, nil
		}
		q.Set("cursor", out.NextCursor)
	}
}

// GetAgent returns one agent by id or handle (GET /v1/agents/{ref}).
// Errors: not_found (404; also another person's agent).
func (c *Client) GetAgent(ctx context.Context, ref string) (wire.Agent, error) {
	return send[wire.Agent](c, ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(ref), nil, nil)
}

// UpdateAgent changes name, billing configuration or the active flag
// (PATCH /v1/agents/{ref}); nil fields are unchanged.
// Errors: not_found, invalid_argument, conflict (revoked).
func (c *Client) UpdateAgent(ctx context.Context, ref string, in wire.UpdateInput) (wire.Agent, error) {
	return send[wire.Agent](c, ctx, http.MethodPatch, "/v1/agents/"+url.PathEscape(ref), nil, in)
}

// RevokeAgent revokes the agent permanently (DELETE /v1/agents/{ref}) and
// returns it with RevokedAt set. Errors: not_found, conflict (already
// revoked).
func (c *Client) RevokeAgent(ctx context.Context, ref string) (wire.Agent, error) {
	return send[wire.Agent](c, ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(ref), nil, nil)
}

// RotateCredential replaces the agent's credentials with a new one
// (POST /v1/agents/{ref}/credentials), shown only this once.
// Errors: not_found, conflict (revoked).
func (c *Client) RotateCredential(ctx context.Context, ref string) (wire.RotateResult, error) {
	return send[wire.RotateResult](c, ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(ref)+"/credentials", nil, nil)
}

// --- todos ---

// PushTodo pushes a todo to the agent (POST /v1/agents/{ref}/todos).
// created is false when a live todo with the same idempotency key already
// existed and was returned instead (HTTP 200 rather than 201).
// Errors: invalid_argument (e.g. queue outside the scope, at /queue),
// unknown_member, not_found, conflict (revoked agent).
func (c *Client) PushTodo(ctx context.Context, ref string, in wire.PushInput) (t wire.Todo, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(ref)+"/todos", nil, in, &t)
	return t, status == http.StatusCreated, err
}

// ListTodos lists the agent's todos oldest first
// (GET /v1/agents/{ref}/todos); zero filter fields do not filter (limit 0 =
// the server's default, 50).
func (c *Client) ListTodos(ctx context.Context, ref string, f wire.TodoFilter) ([]wire.Todo, error) {
	q := url.Values{}
	if f.Queue != "" {
		q.Set("queue", f.Queue)
	}
	if f.State != "" {
		q.Set("state", f.State)
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return items[wire.Todo](c, ctx, "/v1/agents/"+url.PathEscape(ref)+"/todos", q)
}

// GetTodo returns one todo of one of the caller's agents (GET /v1/todos/{id}).
// Errors: not_found.
func (c *Client) GetTodo(ctx context.Context, id string) (wire.Todo, error) {
	return send[wire.Todo](c, ctx, http.MethodGet, "/v1/todos/"+url.PathEscape(id), nil, nil)
}

// --- audit ---

// ListAudit reads audit entries in ascending seq (GET /v1/audit). Without
// AgentRef the whole log is read, which needs an admin (forbidden
// otherwise).
func (c *Client) ListAudit(ctx context.Context, f wire.AuditFilter) ([]wire.AuditEntry, error) {
	q := url.Values{}
	if f.AgentRef != "" {
		q.Set("agent", f.AgentRef)
	}
	if f.AfterSeq != 0 {
		q.Set("after", strconv.FormatInt(f.AfterSeq, 10))
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return items[wire.AuditEntry](c, ctx, "/v1/audit", q)
}

// VerifyAudit verifies the audit hash chain (GET /v1/audit/verify). A broken
// chain is not an error: it is a result with OK false.
func (c *Client) VerifyAudit(ctx context.Context) (wire.AuditVerifyResult, error) {
	return send[wire.AuditVerifyResult](c, ctx, http.MethodGet, "/v1/audit/verify", nil, nil)
}

// Ready reports whether the server is ready (GET /readyz): nil when it is.
func (c *Client) Ready(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
	return err
}

// --- presence and status ---

// GetPresence returns the agent's effective presence, source, until, shift,
// pending count and held todos (GET /v1/agents/{ref}/presence).
func (c *Client) GetPresence(ctx context.Context, ref string) (wire.AgentPresence, error) {
	return send[wire.AgentPresence](c, ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, nil)
}

// SetPresence puts the agent in or out with an operator override
// (PUT /v1/agents/{ref}/presence). Errors: invalid_argument (/presence,
// /until), not_found, conflict (revoked).
func (c *Client) SetPresence(ctx context.Context, ref string, in wire.PresenceInput) (wire.AgentPresence, error) {
	return send[wire.AgentPresence](c, ctx, http.MethodPut, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, in)
}

// ClearPresence clears any override (DELETE /v1/agents/{ref}/presence).
func (c *Client) ClearPresence(ctx context.Context, ref string) (wire.AgentPresence, error) {
	return send[wire.AgentPresence](c, ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(ref)+"/presence", nil, nil)
}

// SetShift sets (nil clears) the agent's shift (PUT /v1/agents/{ref}/shift).
// Errors: invalid_argument at /shift with the grammar error.
func (c *Client) SetShift(ctx context.Context, ref string, shift *string) (wire.AgentPresence, error) {
	return send[wire.AgentPresence](c, ctx, http.MethodPut, "/v1/agents/"+url.PathEscape(ref)+"/shift", nil, map[string]*string{"shift": shift})
}

// AgentStatus returns the agent's runtime status (GET
// /v1/agents/{ref}/status): liveness state, last heartbeat, the reported billing mode,
// tool class, billing evidence, runtime and adapter, the warnings, project
// readiness and the in/out presence. Errors: not_found (unknown agent or
// another person's).
func (c *Client) AgentStatus(ctx context.Context, ref string) (wire.AgentRuntimeStatus, error) {
	return send[wire.AgentRuntimeStatus](c, ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(ref)+"/status", nil, nil)
}

// --- hooks (webhook intake) ---

// CreateHook creates a webhook endpoint (POST /v1/hooks); the result holds
// the secret, shown only this once. Errors: invalid_argument (400, with
// pointer), not_found (the agent), conflict (revoked agent).
func (c *Client) CreateHook(ctx context.Context, in wire.HookInput) (wire.HookSecretResult, error) {
	return send[wire.HookSecretResult](c, ctx, http.MethodPost, "/v1/hooks", nil, in)
}

// ListHooks lists the caller's hooks, oldest first (GET /v1/hooks), only
// those of agent when it is not "". Errors: not_found (agent).
func (c *Client) ListHooks(ctx context.Context, agent string) ([]wire.HookView, error) {
	q := url.Values{}
	if agent != "" {
		q.Set("agent", agent)
	}
	return items[wire.HookView](c, ctx, "/v1/hooks", q)
}

// GetHook returns one hook with its last deliveries (GET /v1/hooks/{id}).
// Errors: not_found (also another person's hook).
func (c *Client) GetHook(ctx context.Context, id string) (wire.HookView, error) {
	return send[wire.HookView](c, ctx, http.MethodGet, "/v1/hooks/"+url.PathEscape(id), nil, nil)
}

// RotateHookSecret replaces the hook's secret (POST /v1/hooks/{id}/secret);
// the new one is shown only this once. Errors: not_found.
func (c *Client) RotateHookSecret(ctx context.Context, id string) (wire.HookSecretResult, error) {
	return send[wire.HookSecretResult](c, ctx, http.MethodPost, "/v1/hooks/"+url.PathEscape(id)+"/secret", nil, nil)
}

// DeleteHook deletes the hook (DELETE /v1/hooks/{id}) and returns it as it
// was. Errors: not_found.
func (c *Client) DeleteHook(ctx context.Context, id string) (wire.HookView, error) {
	return send[wire.HookView](c, ctx, http.MethodDelete, "/v1/hooks/"+url.PathEscape(id), nil, nil)
}

// --- pools (docs/design.md, "Pools") ---

// CreatePool creates a pool of the caller's agents (POST /v1/pools).
// Errors: invalid_argument (with pointer), conflict (name taken).
func (c *Client) CreatePool(ctx context.Context, in wire.PoolInput) (wire.Pool, error) {
	return send[wire.Pool](c, ctx, http.MethodPost, "/v1/pools", nil, in)
}

// ListPools lists the caller's pools by name (GET /v1/pools), every page.
func (c *Client) ListPools(ctx context.Context) ([]wire.Pool, error) {
	return items[wire.Pool](c, ctx, "/v1/pools", url.Values{})
}

// GetPool returns one of the caller's pools (GET /v1/pools/{name}).
func (c *Client) GetPool(ctx context.Context, name string) (wire.Pool, error) {
	return send[wire.Pool](c, ctx, http.MethodGet, "/v1/pools/"+url.PathEscape(name), nil, nil)
}

// DeletePool deletes one of the caller's pools (DELETE /v1/pools/{name}).
// Errors: not_found, conflict (live todos).
func (c *Client) DeletePool(ctx context.Context, name string) (wire.Pool, error) {
	return send[wire.Pool](c, ctx, http.MethodDelete, "/v1/pools/"+url.PathEscape(name), nil, nil)
}

// UpdatePool replaces a pool's members (PATCH /v1/pools/{name}); its name
// and queues stay. Errors: not_found, invalid_argument (at /members/N).
func (c *Client) UpdatePool(ctx context.Context, name string, in wire.PoolUpdate) (wire.Pool, error) {
	return send[wire.Pool](c, ctx, http.MethodPatch, "/v1/pools/"+url.PathEscape(name), nil, in)
}

// PushPoolTodo pushes a todo to a pool (POST /v1/pools/{name}/todos), as
// PushTodo does to an agent: created is false when a live todo of the
// pool already had the idempotency key.
func (c *Client) PushPoolTodo(ctx context.Context, name string, in wire.PushInput) (t wire.Todo, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/pools/"+url.PathEscape(name)+"/todos", nil, in, &t)
	return t, status == http.StatusCreated, err
}

// ListPoolTodos lists a pool's live todos oldest first
// (GET /v1/pools/{name}/todos), every page.
func (c *Client) ListPoolTodos(ctx context.Context, name string) ([]wire.Todo, error) {
	return items[wire.Todo](c, ctx, "/v1/pools/"+url.PathEscape(name)+"/todos", url.Values{})
}

// GrantPool lets person (an id) make the agent a member of their pools
// (POST /v1/agents/{ref}/pool-grants; docs/design.md, "Pool grants"):
// created is false when the agent had granted the person already and the
// stored grant is returned (HTTP 200 rather than 201). Errors: not_found,
// invalid_argument (at /person), forbidden (grant_to_self), conflict
// (revoked agent).
func (c *Client) GrantPool(ctx context.Context, ref, person string) (g wire.PoolGrant, created bool, err error) {
	status, err := c.do(ctx, http.MethodPost, "/v1/agents/"+url.PathEscape(ref)+"/pool-grants", nil, wire.PoolGrantInput{Person: person}, &g)
	return g, status == http.StatusCreated, err
}

// ListPoolGrants lists the agent's pool grants oldest first
// (GET /v1/agents/{ref}/pool-grants), every page.
func (c *Client) ListPoolGrants(ctx context.Context, ref string) ([]wire.PoolGrant, error) {
	return items[wire.PoolGrant](c, ctx, "/v1/agents/"+url.PathEscape(ref)+"/pool-grants", url.Values{})
}

// RevokePoolGrant revokes the agent's grant to person
// (DELETE /v1/agents/{ref}/pool-grants/{person}): the agent leaves that
// person's pools. It returns the grant as it was. Errors: not_found.
func (c *Client) RevokePoolGrant(ctx context.Context, ref, person string) (wire.PoolGrant, error) {
	return send[wire.PoolGrant](c, ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(ref)+"/pool-grants/"+url.PathEscape(person), nil, nil)
}

// --- persons and tokens ---

// CreatePerson creates a person and its first token, shown once
// (POST /v1/persons; admin). Errors: forbidden, invalid_argument.
func (c *Client) CreatePerson(ctx context.Context, in wire.PersonInput) (wire.PersonCreated, error) {
	return send[wire.PersonCreated](c, ctx, http.MethodPost, "/v1/persons", nil, in)
}

// ListPersons lists every person (GET /v1/persons; admin).
func (c *Client) ListPersons(ctx context.Context) ([]wire.Person, error) {
	return items[wire.Person](c, ctx, "/v1/persons", nil)
}

// UpdatePerson renames, re-roles, deactivates or reactivates a person
// (PATCH /v1/persons/{id}; admin). Errors: forbidden, not_found,
// invalid_argument, conflict (reason last_admin).
func (c *Client) UpdatePerson(ctx context.Context, id string, in wire.PersonUpdate) (wire.Person, error) {
	return send[wire.Person](c, ctx, http.MethodPatch, "/v1/persons/"+url.PathEscape(id), nil, in)
}

// CreateToken mints a personal token for the caller, shown once
// (POST /v1/tokens). Errors: invalid_argument.
func (c *Client) CreateToken(ctx context.Context, in wire.TokenInput) (wire.MintedToken, error) {
	return send[wire.MintedToken](c, ctx, http.MethodPost, "/v1/tokens", nil, in)
}

// ListTokens lists the caller's unrevoked tokens (GET /v1/tokens).
func (c *Client) ListTokens(ctx context.Context) ([]wire.PersonToken, error) {
	return items[wire.PersonToken](c, ctx, "/v1/tokens", nil)
}

// RevokeToken revokes one of the caller's tokens (DELETE /v1/tokens/{id}).
// Errors: not_found.
func (c *Client) RevokeToken(ctx context.Context, id string) (wire.PersonToken, error) {
	return send[wire.PersonToken](c, ctx, http.MethodDelete, "/v1/tokens/"+url.PathEscape(id), nil, nil)
}

// ListAgentsOf lists another person's agents (GET /v1/agents?owner=…;
// admin). Errors: forbidden.
func (c *Client) ListAgentsOf(ctx context.Context, ownerID string) ([]wire.Agent, error) {
	return items[wire.Agent](c, ctx, "/v1/agents", url.Values{"owner": {ownerID}})
}

// GetPerson returns one person (GET /v1/persons/{id}).
func (c *Client) GetPerson(ctx context.Context, id string) (wire.Person, error) {
	return send[wire.Person](c, ctx, http.MethodGet, "/v1/persons/"+url.PathEscape(id), nil, nil)
}

// --- plumbing ---

type listOf[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// problem mirrors the server's RFC 9457 problem document.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance"`
	Code     string `json:"code"`
	Pointer  string `json:"pointer"`
	Reason   string `json:"reason"`
}

// maxResponse bounds how much of a response is read (the API's largest
// answers are lists of at most 1000 entries).
const maxResponse = 64 << 20

// do sends one request: body (if not nil) as JSON, the response decoded
// into out (if not nil) on a 2xx status. It returns the status.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) (int, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.HTTPClient.Do(req)
	if err != nil {
		return 0, err // *url.Error names the method and URL
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: reading the response: %w", method, u, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeProblem(resp, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decoding the response: %w", method, u, err)
		}
	}
	return resp.StatusCode, nil
}

// decodeProblem turns an error response into *Error. A body that is not a
// problem document (a proxy's HTML page, say) still gives an *Error whose
// code follows the status.
func decodeProblem(resp *http.Response, data []byte) error {
	e := &Error{Status: resp.StatusCode}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var p problem
	if (mt == "application/problem+json" || mt == "application/json") && json.Unmarshal(data, &p) == nil && p.Code != "" {
		e.Type, e.Title, e.Instance = p.Type, p.Title, p.Instance
		e.Err = &domain.Error{Code: domain.Code(p.Code), Detail: p.Detail, Pointer: p.Pointer, Reason: p.Reason}
		return e
	}
	snippet := strings.TrimSpace(string(data))
	if len(snippet) > 200 {
		snippet = snippet[:200] + "…"
	}
	detail := fmt.Sprintf("HTTP %d %s from %s", resp.StatusCode, http.StatusText(resp.StatusCode), resp.Request.URL.Redacted())
	if snippet != "" {
		detail += ": " + snippet
	}
	e.Err = &domain.Error{Code: codeForStatus(resp.StatusCode), Detail: detail}
	return e
}

func codeForStatus(s int) domain.Code {
	switch {
	case s == http.StatusUnauthorized:
		return domain.CodeUnauthenticated
	case s == http.StatusForbidden:
		return domain.CodeForbidden
	case s == http.StatusNotFound:
		return domain.CodeNotFound
	case s == http.StatusConflict:
		return domain.CodeConflict
	case s == http.StatusTooManyRequests:
		return domain.CodeRateLimited
	case s >= 400 && s < 500:
		return domain.CodeInvalidArgument
	}
	return domain.CodeInternal
}
