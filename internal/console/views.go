package console

import (
	"context"
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/presence"
)

// cardView is one agent card (fleet page, agent page, card fragment).
type cardView struct {
	ID, Handle, Name string
	Revoked          bool
	Inactive         bool

	// Liveness (design: Agent status).
	State         string // unknown, online, degraded, offline
	LastHeartbeat *time.Time
	Warnings      []string // human sentences

	// Presence (design: Effective presence).
	Presence    string // in, out
	Source      string // agent, operator, shift, default
	Until       *time.Time
	Shift       string
	HasOverride bool

	// Work.
	Pending, Claimed, Held int
	ClaimedCapped          bool
	HeldCapped             bool
	HeldUntil              *time.Time
	heldIDs                map[string]bool

	// Sessions on this instance; -1 = not available.
	Sessions, Streaming int

	Now  time.Time
	CSRF string
	// Back is "agent" on the agent page and "pool:<name>" on a pool page,
	// so its forms return there.
	Back string
	// Pooled is set on a pool page: the card says when the pool last rang
	// the agent (LastRung; nil = never; design: Pool routing).
	Pooled   bool
	LastRung *time.Time
	// Presence form state after a refused submission.
	UntilValue, UntilError, PresenceError string
}

// Tone is the card's visual class; it is never the only carrier of state
// (every state also has a text label and an icon shape).
func (c cardView) Tone() string {
	switch {
	case c.Revoked || c.Inactive:
		return "tone-muted"
	case c.Presence == presence.Out:
		return "tone-rest"
	case c.State == liveness.StateOffline:
		return "tone-bad"
	case c.State == liveness.StateDegraded || len(c.Warnings) > 0:
		return "tone-warn"
	case c.State == liveness.StateOnline:
		return "tone-ok"
	}
	return "tone-muted"
}

// stateBadges gives each liveness state its icon, a shape that differs per
// state (not only by colour), and its label; an unlisted state shows "?"
// and "Unknown".
var stateBadges = map[string]struct{ icon, label string }{
	liveness.StateOnline:   {"●", "Online"},
	liveness.StateDegraded: {"▲", "Degraded"},
	liveness.StateOffline:  {"○", "Offline"},
}

// StateIcon is a shape that differs per state (not only by colour).
func (c cardView) StateIcon() string {
	if b, ok := stateBadges[c.State]; ok {
		return b.icon
	}
	return "?"
}

// StateLabel names the liveness state. While the agent is out an offline
// runtime is expected, and the label says so rather than alarming.
func (c cardView) StateLabel() string {
	b, ok := stateBadges[c.State]
	switch {
	case !ok:
		return "Unknown"
	case c.State == liveness.StateOffline && c.Presence == presence.Out:
		return "Offline (resting)"
	}
	return b.label
}

// PresenceIcon and PresenceLabel describe in/out by its source: an agent
// that is out is "off shift" or "clocked out", never "broken".
func (c cardView) PresenceIcon() string {
	if c.Presence == presence.Out {
		return "☾"
	}
	return "☀"
}

// PresenceLabel names the presence and what decided it.
func (c cardView) PresenceLabel() string {
	out := c.Presence == presence.Out
	switch c.Source {
	case presence.SourceShift:
		if out {
			return "Off shift"
		}
		return "On shift"
	case presence.SourceAgent:
		if out {
			return "Clocked out by the agent"
		}
		return "Clocked in by the agent"
	case presence.SourceOperator:
		if out {
			return "Clocked out by operator"
		}
		return "Clocked in by operator"
	}
	if out {
		return "Out"
	}
	return "In (no shift)"
}

// Summary is the one line the live region announces after a refresh.
func (c cardView) Summary() string {
	return c.Handle + ": " + c.StateLabel() + ", " + c.PresenceLabel()
}

// warningText turns a warning code into a sentence with the values involved.
func warningText(code string, st *app.AgentRuntimeStatus) string {
	val := func(p *string) string {
		if p == nil {
			return "nothing"
		}
		return strconv.Quote(*p)
	}
	switch code {
	case liveness.WarnBillingModeMismatch:
		return fmt.Sprintf("Billing mode mismatch: the agent reports %s, its owner configured %q.", val(st.ReportedBillingMode), st.BillingMode)
	case liveness.WarnBillingModeUnsupported:
		return fmt.Sprintf("Billing mode not reported: the agent lists supported modes but not the one in use (configured %q).", st.BillingMode)
	case liveness.WarnBillingEvidenceUnknown:
		return "Billing evidence unknown: the agent cannot tell which kind of key it uses."
	case liveness.WarnToolClassMismatch:
		return fmt.Sprintf("Tool class mismatch: the agent reports %s, its owner configured %q.", val(st.ReportedToolClass), st.ToolClass)
	}
	return "Warning: " + code
}

