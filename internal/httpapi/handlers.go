package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// Every list response is an app.Page: {"items": [...], "next_cursor"?}.

// --- probes and the document ---

type health struct {
	Status string `json:"status"`
}

func (a *api) getHealth(w http.ResponseWriter, _ *http.Request, _ domain.Person) error {
	return writeJSON(w, http.StatusOK, health{Status: "ok"})
}

func (a *api) getReady(w http.ResponseWriter, r *http.Request, _ domain.Person) error {
	if err := a.ready(r.Context()); err != nil {
		a.log.Warn("not ready", "err", err)
		detail := "not ready: the store is not reachable"
		if de, ok := errors.AsType[*domain.Error](err); ok {
			detail = "not ready: " + de.Detail
		}
		return &statusError{http.StatusServiceUnavailable, &domain.Error{Code: domain.CodeInternal, Detail: detail}}
	}
	return writeJSON(w, http.StatusOK, health{Status: "ready"})
}

func (a *api) getOpenAPI(w http.ResponseWriter, _ *http.Request, _ domain.Person) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(OpenAPI())
	return nil
}

// --- agents ---

func (a *api) listAgents(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	q := r.URL.Query() // wrap checked the names
	limit, err := positiveInt(q, "limit")
	if err != nil {
		return err
	}
	page, err := a.svc.ListAgentsPage(r.Context(), by, q.Get("owner"), q.Has("owner"), limit, q.Get("cursor"))
	if err != nil {
		return asQueryError(err, "limit", "cursor")
	}
	return writeJSON(w, http.StatusOK, page)
}

// updateBody is the PATCH body: the mutable members (app.UpdateInput) plus
// the immutable ones, decoded only to be refused with a clear error.
type updateBody struct {
	app.UpdateInput
	Handle json.RawMessage `json:"handle"`
	Queues json.RawMessage `json:"queues"`
	Verbs  json.RawMessage `json:"verbs"`
	Scope  json.RawMessage `json:"scope"`
}

func (a *api) updateAgent(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	var in updateBody
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"handle", in.Handle}, {"queues", in.Queues}, {"verbs", in.Verbs}, {"scope", in.Scope}} {
		if f.raw != nil {
			return domain.Errorf(domain.CodeInvalidArgument, "%s cannot be changed: the handle and the scope (queues, verbs) are fixed at vend time; vend a new agent instead", f.name).At("/" + f.name)
		}
	}
	ag, err := a.svc.UpdateAgent(r.Context(), by, r.PathValue("ref"), in.UpdateInput)
	return answer(w, http.StatusOK, ag, err)
}

// --- todos ---

