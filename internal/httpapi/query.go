package httpapi

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// queryParams parses the query string and refuses unknown and repeated
// parameters (invalid_argument naming the parameter), so a typo such as
// ?stat=pending is an error rather than an unfiltered answer. Every request to
// a registered path passes through it, with the parameters its table entry
// lists, before its handler runs.
func queryParams(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "malformed query string: %v", err)
	}
	names := make([]string, 0, len(q))
	for k := range q {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, domain.Errorf(domain.CodeInvalidArgument, "unknown query parameter %q; this route takes none", k)
			}
			return nil, domain.Errorf(domain.CodeInvalidArgument, "unknown query parameter %q; known: %s", k, strings.Join(allowed, ", "))
		}
		if len(q[k]) > 1 {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "query parameter %s is given more than once", k)
		}
	}
	return q, nil
}

// positiveInt reads an optional integer ≥ 1; absent = 0 (the use case's
// default).
func positiveInt(q url.Values, name string) (int, error) {
	if !q.Has(name) {
		return 0, nil
	}
	v := q.Get(name)
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, domain.Errorf(domain.CodeInvalidArgument, "query parameter %s must be an integer ≥ 1, got %q", name, v)
	}
	return n, nil
}

// asQueryError rewrites a use-case error that points at one of the query
// parameters (the use cases point at /state, /limit …) into one whose
// detail names the parameter and that has no body pointer.
func asQueryError(err error, params ...string) error {
	var de *domain.Error
	if !errors.As(err, &de) || de.Pointer == "" {
		return err
	}
	name := strings.TrimPrefix(de.Pointer, "/")
	if !slices.Contains(params, name) {
		return err
	}
	c := *de
	c.Pointer = ""
	c.Detail = "query parameter " + name + ": " + de.Detail
	return &c
}

// answerPage answers a use case's list: its error, else writePageOf of
// all.
func answerPage[T any](w http.ResponseWriter, r *http.Request, kind string, all []T, err error, key func(T) string) error {
	if err != nil {
		return err
	}
	return writePageOf(w, r, kind, all, key)
}

// writePageOf answers one page (query parameters limit and cursor, checked
// by the route table) of a list the use case returned whole (app.PageOf).
func writePageOf[T any](w http.ResponseWriter, r *http.Request, kind string, all []T, key func(T) string) error {
	q := r.URL.Query()
	limit, err := positiveInt(q, "limit")
	if err != nil {
		return err
	}
	page, err := app.PageOf(kind, all, key, limit, q.Get("cursor"))
	if err != nil {
		return asQueryError(err, "limit", "cursor")
	}
	return writeJSON(w, http.StatusOK, page)
}
