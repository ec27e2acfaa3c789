package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi"
)

// Problem documents are the REST API's (httpapi.WriteProblem): RFC 9457
// with type "urn:rollcall:problem:<code>", the code's title and Rollcall's
// machine code (design: Problem documents). The MCP endpoint answers with
// one whenever it refuses a request at the HTTP level (authentication,
// session binding, session limit, body size); JSON-RPC level errors stay
// JSON-RPC. (This package imports httpapi for that one rendering; httpapi
// must therefore never import mcpserver.)

// writeProblem writes a problem+json response.
func writeProblem(w http.ResponseWriter, status int, code domain.Code, detail string) {
	writeProblemErr(w, status, &domain.Error{Code: code, Detail: detail})
}

// writeProblemErr writes e as a problem+json response with status. A 401's
// WWW-Authenticate header is set by the caller; an unavailable one gets
// Retry-After here.
func writeProblemErr(w http.ResponseWriter, status int, e *domain.Error) {
	w.Header().Del("Content-Length")
	if e.Code == domain.CodeUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(httpapi.UnavailableRetryAfter/time.Second)))
	}
	httpapi.WriteProblem(w, status, e, "")
}

// writeRateLimited writes a 429 rate_limited problem with Retry-After in
// whole seconds (at least 1).
func writeRateLimited(w http.ResponseWriter, retryAfter time.Duration, detail string) {
	secs := max(int((retryAfter+time.Second-1)/time.Second), 1)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeProblem(w, http.StatusTooManyRequests, domain.CodeRateLimited, detail)
}

// statusOf maps a domain error code onto the HTTP status of its problem,
// as the REST API does.
func statusOf(code domain.Code) int { return httpapi.StatusOf(code) }

// asDomainError returns err as a *domain.Error, or (known false) an error
// that reveals nothing when it is not one: unavailable when the store
// cannot be reached (httpapi.Unavailable), internal otherwise.
func asDomainError(err error) (*domain.Error, bool) {
	var de *domain.Error
	if errors.As(err, &de) {
		return de, true
	}
	if httpapi.Unavailable(context.Background(), err) {
		return &domain.Error{Code: domain.CodeUnavailable, Detail: fmt.Sprintf(
			"the database cannot be reached right now; retry after %d s", int(httpapi.UnavailableRetryAfter/time.Second))}, false
	}
	return &domain.Error{Code: domain.CodeInternal, Detail: "internal error"}, false
}
