package console

import "net/http"

// SignedIn reports whether r carries a live console session: the
// authorization endpoint asks it to answer prompt=none (design: Silent
// authorization requests).
func (h *Handler) SignedIn(r *http.Request) bool {
	_, ok := h.authenticate(r)
	return ok
}
