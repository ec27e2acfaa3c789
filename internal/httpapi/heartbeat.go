package httpapi

import (
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
)

// The heartbeat routes (design: Heartbeat authorization, Heartbeat rate limit, Warnings):
//
//	POST /v1/agents/{agent}/heartbeat  the agent's own credential; body agent_heartbeat.v1
//	GET  /v1/agents/{ref}/status       the owner; AgentRuntimeStatus
//
// The heartbeat route authenticates either kind of bearer token itself,
// because the authorization matrix (design: Heartbeat authorization) answers persons too: the agent itself → 200
// HeartbeatAck; its owner → 403 forbidden (reason subject_kind_not_allowed);
// any other person or agent → 404 not_found. The body is at most
// liveness.MaxBodyBytes (64 KiB, 413 beyond), application/json (415
// otherwise), and is decoded by the one decoder liveness.DecodeHeartbeat
// inside the use case. A principal over its rate limit gets 429
// rate_limited with Retry-After in seconds.

func (a *api) sendHeartbeat(w http.ResponseWriter, r *http.Request, _ domain.Person) error {
	p, err := a.bearerPrincipal(r)
	if err != nil {
		return err
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); ct == "" || err != nil || mt != "application/json" {
		return &statusError{http.StatusUnsupportedMediaType,
			domain.Errorf(domain.CodeInvalidArgument, "Content-Type must be application/json, got %q", ct)}
	}
	body, err := readLimited(w, r, liveness.MaxBodyBytes,
		domain.Errorf(domain.CodeInvalidArgument, "the heartbeat body exceeds the limit of %d bytes", liveness.MaxBodyBytes),
		func(err error) error {
			return domain.Errorf(domain.CodeInvalidArgument, "reading the request body failed: %v", err)
		})
	if err != nil {
		return err
	}
	ack, err := a.svc.Heartbeat(r.Context(), p, r.PathValue("agent"), body, app.Arrival{})
	var rl *app.RateLimitedError
	if errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.Itoa(rl.RetryAfterSeconds()))
		return rl.Err
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ack)
}

// bearerPrincipal resolves a bearer token of either kind (agent credential
// or person token). Errors: unauthenticated (401), forbidden (an inactive
// agent).
func (a *api) bearerPrincipal(r *http.Request) (domain.Principal, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return domain.Principal{}, domain.Errorf(domain.CodeUnauthenticated, "send Authorization: Bearer <agent credential>")
	}
	return a.svc.Authenticate(r.Context(), tok)
}
