package console

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// --- fleet page ---

type fleetView struct {
	Cards []cardView
	Vend  vendForm
	Since string // the event cursor taken before the cards were read
}

// vendForm is the vend form with the values and errors of a refused
// submission. Errors is keyed by field: handle, name, queues, verbs, form.
type vendForm struct {
	Handle, Name, Queues string
	Verbs                map[string]bool
	Errors               map[string]string
}

func (h *Handler) fleetPage(w http.ResponseWriter, r *http.Request, v *visit) {
	h.renderFleet(w, r, v, http.StatusOK, vendForm{Verbs: allVerbs()}, cardView{})
}

func allVerbs() map[string]bool {
	m := map[string]bool{}
	for _, vb := range domain.ScopeVerbs {
		m[vb] = true
	}
	return m
}

// renderFleet renders the fleet page; override replaces the card of the
// same agent (a presence form that was refused, with its error).
func (h *Handler) renderFleet(w http.ResponseWriter, r *http.Request, v *visit, status int, vf vendForm, override cardView) {
	since := h.svc.EventsCursor() // before the reads: see Console live updates
	agents, err := h.svc.ListAgents(r.Context(), v.person)
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	view := fleetView{Vend: vf, Since: since}
	for i := range agents {
		c, err := h.buildCard(r.Context(), v, &agents[i])
		if err != nil {
			h.fail(w, r, v, err)
			return
		}
		if c.ID == override.ID {
			c.UntilValue, c.UntilError, c.PresenceError = override.UntilValue, override.UntilError, override.PresenceError
		}
		view.Cards = append(view.Cards, c)
	}
	// Revoked agents last; they have no controls.
	slices.SortStableFunc(view.Cards, func(a, b cardView) int {
		switch {
		case a.Revoked == b.Revoked:
			return 0
		case a.Revoked:
			return 1
		}
		return -1
	})
	h.render(w, r, status, "fleet", v, "Fleet", view)
}

