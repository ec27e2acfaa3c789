package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/rollcall/rollcall/internal/domain"
)

// ProblemContentType is the media type of error responses (RFC 9457).
const ProblemContentType = "application/problem+json"

// ProblemTypePrefix prefixes the problem `type` URI; the rest is the code,
// e.g. "urn:rollcall:problem:not_found".
const ProblemTypePrefix = "urn:rollcall:problem:"

// Problem is the body of every error response: an RFC 9457 problem document
// extended with Rollcall's machine `code` (DESIGN.md §2, REST) and, for body
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
//	rate_limited                     → 429
//	internal and anything else       → 500
//
// A few errors override the status while keeping code invalid_argument:
// 413 (body over 1 MiB), 415 (not application/json) and 405 (method).
func StatusOf(c domain.Code) int {
	switch c {
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
	domain.CodeInvalidArgument: "Invalid argument",
	domain.CodeUnknownMember:   "Unknown member",
	domain.CodeUnauthenticated: "Unauthenticated",
	domain.CodeForbidden:       "Forbidden",
	domain.CodeNotFound:        "Not found",
	domain.CodeConflict:        "Conflict",
	domain.CodeRateLimited:     "Rate limited",
	domain.CodeInternal:        "Internal error",
}

// writeError renders err as a problem document. A *domain.Error keeps its
// code, detail, pointer and reason; anything else (and code internal) is
// logged with its text and answered with a generic 500 that leaks nothing.
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
	if !errors.As(err, &de) || de.Code == domain.CodeInternal {
		level := slog.LevelError
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			level = slog.LevelInfo // the client went away
		}
		a.log.Log(r.Context(), level, "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		de = &domain.Error{Code: domain.CodeInternal, Detail: "internal error; the server log has the cause"}
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
