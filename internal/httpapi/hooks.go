package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
)

// Intake routes (design: Hooks). The operator routes follow the owner
// rule (another person's hook is 404, like an unknown one). The delivery
// route takes no bearer token: the hook's signature authenticates it.
var hookRoutes = []routeEntry{
	{Route{"POST", "/v1/hooks", "createHook", true, nil}, createCall((*app.Service).CreateHook, func(res app.HookSecretResult) string { return "/v1/hooks/" + res.Hook.ID })},
	{Route{"GET", "/v1/hooks", "listHooks", true, []string{"agent", "limit", "cursor"}}, (*api).listHooks},
	{Route{"GET", "/v1/hooks/{id}", "getHook", true, nil}, pathCall(http.StatusOK, "id", (*app.Service).GetHook)},
	{Route{"DELETE", "/v1/hooks/{id}", "deleteHook", true, nil}, pathCall(http.StatusOK, "id", (*app.Service).DeleteHook)},
	{Route{"POST", "/v1/hooks/{id}/secret", "rotateHookSecret", true, nil}, pathCall(http.StatusOK, "id", (*app.Service).RotateHookSecret)},
	{Route{"POST", "/v1/hooks/{id}/deliveries", "deliverHook", false, nil}, (*api).deliverHook},
}

func init() { routes = append(routes, hookRoutes...) }

func (a *api) listHooks(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	hs, err := a.svc.ListHooks(r.Context(), by, r.URL.Query().Get("agent"))
	return answerPage(w, r, "hook", hs, err, func(h app.HookView) string { return h.ID })
}

// deliverHook receives one webhook delivery: at most 1 MiB (413 beyond),
// then app.Service.Deliver. Answers: 201 created {outcome, todo_id}, 200
// duplicate or ping, 202 ignored; 401 bad or missing signature, 400 stale
// timestamp or bad body, 415 unsupported Content-Type, 404 unknown hook,
// 409 revoked agent, 429 rate limit (with Retry-After). A refusal never
// echoes the body.
func (a *api) deliverHook(w http.ResponseWriter, r *http.Request, _ domain.Person) error {
	body, err := readLimited(w, r, intake.MaxBody,
		domain.Errorf(domain.CodeInvalidArgument, "the delivery body exceeds the limit of %d bytes (1 MiB)", intake.MaxBody),
		func(error) error {
			return domain.Errorf(domain.CodeInvalidArgument, "reading the delivery body failed")
		})
	if err != nil {
		return err
	}
	res, err := a.svc.Deliver(r.Context(), app.DeliveryInput{HookID: r.PathValue("id"), Header: r.Header, Body: body})
	if err != nil {
		var rl *app.RateLimitedError
		if errors.As(err, &rl) {
			w.Header().Set("Retry-After", strconv.Itoa(rl.RetryAfterSeconds()))
		}
		var de *domain.Error
		if errors.As(err, &de) {
			switch {
			case de.Reason == "unsupported_media_type":
				return &statusError{http.StatusUnsupportedMediaType, de}
			case de.Code == domain.CodeUnauthenticated:
				// No WWW-Authenticate: a signature, not a bearer token, is wanted.
				writeProblem(w, r, http.StatusUnauthorized, de)
				return nil
			}
		}
		return err
	}
	status := http.StatusOK
	switch res.Outcome {
	case domain.DeliveryCreated:
		status = http.StatusCreated
	case domain.DeliveryIgnored:
		status = http.StatusAccepted
	}
	return writeJSON(w, status, res)
}
