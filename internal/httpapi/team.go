package httpapi

import (
	"net/http"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// Persons and personal tokens (design: Persons and roles, Personal tokens). Person
// routes are for admins (403 forbidden, reason admin_required, for a
// member; a member may read itself with GET /v1/persons/{id}); token
// routes act on the caller's own tokens, so another person's token id
// answers 404.

func (a *api) createPerson(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	var in app.PersonInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	res, err := a.svc.CreatePerson(r.Context(), by, in)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/persons/"+res.Person.ID)
	return writeJSON(w, http.StatusCreated, res)
}

func (a *api) listPersons(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	ps, err := a.svc.ListPersons(r.Context(), by)
	if err != nil {
		return err
	}
	return writePageOf(w, r, "person", ps, func(p domain.Person) string { return p.ID })
}

func (a *api) getPerson(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	p, err := a.svc.GetPerson(r.Context(), by, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (a *api) updatePerson(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	var in app.PersonUpdate
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	p, err := a.svc.UpdatePerson(r.Context(), by, r.PathValue("id"), in)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}

func (a *api) createToken(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	var in app.TokenInput
	if err := decodeJSON(w, r, &in); err != nil {
		return err
	}
	t, err := a.svc.CreateToken(r.Context(), by, in)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, t)
}

func (a *api) listTokens(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	ts, err := a.svc.ListTokens(r.Context(), by)
	if err != nil {
		return err
	}
	return writePageOf(w, r, "token", ts, func(t domain.PersonToken) string { return t.ID })
}

func (a *api) revokeToken(w http.ResponseWriter, r *http.Request, by domain.Person) error {
	t, err := a.svc.RevokeToken(r.Context(), by, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, t)
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