// buildCard assembles one card from the runtime status use case
// (app.Service.AgentStatus: liveness from the tracker's memory, effective
// presence with held todos). Cost per agent: three indexed store reads
// inside AgentStatus (agent twice, pending todos once) plus one claimed-todo
// query; sessions are counted in memory. The fleet page adds one agent list
// query: 1 + 4·n reads for n agents, about 0.4 ms of CPU per card on SQLite
// (BenchmarkFleetPage, docs/benchmarks.md).
func (h *Handler) buildCard(ctx context.Context, v *visit, a *domain.Agent) (cardView, error) {
	now := h.svc.Clock().Now()
	c := cardView{ID: a.ID, Handle: a.Handle, Name: a.Name, Revoked: a.Revoked(), Inactive: !a.Active,
		State: liveness.StateUnknown, Sessions: -1, Now: now, CSRF: v.sess.CSRF, Shift: a.Presence.Shift}
	if c.Revoked {
		return c, nil
	}
	st, err := h.svc.AgentStatus(ctx, v.person, a.ID)
	if err != nil {
		return c, err
	}
	c.State, c.LastHeartbeat = st.State, st.LastHeartbeatAt
	for _, w := range st.Warnings {
		c.Warnings = append(c.Warnings, warningText(w, &st))
	}
	p := st.Presence
	c.Presence, c.Source, c.Until, c.Pending = p.Presence, p.Source, p.Until, p.Pending
	c.HasOverride = p.Source == presence.SourceAgent || p.Source == presence.SourceOperator
	c.Held, c.HeldCapped, c.HeldUntil = len(p.Held), len(p.Held) >= 100, p.HeldUntil
	c.heldIDs = make(map[string]bool, len(p.Held))
	for _, t := range p.Held {
		c.heldIDs[t.ID] = true
	}
	claimed, err := h.svc.ListTodosOf(ctx, a, app.TodoFilter{State: domain.TodoClaimed, Limit: domain.MaxListLimit})
	if err != nil {
		return c, err
	}
	c.Claimed, c.ClaimedCapped = len(claimed), len(claimed) >= domain.MaxListLimit
	if h.sessions != nil {
		ss := h.sessions.AgentSessions(a.ID)
		live := h.svc.Clock().Now()
		c.Sessions = 0
		for _, s := range ss {
			if !s.Live(live) {
				continue // a client gone without DELETE (design: Session expiry)
			}
			c.Sessions++
			if s.Streaming {
				c.Streaming++
			}
		}
	}
	return c, nil
}

// ownedCard reads one of the person's agents by ref and builds its card.
func (h *Handler) ownedCard(ctx context.Context, v *visit, ref string) (domain.Agent, cardView, error) {
	a, err := h.svc.OwnedAgent(ctx, v.person, ref)
	if err != nil {
		return a, cardView{}, err
	}
	c, err := h.buildCard(ctx, v, &a)
	return a, c, err
}

// funcs are the template helpers.
func (h *Handler) funcs() template.FuncMap {
	return template.FuncMap{
		"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"abs":       func(t time.Time) string { return t.UTC().Format("Mon 2 Jan 15:04 UTC") },
		"rel":       relative,
		"plural":    plural,
		"join":      strings.Join,
		"deref":     func(t *time.Time) time.Time { return *t },
		"now":       func() time.Time { return h.svc.Clock().Now() },
		"verbs":     func() []string { return domain.ScopeVerbs },
		"actor":     actorLabel,
		"copyField": func(id, value, what string) copyField { return copyField{id, value, what} },
		// msg is any: a form's Errors map has no entry for a field without
		// an error, and the template passes that missing entry as nil.
		"fieldError": func(id string, msg any) fieldError { return fieldError{id, msg} },
		"has": func(m map[string]bool, k string) bool {
			return m[k]
		},
	}
}

// copyField is the argument of the "copy" template: a read-only input
// (ID, Value) and its Copy button, which names What for screen readers.
type copyField struct{ ID, Value, What string }

// fieldError is the argument of the "field-error" template: the id of the
// error paragraph and its message (nil or "" when the field has none).
type fieldError struct {
	ID  string
	Msg any
}

// relative renders t relative to now: "12s ago", "in 3h 5m", "just now".
func relative(t, now time.Time) string {
	d := t.Sub(now)
	future := d > 0
	if !future {
		d = -d
	}
	if d < 2*time.Second {
		return "just now"
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// actorLabel shortens an audit actor for the table: "operator:<id>" →
// "operator …<last 8 of id>", "agent:<id>" → "agent …<last 8>"; the full
// value is in the audit log itself.
func actorLabel(actor string) string {
	kind, id, ok := strings.Cut(actor, ":")
	if !ok || len(id) <= 8 {
		return actor
	}
	return kind + " …" + id[len(id)-8:]
}