// pushBody is the POST todos body: app.PushInput, whose zero max_attempts
// and idempotency_key mean "absent" (the default, no deduplication), with
// those two members as pointers so that a present 0 or "" — which the
// document forbids (minimum 1, minLength 1) — is refused, not defaulted.
type pushBody struct {
	app.PushInput
	MaxAttempts    *int    `json:"max_attempts"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// input checks the members app.PushInput cannot tell from absent and
// returns the use case's input.
func (b *pushBody) input() (app.PushInput, error) {
	in := b.PushInput
	if b.MaxAttempts != nil {
		if *b.MaxAttempts < 1 {
			return in, domain.Errorf(domain.CodeInvalidArgument, "max_attempts must be between 1 and 100, got %d; omit it for the default (%d)", *b.MaxAttempts, domain.DefaultMaxAttempts).At("/max_attempts")
		}
		in.MaxAttempts = *b.MaxAttempts
	}
	if b.IdempotencyKey != nil {
		if *b.IdempotencyKey == "" {
			return in, domain.Errorf(domain.CodeInvalidArgument, "idempotency_key must not be empty; omit it to push without deduplication").At("/idempotency_key")
		}
		in.IdempotencyKey = *b.IdempotencyKey
	}
	if bytes.Equal(in.Payload, []byte("null")) {
		in.Payload = nil // null is the same as absent
	}
	return in, nil
}

func (a *api) pushTodo(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	return pushTo(w, r, by, "ref", a.svc.PushTodo)
}

// pushPoolTodo is pushTodo to a pool (design: Pools): the same body,
// limits, idempotency key and answers.
func (a *api) pushPoolTodo(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	return pushTo(w, r, by, "name", a.svc.PushPoolTodo)
}

// pushTo decodes and checks the push body and answers push of it to the
// agent or pool the path value param names.
func pushTo(w http.ResponseWriter, r *http.Request, by domain.Person, param string,
	push func(context.Context, domain.Person, string, app.PushInput) (domain.Todo, bool, error)) error {
	var body pushBody
	if err := decodeJSON(w, r, &body); err != nil {
		return err
	}
	in, err := body.input()
	if err != nil {
		return err
	}
	return pushed(w)(push(r.Context(), by, r.PathValue(param), in))
}

// listPoolTodos answers one page of a pool's live todos (design: Pools).
func (a *api) listPoolTodos(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	all, err := a.svc.ListPoolTodos(r.Context(), by, r.PathValue("name"))
	return answerPage(w, r, "todo", all, err, func(t domain.Todo) string { return t.ID })
}

// grantPool answers a pool grant (design: Pool grants): 201 with Location
// when it created the grant, 200 with the stored one when the agent had
// granted the person already.
func (a *api) grantPool(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	var in app.PoolGrantInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	g, created, err := a.svc.GrantPool(r.Context(), by, r.PathValue("ref"), in)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/agents/"+g.AgentID+"/pool-grants/"+url.PathEscape(g.PersonID))
	}
	return writeJSON(w, status, g)
}

// listPoolGrants answers one page of the agent's pool grants.
func (a *api) listPoolGrants(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	all, err := a.svc.ListPoolGrants(r.Context(), by, r.PathValue("ref"))
	return answerPage(w, r, "pool_grant", all, err, func(g domain.PoolGrant) string { return g.PersonID })
}

// revokePoolGrant answers the revoked grant as it was.
func (a *api) revokePoolGrant(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	g, err := a.svc.RevokePoolGrant(r.Context(), by, r.PathValue("ref"), r.PathValue("person"))
	return answer(w, http.StatusOK, g, err)
}

// pushed answers a push: 201 with Location when it created the todo, 200
// with the live todo that holds the idempotency key otherwise.
func pushed(w http.ResponseWriter) func(t domain.Todo, created bool, err error) error {
	return func(t domain.Todo, created bool, err error) error {
		if err != nil {
			return err
		}
		status := http.StatusOK
		if created {
			status = http.StatusCreated
			w.Header().Set("Location", "/v1/todos/"+t.ID)
		}
		return writeJSON(w, status, t)
	}
}

func (a *api) listAgentTodos(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	q := r.URL.Query() // wrap checked the names
	f := app.TodoFilter{Queue: q.Get("queue"), State: q.Get("state")}
	var err error
	if f.Limit, err = positiveInt(q, "limit"); err != nil {
		return err
	}
	page, err := a.svc.ListAgentTodosPage(r.Context(), by, r.PathValue("ref"), f, q.Get("cursor"))
	if err != nil {
		return asQueryError(err, "queue", "state", "limit", "cursor")
	}
	return writeJSON(w, http.StatusOK, page)
}

// --- audit ---

func (a *api) listAudit(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	q := r.URL.Query() // wrap checked the names
	f := app.AuditFilter{AgentRef: q.Get("agent")}
	if q.Has("after") {
		v := q.Get("after")
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < 0 {
			return domain.Errorf(domain.CodeInvalidArgument, "query parameter after must be a sequence number ≥ 0, got %q", v)
		}
		f.AfterSeq = n
	}
	var err error
	if f.Limit, err = positiveInt(q, "limit"); err != nil {
		return err
	}
	page, err := a.svc.ListAuditPage(r.Context(), by, f, q.Get("cursor"))
	if err != nil {
		return asQueryError(err, "agent", "after", "limit", "cursor")
	}
	return writeJSON(w, http.StatusOK, page)
}

func (a *api) verifyAudit(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	res, err := a.svc.VerifyAudit(r.Context(), by)
	return answer(w, http.StatusOK, res, err)
}
