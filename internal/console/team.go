package console

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi"
)

// The Tokens page (everyone) and the People page (admins;
// design: Persons and roles, Personal tokens). Both show a new secret once, in
// the response to the POST that made it (Cache-Control: no-store), never again.

type tokensView struct {
	Tokens  []domain.PersonToken
	Current string // the token this session was signed in with
	Minted  *app.MintedToken
	Name    string
	Error   string
}

func (h *Handler) renderTokens(w http.ResponseWriter, r *http.Request, v *visit, status int, tv tokensView) {
	ts, err := h.svc.ListTokens(r.Context(), v.person)
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	tv.Tokens, tv.Current = ts, v.person.TokenID
	h.render(w, r, status, "tokens", v, "Tokens", tv)
}

func (h *Handler) createToken(w http.ResponseWriter, r *http.Request, v *visit) {
	in := app.TokenInput{Name: strings.TrimSpace(r.PostFormValue("name"))}
	if d := strings.TrimSpace(r.PostFormValue("days")); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 || n > 3650 {
			h.renderTokens(w, r, v, http.StatusUnprocessableEntity, tokensView{Name: in.Name, Error: "Expiry must be a whole number of days between 1 and 3650, or empty."})
			return
		}
		t := h.svc.Clock().Now().Add(time.Duration(n) * 24 * time.Hour)
		in.ExpiresAt = &t
	}
	m, err := h.svc.CreateToken(r.Context(), v.person, in)
	if h.refused(w, r, v, err, func(_, msg string) {
		h.renderTokens(w, r, v, http.StatusUnprocessableEntity, tokensView{Name: in.Name, Error: msg})
	}) {
		return
	}
	h.renderTokens(w, r, v, http.StatusCreated, tokensView{Minted: &m})
}

func (h *Handler) revokeToken(w http.ResponseWriter, r *http.Request, v *visit) {
	id := r.PathValue("id")
	if _, err := h.svc.RevokeToken(r.Context(), v.person, id); err != nil {
		h.fail(w, r, v, err)
		return
	}
	if id == v.person.TokenID { // this session ended with its token
		http.SetCookie(w, h.cookie(r, SessionCookie, "", -1))
		http.Redirect(w, r, Prefix+"signin?done=signedout", http.StatusSeeOther)
		return
	}
	redirectDone(w, r, Prefix+"tokens", "tokenrevoked")
}

type peopleView struct {
	Persons []personRow
	Active  []domain.Person // hand-over targets
	Created *app.PersonCreated
	Error   string
}

type personRow struct {
	domain.Person
	Agents []domain.Agent
}

func (h *Handler) renderPeople(w http.ResponseWriter, r *http.Request, v *visit, status int, pv peopleView) {
	ps, err := h.svc.ListPersons(r.Context(), v.person)
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	for _, p := range ps {
		agents, err := h.svc.ListAgentsOf(r.Context(), v.person, p.ID)
		if err != nil {
			h.fail(w, r, v, err)
			return
		}
		pv.Persons = append(pv.Persons, personRow{Person: p, Agents: agents})
		if p.Active {
			pv.Active = append(pv.Active, p)
		}
	}
	h.render(w, r, status, "people", v, "People", pv)
}

func (h *Handler) addPerson(w http.ResponseWriter, r *http.Request, v *visit) {
	res, err := h.svc.CreatePerson(r.Context(), v.person, app.PersonInput{Name: strings.TrimSpace(r.PostFormValue("name")), Role: r.PostFormValue("role")})
	if h.refused(w, r, v, err, func(_, msg string) {
		h.renderPeople(w, r, v, http.StatusUnprocessableEntity, peopleView{Error: msg})
	}) {
		return
	}
	h.renderPeople(w, r, v, http.StatusCreated, peopleView{Created: &res})
}

func (h *Handler) updatePerson(w http.ResponseWriter, r *http.Request, v *visit) {
	var in app.PersonUpdate
	if role := r.PostFormValue("role"); role != "" {
		in.Role = &role
	}
	switch r.PostFormValue("active") {
	case "true":
		t := true
		in.Active = &t
	case "false":
		f := false
		in.Active = &f
	}
	if _, err := h.svc.UpdatePerson(r.Context(), v.person, r.PathValue("id"), in); err != nil {
		var de *domain.Error
		if errors.As(err, &de) && (de.Code == domain.CodeConflict || de.Reason == "deactivate_self") {
			h.renderPeople(w, r, v, httpapi.StatusOf(de.Code), peopleView{Error: de.Detail})
			return
		}
		h.fail(w, r, v, err)
		return
	}
	redirectDone(w, r, Prefix+"people", "personupdated")
}

// handOver gives an agent to another person (admin; audited as
// agent.hand_over).
func (h *Handler) handOver(w http.ResponseWriter, r *http.Request, v *visit) {
	owner := r.PostFormValue("owner")
	if _, err := h.svc.UpdateAgent(r.Context(), v.person, r.PostFormValue("agent"), app.UpdateInput{Owner: &owner}); err != nil {
		var de *domain.Error
		if errors.As(err, &de) && de.Code != domain.CodeInternal && de.Code != domain.CodeForbidden {
			h.renderPeople(w, r, v, httpapi.StatusOf(de.Code), peopleView{Error: de.Detail})
			return
		}
		h.fail(w, r, v, err)
		return
	}
	redirectDone(w, r, Prefix+"people", "handedover")
}