// cardFragment serves one card's HTML for the live updates.
func (h *Handler) cardFragment(w http.ResponseWriter, r *http.Request, v *visit) {
	a, err := h.svc.OwnedAgent(r.Context(), v.person, r.PathValue("ref"))
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	c, err := h.buildCard(r.Context(), v, &a)
	if err != nil {
		h.log.Error("console card failed", "agent", a.Handle, "err", err)
		http.Error(w, "card unavailable", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := writeNeutral(w, func(w io.Writer) error { return h.pages["card"].ExecuteTemplate(w, "card", c) }); err != nil {
		h.log.Error("console card template failed", "err", err)
	}
}

// --- agent page ---

type agentView struct {
	Since          string // the event cursor taken before the card was read
	Card           cardView
	Queues         []string
	ShiftValue     string
	ShiftError     string
	CapValue       string // self_clock_in_cap (design: Self clock-in cap)
	CapError       string
	Todos          []todoView
	TodosCapped    bool
	TodoFilter     string       // "" (all) or a todo state: ?todos=
	TodoFilters    []todoFilter // the filter links, in order
	Audit          []domain.AuditEntry
	AuditTruncated bool
	Push           pushForm
	Hooks          []app.HookView     // hooks.go
	SignIns        []store.OAuthGrant // clients signed in as the agent (consent.go)
}

// todoFilter is one link of the agent page's todo filter.
type todoFilter struct {
	Value, Label string
	Current      bool
}

// todoStates are the states the agent page lists, in display order (open
// work first, then what is finished).
var todoStates = []string{domain.TodoClaimed, domain.TodoPending, domain.TodoFailed, domain.TodoDone}

type todoView struct {
	domain.Todo
	Held      bool
	HeldUntil *time.Time
}

// pushForm is the push-todo form; Errors keyed by queue, title, kind,
// payload, idempotency_key, form.
type pushForm struct {
	Queue, Title, Kind, Payload, Key string
	Errors                           map[string]string
}

// agentListLimit bounds each todo state listed on the agent page.
const agentListLimit = 100

// auditShown is how many of the agent's most recent audit entries the page
// shows.
const auditShown = 50

func (h *Handler) agentPage(w http.ResponseWriter, r *http.Request, v *visit) {
	h.renderAgent(w, r, v, http.StatusOK, agentView{})
}

// renderAgent renders the agent page; form carries a refused form's state
// (shift value and error, push form, presence error on the card).
func (h *Handler) renderAgent(w http.ResponseWriter, r *http.Request, v *visit, status int, form agentView) {
	ctx := r.Context()
	since := h.svc.EventsCursor() // before the reads: see Console live updates
	a, card, err := h.ownedCard(ctx, v, r.PathValue("ref"))
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	card.Back = "agent"
	card.UntilValue, card.UntilError, card.PresenceError = form.Card.UntilValue, form.Card.UntilError, form.Card.PresenceError
	view := agentView{Since: since, Card: card, Queues: a.Scope.Queues, ShiftValue: a.Presence.Shift, Push: form.Push}
	if form.ShiftError != "" {
		view.ShiftValue, view.ShiftError = form.ShiftValue, form.ShiftError
	}
	view.CapValue = a.SelfClockInCap.String()
	if form.CapError != "" {
		view.CapValue, view.CapError = form.CapValue, form.CapError
	}
	filter := r.URL.Query().Get("todos")
	if !slices.Contains(todoStates, filter) {
		filter = ""
	}
	view.TodoFilter = filter
	for _, f := range append([]string{""}, todoStates...) {
		label := f
		if f == "" {
			label = "all"
		}
		view.TodoFilters = append(view.TodoFilters, todoFilter{Value: f, Label: label, Current: f == filter})
	}
	for _, state := range todoStates {
		if filter != "" && state != filter {
			continue
		}
		ts, err := h.svc.ListTodosOf(ctx, &a, app.TodoFilter{State: state, Limit: agentListLimit})
		if err != nil {
			h.fail(w, r, v, err)
			return
		}
		view.TodosCapped = view.TodosCapped || len(ts) == agentListLimit
		for _, t := range ts {
			tv := todoView{Todo: t}
			if card.heldIDs[t.ID] {
				tv.Held, tv.HeldUntil = true, card.HeldUntil
			}
			view.Todos = append(view.Todos, tv)
		}
	}
	if view.Hooks, err = h.agentHooks(ctx, v.person, a.ID); err != nil {
		h.fail(w, r, v, err)
		return
	}
	if view.SignIns, err = h.signIns.ListOAuthGrants(ctx, v.person, a.ID); err != nil {
		h.fail(w, r, v, err)
		return
	}
	audit, err := h.svc.ListAudit(ctx, v.person, app.AuditFilter{AgentRef: a.ID, Limit: 1000})
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	view.AuditTruncated = len(audit) == 1000
	if len(audit) > auditShown {
		audit = audit[len(audit)-auditShown:]
	}
	slices.Reverse(audit)
	view.Audit = audit
	h.render(w, r, status, "agent", v, a.Handle, view)
}

// --- forms ---

// refused answers a form whose use case failed and reports whether err was
// such a failure: an error about a field re-renders the form with
// rerender(field, message), any other gets the error page (h.fail).
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, v *visit, err error, rerender func(field, msg string)) bool {
	if err == nil {
		return false
	}
	if field, msg, ok := fieldOf(err); ok {
		rerender(field, msg)
	} else {
		h.fail(w, r, v, err)
	}
	return true
}

// fieldOf names the form field an invalid_argument error points at
// ("/queues/2" → "queues"), or "form" when it points at none. Other errors
// (not found, conflict, internal) are not about a field: ok is false and
// they get an error page.
func fieldOf(err error) (field, msg string, ok bool) {
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument {
		return "", "", false
	}
	f := strings.TrimPrefix(de.Pointer, "/")
	if i := strings.IndexByte(f, '/'); i >= 0 {
		f = f[:i]
	}
	if f == "" {
		f = "form"
	}
	return f, de.Detail, true
}

// backTo is where a card form returns: the agent page, a pool page or the
// fleet page.
func backTo(r *http.Request, a *domain.Agent) string {
	back := r.PostFormValue("back")
	if back == "agent" {
		return Prefix + "agents/" + a.Handle
	}
	if u := poolBackURL(back); u != "" {
		return u
	}
	return Prefix
}

// setPresence handles the card's clock in / clock out / clear override
// buttons. until is a datetime-local value read in the zone tz (the
// browser's IANA zone, filled in by the script; UTC without it).
func (h *Handler) setPresence(w http.ResponseWriter, r *http.Request, v *visit) {
	ctx := r.Context()
	a, err := h.svc.OwnedAgent(ctx, v.person, r.PathValue("ref"))
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	action, untilText := r.PostFormValue("action"), strings.TrimSpace(r.PostFormValue("until"))
	refuse := func(field, msg string) {
		c := cardView{ID: a.ID, UntilValue: untilText}
		if field == "until" {
			c.UntilError = msg
		} else {
			c.PresenceError = msg
		}
		if r.PostFormValue("back") == "agent" {
			r.SetPathValue("ref", a.Handle)
			h.renderAgent(w, r, v, http.StatusUnprocessableEntity, agentView{Card: c})
			return
		}
		h.renderFleet(w, r, v, http.StatusUnprocessableEntity, vendForm{Verbs: allVerbs()}, c)
	}
	switch action {
	case "clear":
		_, err = h.svc.ClearPresence(ctx, v.person, a.ID)
	case presence.In, presence.Out:
		var until *time.Time
		if untilText != "" {
			t, msg := parseLocal(untilText, r.PostFormValue("tz"))
			if msg != "" {
				refuse("until", msg)
				return
			}
			until = &t
		}
		_, err = h.svc.SetPresence(ctx, v.person, a.ID, app.PresenceInput{Presence: action, Until: until})
	default:
		refuse("form", "Choose clock in, clock out or clear override.")
		return
	}
	if h.refused(w, r, v, err, func(f, msg string) {
		refuse(f, msg)
	}) {
		return
	}
	redirectDone(w, r, backTo(r, &a), action)
}

// parseLocal reads a datetime-local value ("2006-01-02T15:04", seconds
// optional) as wall time in the IANA zone tz ("" = UTC). It returns a
// message for the field when either does not parse.
func parseLocal(value, tz string) (time.Time, string) {
	loc := time.UTC
	if tz != "" && tz != "UTC" {
		l, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return time.Time{}, "until: unknown time zone " + tz
		}
		loc = l
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, value, loc); err == nil {
			return t.UTC(), ""
		}
	}
	return time.Time{}, "until: enter a date and time like 2026-12-01T17:30"
}

