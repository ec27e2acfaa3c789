package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// ProblemContentType is the media type of error responses (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemTypePrefix prefixes the problem `type` URI; the rest is the code,
// e.g. "urn:rollcall:problem:not_found".
const ProblemTypePrefix = "urn:rollcall:problem:"

// Problem is the body of every error response: an RFC 9457 problem document
// extended with Rollcall's machine `code` (design: Problem documents) and, for body
// errors, the RFC 6901 `pointer` of the offending member.
type Problem struct {
	Type     string `json:"type"`               // ProblemTypePrefix + code
	Title    string `json:"title"`              // short summary of the code
	Status   int    `json:"status"`             // the HTTP status
	Detail   string `json:"detail"`             // what went wrong, for a human
	Instance string `json:"instance,omitempty"` // the request path
	Code     string `json:"code"`               // domain.Code
	Pointer  string `json:"pointer,omitempty"`  // RFC 6901, body errors only ("" with a body that is not an object: sent as "pointer": "")
	Reason   string `json:"reason,omitempty"`   // refines code, e.g. subject_kind_not_allowed
}

// StatusOf maps an error code to its HTTP status:
//
//	invalid_argument, unknown_member → 400
//	unauthenticated                  → 401
//	forbidden                        → 403
//	not_found                        → 404
//	conflict                         → 409
//	method_not_allowed               → 405
//	rate_limited                     → 429
//	unavailable                      → 503
//	internal and anything else       → 500
//
// A few errors override the status while keeping code invalid_argument:
// 413 (body over 1 MiB) and 415 (not application/json).
func StatusOf(c domain.Code) int {
	switch c {
	case domain.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case domain.CodeUnavailable:
		return http.StatusServiceUnavailable
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

var titles = map[domain.Code]string{
	domain.CodeInvalidArgument:  "Invalid argument",
	domain.CodeUnknownMember:    "Unknown member",
	domain.CodeUnauthenticated:  "Unauthenticated",
	domain.CodeForbidden:        "Forbidden",
	domain.CodeNotFound:         "Not found",
	domain.CodeConflict:         "Conflict",
	domain.CodeRateLimited:      "Rate limited",
	domain.CodeInternal:         "Internal error",
	domain.CodeMethodNotAllowed: "Method not allowed",
	domain.CodeUnavailable:      "Service unavailable",
}

// UnavailableRetryAfter is the Retry-After of an unavailable answer: the
// store could not be reached, and a client should not hammer it while it
// comes back.
const UnavailableRetryAfter = 5 * time.Second

// Unavailable reports whether err says the store cannot be reached now
// rather than that the request is wrong: a network error on the way to the
// database (connection refused or reset, DNS, a dial or read timeout — a
// pgx connect error wraps one), a connection cut mid-answer (unexpected
// EOF), a PostgreSQL connection exception (SQLSTATE class 08) or shutdown
// (57P01–57P03, 53300 too many connections), SQLite still busy after its
// busy timeout, or a deadline that expired while the caller's own context
// (ctx) is still live (a pool acquire that gave up). It names no driver type,
// so adapters stay free of the store's packages.
func Unavailable(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) { // before net.Error: it is one
		return ctx.Err() == nil
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		switch st := pg.SQLState(); {
		case strings.HasPrefix(st, "08"), st == "57P01", st == "57P02", st == "57P03", st == "53300":
			return true
		}
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) && lite.Code()&0xff == sqliteBusy {
		return true
	}
	return false
}

// sqliteBusy is SQLITE_BUSY, the primary result code of a database locked
// by another connection past the busy timeout.
const sqliteBusy = 5

// unavailableError is the problem of an Unavailable error: it says what
// happened and when to retry, never the driver's text.
var unavailableError = &domain.Error{Code: domain.CodeUnavailable,
	Detail: fmt.Sprintf("the database cannot be reached right now; retry after %d s", int(UnavailableRetryAfter/time.Second))}

func writeProblem(w http.ResponseWriter, r *http.Request, status int, de *domain.Error) {
	WriteProblem(w, status, de, r.URL.Path)
}

// NewProblem builds the problem document of de answered with status for the
// request path instance: type ProblemTypePrefix+code, the code's title (the
// status text for an unknown code), de's detail, pointer and reason.
func NewProblem(status int, de *domain.Error, instance string) Problem {
	title := titles[de.Code]
	if title == "" {
		title = http.StatusText(status)
	}
	return Problem{
		Type: ProblemTypePrefix + string(de.Code), Title: title, Status: status, Detail: de.Detail,
		Instance: instance, Code: string(de.Code), Pointer: de.Pointer, Reason: de.Reason,
	}
}

// WriteProblem writes NewProblem(status, de, instance) as an
// application/problem+json response (no-store, nosniff). It is the one
// rendering of problem documents, shared with the MCP endpoint.
func WriteProblem(w http.ResponseWriter, status int, de *domain.Error, instance string) {
	writeProblemDoc(w, NewProblem(status, de, instance), false)
}

// writeProblemDoc writes p; wholeBody sends "pointer": "" (RFC 6901: the
// whole document) even though the pointer is empty.
func writeProblemDoc(w http.ResponseWriter, p Problem, wholeBody bool) {
	var b []byte
	if wholeBody && p.Pointer == "" {
		b, _ = json.Marshal(struct {
			Problem
			Pointer string `json:"pointer"` // shadows Problem.Pointer's omitempty
		}{Problem: p})
	} else {
		b, _ = json.Marshal(p) // cannot fail: strings and an int
	}
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}
