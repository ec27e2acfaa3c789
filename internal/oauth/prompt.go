package oauth

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// prompt=none (design: Silent authorization requests): the library's own
// prompt handling is in the validation authorizer replaces, so the prompt
// is read and answered here. A sign-in always
// shows the consent page (the person picks the agent each time), so a
// request that must show no page never gets a code: it is answered at the
// client's redirect URI, after the whole request validated (OpenID Connect
// Core 3.1.2.6), with login_required when the browser brings no console
// session and consent_required when it does. Nothing is stored.

// promptKey carries, in the context of an authorization request with
// prompt=none, the question whether its browser has a console session
// (asked only once the request validated).
type promptKey struct{}

// promptTwiceKey marks, in the context of an authorization request, that
// it gave prompt more than once.
type promptTwiceKey struct{}

// withPrompt puts into r's context, for a request with prompt=none
// (r.Form parsed), how to tell whether its browser is signed in (by
// signedIn, which may be nil: never).
//
// prompt given more than once (query and body together) is marked for
// invalid_request: this code would read the first and the library the
// last (design: Silent authorization requests).
func withPrompt(r *http.Request, signedIn func(*http.Request) bool) *http.Request {
	if len(r.Form["prompt"]) > 1 {
		return r.WithContext(context.WithValue(r.Context(), promptTwiceKey{}, true))
	}
	if !slices.Contains(strings.Fields(r.Form.Get("prompt")), oidc.PromptNone) {
		return r
	}
	asked := func() bool { return signedIn != nil && signedIn(r) }
	return r.WithContext(context.WithValue(r.Context(), promptKey{}, asked))
}

// promptNone is the answer to a validated request that asked for no
// page, or nil.
func promptNone(ctx context.Context, ar *oidc.AuthRequest) error {
	if twice, _ := ctx.Value(promptTwiceKey{}).(bool); twice {
		return oidc.ErrInvalidRequest().WithDescription("prompt must be given at most once")
	}
	if !slices.Contains(ar.Prompt, oidc.PromptNone) {
		return nil
	}
	if len(ar.Prompt) > 1 {
		return oidc.ErrInvalidRequest().WithDescription("prompt none must be the only prompt value")
	}
	if signedIn, _ := ctx.Value(promptKey{}).(func() bool); signedIn == nil || !signedIn() {
		return oidc.ErrLoginRequired().WithDescription("the person is not signed in to the Rollcall console; retry without prompt=none")
	}
	return &oidc.Error{ErrorType: "consent_required", Description: "every sign-in is approved on the consent page; retry without prompt=none"}
}