// setShift saves (op=save) or removes (op=remove) the shift. A shift that
// does not parse re-renders the agent page with presence.ParseShift's
// message next to the field (the API's message; design: Shift grammar).
func (h *Handler) setShift(w http.ResponseWriter, r *http.Request, v *visit) {
	ref := r.PathValue("ref")
	text := r.PostFormValue("shift")
	var shift *string
	done := "noshift"
	if r.PostFormValue("op") != "remove" {
		shift, done = &text, "shift"
	}
	a, err := h.svc.SetShift(r.Context(), v.person, ref, shift)
	if h.refused(w, r, v, err, func(_, msg string) {
		h.renderAgent(w, r, v, http.StatusUnprocessableEntity, agentView{ShiftValue: text, ShiftError: msg})
	}) {
		return
	}
	redirectDone(w, r, Prefix+"agents/"+a.Agent, done)
}

// setSelfClockInCap saves the agent's self clock-in cap from the agent page
// (design: Self clock-in cap; PATCH /v1/agents/{ref} self_clock_in_cap).
func (h *Handler) setSelfClockInCap(w http.ResponseWriter, r *http.Request, v *visit) {
	text := strings.TrimSpace(r.PostFormValue("self_clock_in_cap"))
	a, err := h.svc.SetSelfClockInCap(r.Context(), v.person, r.PathValue("ref"), text)
	if h.refused(w, r, v, err, func(_, msg string) {
		h.renderAgent(w, r, v, http.StatusUnprocessableEntity, agentView{CapValue: text, CapError: msg})
	}) {
		return
	}
	redirectDone(w, r, Prefix+"agents/"+a.ID, "selfcap")
}

