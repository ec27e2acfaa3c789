package mcpserver

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/rollcall/rollcall/internal/domain"
)

// problem is an RFC 9457 problem document with Rollcall's machine code
// (DESIGN.md §2, REST errors). The MCP endpoint answers with one whenever it
// refuses a request at the HTTP level (authentication, session binding,
// body size); JSON-RPC level errors stay JSON-RPC.
type problem struct {
	Type   string      `json:"type"`
	Title  string      `json:"title"`
	Status int         `json:"status"`
	Detail string      `json:"detail"`
	Code   domain.Code `json:"code"`
	Reason string      `json:"reason,omitempty"`
}

// writeProblem writes a problem+json response. A 401 carries
// WWW-Authenticate: Bearer (RFC 6750; error="invalid_token" when a token was
// presented).
func writeProblem(w http.ResponseWriter, status int, code domain.Code, detail string) {
	writeProblemErr(w, status, &domain.Error{Code: code, Detail: detail})
}

func writeProblemErr(w http.ResponseWriter, status int, e *domain.Error) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{
		Type: "about:blank", Title: http.StatusText(status), Status: status,
		Detail: e.Detail, Code: e.Code, Reason: e.Reason,
	})
}

// statusOf maps a domain error code onto the HTTP status of its problem.
func statusOf(code domain.Code) int {
	switch code {
	case domain.CodeInvalidArgument, domain.CodeUnknownMember:
		return http.StatusBadRequest
	case domain.CodeUnauthenticated:
		return http.StatusUnauthorized
	case domain.CodeForbidden:
		return http.StatusForbidden
	case domain.CodeNotFound:
		return http.StatusNotFound
	case domain.CodeConflict:
		return http.StatusConflict
	case domain.CodeRateLimited:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// asDomainError returns err as a *domain.Error, or an internal error that
// reveals nothing when it is not one.
func asDomainError(err error) (*domain.Error, bool) {
	var de *domain.Error
	if errors.As(err, &de) {
		return de, true
	}
	return &domain.Error{Code: domain.CodeInternal, Detail: "internal error"}, false
}
