// Package domain holds Rollcall's pure rules and types: agents and their
// scopes, persons, personal tokens and console sessions, todos and their
// lifecycle (leases, retries, dead letter, the ring schedule), hooks and
// handoff grants, the audit hash chain, the doorbell message and the text
// neutraliser, and the error type every layer returns. Nothing here does I/O
// or reads a clock: every rule that depends on time takes `now` as an
// argument (design: Pure rules).
package domain

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error code. It is carried in RFC 9457 problem
// documents as `code`, in MCP tool errors and in gateway `error` frames
// (design: Problem documents).
type Code string

// Error codes (design: Problem documents).
const (
	CodeInvalidArgument Code = "invalid_argument"
	CodeNotFound        Code = "not_found"
	CodeForbidden       Code = "forbidden"
	CodeConflict        Code = "conflict"
	CodeUnauthenticated Code = "unauthenticated"
	CodeRateLimited     Code = "rate_limited"
	CodeUnknownMember   Code = "unknown_member"
	CodeInternal        Code = "internal"
	// CodeMethodNotAllowed: an HTTP route that exists answers only other
	// methods (405, with Allow).
	CodeMethodNotAllowed Code = "method_not_allowed"
	// CodeUnavailable: the store cannot be reached for now (503, with
	// Retry-After); the request may be sent again (with its idempotency
	// key where it has one).
	CodeUnavailable Code = "unavailable"
)

// Error is a rule violation with a code, a human-readable detail, and, for
// errors in a request body, an RFC 6901 JSON Pointer to the offending member.
// Reason optionally refines the code (e.g. "subject_kind_not_allowed").
type Error struct {
	Code    Code
	Detail  string
	Pointer string // RFC 6901; "" when the error is not about a body member
	Reason  string
}

func (e *Error) Error() string {
	if e.Pointer != "" {
		return fmt.Sprintf("%s: %s (at %s)", e.Code, e.Detail, e.Pointer)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

// Errorf builds an *Error with a formatted detail.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// At returns a copy of e that points at the body member ptr (RFC 6901).
func (e *Error) At(ptr string) *Error {
	c := *e
	c.Pointer = ptr
	return &c
}

// CodeOf returns the Code of err when it is (or wraps) an *Error, and
// CodeInternal otherwise.
func CodeOf(err error) Code {
	var de *Error
	if errors.As(err, &de) {
		return de.Code
	}
	return CodeInternal
}

// Sentinel errors the store port returns; use cases translate them into
// *Error values with a useful detail.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// StoreError maps the store's sentinels onto errors with a detail:
// ErrNotFound onto not_found with notFound, ErrConflict onto conflict with
// conflict; any other error is returned as it is.
func StoreError(err error, notFound, conflict string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNotFound):
		return &Error{Code: CodeNotFound, Detail: notFound}
	case errors.Is(err, ErrConflict):
		return &Error{Code: CodeConflict, Detail: conflict}
	}
	return err
}
