package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// Digest reasons (design: Digest on return, Connect and reconnect digests): why presence
// changed (the evaluator's), and the (re)connect digests (the doorbell's).
const (
	ReasonClockIn     = evaluator.ReasonClockIn
	ReasonOperator    = evaluator.ReasonOperator
	ReasonShiftStart  = evaluator.ReasonShiftStart
	ReasonOverrideEnd = evaluator.ReasonOverrideEnd
	ReasonReconnect   = doorbell.ReasonReconnect
	ReasonConnect     = doorbell.ReasonConnect
)

// inputsOf turns stored presence columns into presence.Inputs (a stored
// shift that no longer parses is ignored and logged).
func (s *Service) inputsOf(a *domain.Agent) presence.Inputs { return evaluator.InputsOf(a, s.log) }

func shiftPtr(a *domain.Agent) *string {
	if a.Presence.Shift == "" {
		return nil
	}
	sh := a.Presence.Shift
	return &sh
}

func (s *Service) presenceStore() store.PresenceStore { return s.store }

// viewOf computes the PresenceView of a freshly read agent row.
func (s *Service) viewOf(ctx context.Context, a *domain.Agent, now time.Time) (PresenceView, error) {
	v, _, err := s.viewAndPending(ctx, a, now)
	return v, err
}

// viewAndPending computes the view and returns the push-eligible pending
// todos it counted (oldest first), with one store query.
func (s *Service) viewAndPending(ctx context.Context, a *domain.Agent, now time.Time) (PresenceView, []store.PendingTodo, error) {
	p, src, until := presence.Effective(s.inputsOf(a), now)
	pend, err := s.presenceStore().PendingDoorbellTodos(ctx, store.PendingParams{AgentID: a.ID, Limit: 100000})
	if err != nil {
		return PresenceView{}, nil, err
	}
	return PresenceView{Presence: p, Source: src, Until: until, Shift: shiftPtr(a), Pending: len(pend)}, pend, nil
}

// freshAgent rereads an agent row: the verbs decide on stored state, not on
// a cache.
func (s *Service) freshAgent(ctx context.Context, id string) (domain.Agent, error) {
	a, err := s.store.GetAgent(ctx, store.AgentRef{ID: id})
	return a, storeErr(err, fmt.Sprintf("agent %q not found", id), "")
}

// --- self verbs (design: Self verbs) ---

// PresenceOf is the `presence {}` self verb.
func (s *Service) PresenceOf(ctx context.Context, a *domain.Agent) (PresenceView, error) {
	cur, err := s.freshAgent(ctx, a.ID)
	if err != nil {
		return PresenceView{}, err
	}
	return s.viewOf(ctx, &cur, s.now())
}

// ClockOut is the `clock_out {}` self verb: an out override by the agent
// until the next shift start (no end without a shift). Idempotent: a repeat
// writes nothing and rings nothing.
func (s *Service) ClockOut(ctx context.Context, a *domain.Agent) (PresenceView, error) {
	after, now, err := s.applyAgentPresence(ctx, a.ID, ReasonClockIn, func(cur presence.Inputs, b presence.Budget, now time.Time) (presence.Change, presence.Budget, error) {
		return presence.ClockOut(cur, now), b, nil
	})
	if err != nil {
		return PresenceView{}, err
	}
	return s.viewOf(ctx, &after, now)
}

// ClockIn is the `clock_in {for?}` self verb (design: Self verbs); forArg
// absent = 1h, max 8h. Outside the shift the agent's own in overrides of one
// off-shift stretch cover at most its self_clock_in_cap together
// (presence.ClockIn). Errors, nothing changed: invalid_argument (pointer
// /for); forbidden with reason operator_override (the owner's live out
// override) or self_clock_in_cap (the cap of this stretch is used up, or
// 0).
func (s *Service) ClockIn(ctx context.Context, a *domain.Agent, forArg *string) (PresenceView, error) {
	d := presence.DefaultClockIn
	if forArg != nil {
		var err error
		if d, err = presence.ParseFor(*forArg); err != nil {
			return PresenceView{}, err
		}
	}
	after, now, err := s.applyAgentPresence(ctx, a.ID, ReasonClockIn, func(cur presence.Inputs, b presence.Budget, now time.Time) (presence.Change, presence.Budget, error) {
		return presence.ClockIn(cur, b, d, now)
	})
	if err != nil {
		return PresenceView{}, err
	}
	return s.viewOf(ctx, &after, now)
}

// --- operator controls (design: Operator overrides) ---

// GetPresence returns the owner's view of an agent's presence.
func (s *Service) GetPresence(ctx context.Context, by domain.Person, ref string) (AgentPresence, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return AgentPresence{}, err
	}
	return s.agentPresence(ctx, &a)
}