// pushTodo pushes a todo from the agent page form.
func (h *Handler) pushTodo(w http.ResponseWriter, r *http.Request, v *visit) {
	f := pushForm{Queue: r.PostFormValue("queue"), Title: r.PostFormValue("title"), Kind: strings.TrimSpace(r.PostFormValue("kind")),
		Payload: strings.TrimSpace(r.PostFormValue("payload")), Key: strings.TrimSpace(r.PostFormValue("idempotency_key"))}
	in := app.PushInput{Queue: f.Queue, Title: f.Title, Kind: f.Kind, IdempotencyKey: f.Key}
	if f.Payload != "" {
		in.Payload = json.RawMessage(f.Payload)
	}
	t, created, err := h.svc.PushTodo(r.Context(), v.person, r.PathValue("ref"), in)
	if h.refused(w, r, v, err, func(field, msg string) {
		f.Errors = map[string]string{field: msg}
		h.renderAgent(w, r, v, http.StatusUnprocessableEntity, agentView{Push: f})
	}) {
		return
	}
	a, err := h.svc.OwnedAgent(r.Context(), v.person, t.AgentID)
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	done := "pushed"
	if !created {
		done = "exists"
	}
	redirectDone(w, r, Prefix+"agents/"+a.Handle, done)
}

// vend registers an agent. On success the response itself shows the
// credential (never stored, never shown again; Cache-Control: no-store).
func (h *Handler) vend(w http.ResponseWriter, r *http.Request, v *visit) {
	f, res, err := h.vendFromForm(r, v)
	if err != nil {
		if f.Errors != nil {
			h.renderFleet(w, r, v, http.StatusUnprocessableEntity, f, cardView{})
			return
		}
		h.fail(w, r, v, err)
		return
	}
	h.render(w, r, http.StatusCreated, "vended", v, "Agent "+res.Agent.Handle+" vended", res)
}

// vendFromForm vends the agent the vend form's fields describe. A refusal
// of a field comes back as the form with Errors set (and the error).
func (h *Handler) vendFromForm(r *http.Request, v *visit) (vendForm, app.VendResult, error) {
	_ = r.ParseForm()
	f := vendForm{Handle: strings.TrimSpace(r.PostFormValue("handle")), Name: strings.TrimSpace(r.PostFormValue("name")),
		Queues: r.PostFormValue("queues"), Verbs: map[string]bool{}}
	for _, vb := range r.PostForm["verbs"] {
		f.Verbs[vb] = true
	}
	in := app.VendInput{Handle: f.Handle, Name: f.Name, Queues: splitList(f.Queues), Verbs: r.PostForm["verbs"]}
	res, err := h.svc.Vend(r.Context(), v.person, in)
	if err != nil {
		field, msg, ok := fieldOf(err)
		if de := (*domain.Error)(nil); errors.As(err, &de) && de.Code == domain.CodeConflict {
			field, msg, ok = "handle", de.Detail, true // the handle is taken
		}
		if ok {
			f.Errors = map[string]string{field: msg}
		}
	}
	return f, res, err
}

// splitList splits a queue list typed with commas, spaces or newlines.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\r' || r == '\t' })
}

// revokePage asks for confirmation; revoking is permanent.
func (h *Handler) revokePage(w http.ResponseWriter, r *http.Request, v *visit) {
	a, err := h.svc.OwnedAgent(r.Context(), v.person, r.PathValue("ref"))
	if err != nil {
		h.fail(w, r, v, err)
		return
	}
	h.render(w, r, http.StatusOK, "revoke", v, "Revoke "+a.Handle, a)
}

func (h *Handler) revoke(w http.ResponseWriter, r *http.Request, v *visit) {
	if _, err := h.svc.RevokeAgent(r.Context(), v.person, r.PathValue("ref")); err != nil {
		h.fail(w, r, v, err)
		return
	}
	redirectDone(w, r, Prefix, "revoked")
}