func (s *Service) agentPresence(ctx context.Context, a *domain.Agent) (AgentPresence, error) {
	v, pend, err := s.viewAndPending(ctx, a, s.now())
	if err != nil {
		return AgentPresence{}, err
	}
	out := AgentPresence{PresenceView: v, Agent: a.Handle, Held: []HeldTodo{}}
	if v.Presence == presence.Out {
		for i, t := range pend {
			if i == 100 {
				break
			}
			out.Held = append(out.Held, HeldTodo{ID: t.ID, Queue: t.Queue, CreatedAt: t.CreatedAt})
		}
		out.HeldUntil = v.Until
	}
	return out, nil
}

// SetPresence is PUT /v1/agents/{ref}/presence: an operator override with
// no cap, still ended by the next shift boundary. Errors: not_found (not the
// owner), conflict (revoked), invalid_argument (/presence, /until).
func (s *Service) SetPresence(ctx context.Context, by domain.Person, ref string, in PresenceInput) (AgentPresence, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return AgentPresence{}, err
	}
	after, _, err := s.applyPresence(ctx, a, "operator:"+by.ID, ReasonOperator, func(cur presence.Inputs, now time.Time) (presence.Change, error) {
		return presence.OperatorOverride(cur, by.ID, in.Presence, in.Until, now)
	})
	if err != nil {
		return AgentPresence{}, err
	}
	return s.agentPresence(ctx, &after)
}

// ClearPresence is DELETE /v1/agents/{ref}/presence: clears any override.
func (s *Service) ClearPresence(ctx context.Context, by domain.Person, ref string) (AgentPresence, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return AgentPresence{}, err
	}
	after, _, err := s.applyPresence(ctx, a, "operator:"+by.ID, ReasonOperator, func(cur presence.Inputs, _ time.Time) (presence.Change, error) {
		if cur.Override == "" {
			return presence.Change{Action: presence.Keep}, nil
		}
		return presence.Change{Action: presence.Clear}, nil
	})
	if err != nil {
		return AgentPresence{}, err
	}
	return s.agentPresence(ctx, &after)
}

// SetShift is PUT /v1/agents/{ref}/shift {"shift": string|null}. The shift
// is validated with the grammar of (design: Shift grammar) (invalid_argument naming
// `shift`, pointer /shift). Audited as agent.shift.
func (s *Service) SetShift(ctx context.Context, by domain.Person, ref string, shift *string) (AgentPresence, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return AgentPresence{}, err
	}
	if a.Revoked() {
		return AgentPresence{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; its presence cannot change", a.Handle)
	}
	text := ""
	if shift != nil {
		sh, err := presence.ParseShift(*shift)
		if err != nil {
			return AgentPresence{}, err
		}
		text = sh.Text()
	}
	if text != a.Presence.Shift {
		now := s.now()
		oldP, _, _ := presence.Effective(s.inputsOf(&a), now)
		updated, err := s.presenceStore().UpdatePresence(ctx, store.UpdatePresenceParams{
			AgentID: a.ID, Now: now, SetShift: true, Shift: text,
			Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.shift", AgentID: a.ID, Data: map[string]any{"shift": shift}},
		})
		if err != nil {
			return AgentPresence{}, storeErr(err, fmt.Sprintf("agent %q not found", ref), fmt.Sprintf("agent %s is revoked; its presence cannot change", a.Handle))
		}
		s.afterPresenceWrite(ctx, &updated, oldP, now, ReasonOperator)
		a = updated
	}
	return s.agentPresence(ctx, &a)
}

// applyPresence takes the agent row just read (OwnedAgent: the verbs
// decide on stored state, not on a cache, and read it once), lets decide
// compute the override change, writes it with an audit entry (unless Keep), logs one line,
// signals every instance and evaluates the transition right away
// (design: Presence evaluator). It returns the row
// after the change (the unchanged row on Keep) and the decision time.
func (s *Service) applyPresence(ctx context.Context, a domain.Agent, actor, cause string, decide func(presence.Inputs, time.Time) (presence.Change, error)) (domain.Agent, time.Time, error) {
	return s.applyPresenceOnce(ctx, a, actor, cause, false, func(cur presence.Inputs, b presence.Budget, now time.Time) (presence.Change, presence.Budget, error) {
		ch, err := decide(cur, now)
		return ch, b, err
	})
}

// applyPresenceOnce is applyPresence with the self clock-in budget: decide
// also gets the agent's presence.Budget and returns the one to store (the
// ledger is written with the override when it changed). With guarded the
// write happens only while the override columns still hold what decide
// saw, else store.ErrPresenceChanged.
func (s *Service) applyPresenceOnce(ctx context.Context, a domain.Agent, actor, cause string, guarded bool, decide func(presence.Inputs, presence.Budget, time.Time) (presence.Change, presence.Budget, error)) (domain.Agent, time.Time, error) {
	if a.Revoked() {
		return domain.Agent{}, time.Time{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; its presence cannot change", a.Handle)
	}
	now := s.now()
	cur := s.inputsOf(&a)
	b := presence.BudgetOf(&a)
	ch, nb, err := decide(cur, b, now)
	if err != nil {
		return domain.Agent{}, time.Time{}, err
	}
	if ch.Action == presence.Keep {
		return a, now, nil
	}
	oldP, _, _ := presence.Effective(cur, now)
	p := store.UpdatePresenceParams{AgentID: a.ID, Now: now, SetOverride: true}
	if nb != b {
		p.SetBudget, p.SelfInUsed = true, nb.Used
		if !nb.Stretch.IsZero() {
			st := nb.Stretch
			p.SelfInStretch = &st
		}
	}
	if guarded {
		p.Guard = &store.OverrideGuard{Override: a.Presence.Override, SetAt: a.Presence.OverrideSetAt, By: a.Presence.OverrideBy}
	}
	data := map[string]any{"override": nil}
	if ch.Action == presence.Set {
		o := ch.Override
		setAt := o.SetAt
		p.Override, p.OverrideUntil, p.OverrideSetAt, p.OverrideBy = o.Presence, o.Until, &setAt, o.By
		data = map[string]any{"override": o.Presence, "until": o.Until}
	}
	p.Audit = domain.AuditRecord{Actor: actor, Action: "agent.presence", AgentID: a.ID, Data: data}
	updated, err := s.presenceStore().UpdatePresence(ctx, p)
	if errors.Is(err, store.ErrPresenceChanged) {
		return domain.Agent{}, time.Time{}, err
	}
	if err != nil {
		return domain.Agent{}, time.Time{}, storeErr(err, fmt.Sprintf("agent %q not found", a.ID), fmt.Sprintf("agent %s is revoked; its presence cannot change", a.Handle))
	}
	if cause == ReasonClockIn && ch.Action == presence.Set && ch.Override.Presence == presence.Out {
		cause = evaluator.ReasonClockOut
	}
	s.afterPresenceWrite(ctx, &updated, oldP, now, cause)
	return updated, now, nil
}

// afterPresenceWrite logs the change, tells every instance to refresh the
// agent, and evaluates the transition here at once.
func (s *Service) afterPresenceWrite(ctx context.Context, a *domain.Agent, oldP string, now time.Time, cause string) {
	p, src, until := presence.Effective(s.inputsOf(a), now)
	s.log.Info("presence changed", "agent", a.Handle, "agent_id", a.ID, "old", oldP, "new", p, "source", src, "until", until, "cause", cause)
	s.presenceWritten(ctx, a, cause)
	if _, err := s.eval.Evaluate(ctx, a.ID, now); err != nil {
		s.log.Warn("presence transition not claimed; the next evaluator pass retries", "agent_id", a.ID, "err", err)
	}
}

// applyAgentPresence applies an agent's own self verb (clock_in, clock_out)
// with the override guard: a write of the owner's that lands between the
// read and the write (an operator out override) is never overwritten; the
// verb is decided again on the new row, up to three times (design: Owner's word:
// the owner's word beats the agent's).
func (s *Service) applyAgentPresence(ctx context.Context, agentID, cause string, decide func(presence.Inputs, presence.Budget, time.Time) (presence.Change, presence.Budget, error)) (domain.Agent, time.Time, error) {
	for attempt := 0; ; attempt++ {
		a, err := s.freshAgent(ctx, agentID)
		if err != nil {
			return domain.Agent{}, time.Time{}, err
		}
		a, now, err := s.applyPresenceOnce(ctx, a, "agent:"+agentID, cause, true, decide)
		if !errors.Is(err, store.ErrPresenceChanged) {
			return a, now, err
		}
		if attempt == 2 {
			return domain.Agent{}, time.Time{}, domain.Errorf(domain.CodeConflict, "the presence changed while this call ran; call it again")
		}
	}
}

// SetSelfClockInCap sets the agent's self_clock_in_cap (design: Self clock-in cap:
// "8h", "90m", "0" = never outside its shift; at most 168h): the owner's
// part of PATCH /v1/agents/{ref}. Audited as agent.update. Errors:
// invalid_argument (pointer /self_clock_in_cap), not_found, conflict
// (revoked).
func (s *Service) SetSelfClockInCap(ctx context.Context, by domain.Person, ref, capText string) (domain.Agent, error) {
	d, err := presence.ParseSelfClockInCap(capText)
	if err != nil {
		return domain.Agent{}, err
	}
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return domain.Agent{}, err
	}
	if a.Revoked() {
		return domain.Agent{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it cannot be changed", a.Handle)
	}
	if time.Duration(a.SelfClockInCap) == d {
		return a, nil
	}
	updated, err := s.presenceStore().UpdatePresence(ctx, store.UpdatePresenceParams{
		AgentID: a.ID, Now: s.now(), SetCap: true, SelfClockInCap: d,
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "agent.update", AgentID: a.ID,
			Data: map[string]any{"self_clock_in_cap": presence.FormatCap(d)}},
	})
	if err != nil {
		return domain.Agent{}, storeErr(err, fmt.Sprintf("agent %q not found", ref), fmt.Sprintf("agent %s is revoked; it cannot be changed", a.Handle))
	}
	s.log.Info("self clock-in cap changed", "agent", a.Handle, "agent_id", a.ID, "cap", presence.FormatCap(d), "by", by.ID)
	s.configWritten(ctx, &updated)
	return updated, nil
}
