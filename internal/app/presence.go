package app

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// Digest reasons (DESIGN.md §3.7).
const (
	ReasonClockIn     = "clock_in"
	ReasonOperator    = "operator"
	ReasonShiftStart  = "shift_start"
	ReasonOverrideEnd = "override_end"
	ReasonReconnect   = "reconnect"
	// ReasonConnect is the digest of an agent's first notification stream
	// ever (issue 9 item 9); later first streams on an instance are
	// ReasonReconnect.
	ReasonConnect = "connect"
)

// inputsOf turns stored presence columns into presence.Inputs. A stored
// shift that no longer parses (it was validated on write) is ignored and
// logged rather than making the agent unusable.
func (s *Service) inputsOf(a *domain.Agent) presence.Inputs {
	in := presence.Inputs{
		Override:      a.Presence.Override,
		OverrideUntil: a.Presence.OverrideUntil,
		OverrideBy:    a.Presence.OverrideBy,
	}
	if a.Presence.OverrideSetAt != nil {
		in.OverrideSetAt = *a.Presence.OverrideSetAt
	}
	if a.Presence.Shift != "" {
		sh, err := presence.ParseShift(a.Presence.Shift)
		if err != nil {
			s.log.Error("stored shift does not parse; ignoring it", "agent", a.Handle, "err", err)
		} else {
			in.Shift = sh
		}
	}
	return in
}

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

// --- self verbs (DESIGN.md §3.4) ---

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

// ClockIn is the `clock_in {for?}` self verb (DESIGN.md §3.4); forArg
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

// --- operator controls (DESIGN.md §3.5) ---

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
	after, _, err := s.applyPresence(ctx, a.ID, "operator:"+by.ID, ReasonOperator, func(cur presence.Inputs, now time.Time) (presence.Change, error) {
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
	after, _, err := s.applyPresence(ctx, a.ID, "operator:"+by.ID, ReasonOperator, func(cur presence.Inputs, _ time.Time) (presence.Change, error) {
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
// is validated with the grammar of DESIGN.md §3.2 (invalid_argument naming
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

// applyPresence reads the agent row, lets decide compute the override
// change, writes it with an audit entry (unless Keep), logs one line,
// signals every instance and evaluates the transition right away
// (DESIGN.md §3.7 "right after every presence write"). It returns the row
// after the change (the unchanged row on Keep) and the decision time.
func (s *Service) applyPresence(ctx context.Context, agentID, actor, cause string, decide func(presence.Inputs, time.Time) (presence.Change, error)) (domain.Agent, time.Time, error) {
	return s.applyPresenceOnce(ctx, agentID, actor, cause, false, func(cur presence.Inputs, b presence.Budget, now time.Time) (presence.Change, presence.Budget, error) {
		ch, err := decide(cur, now)
		return ch, b, err
	})
}

// applyPresenceOnce is applyPresence with the self clock-in budget: decide
// also gets the agent's presence.Budget and returns the one to store (the
// ledger is written with the override when it changed). With guarded the
// write happens only while the override columns still hold what decide
// saw, else store.ErrPresenceChanged.
func (s *Service) applyPresenceOnce(ctx context.Context, agentID, actor, cause string, guarded bool, decide func(presence.Inputs, presence.Budget, time.Time) (presence.Change, presence.Budget, error)) (domain.Agent, time.Time, error) {
	a, err := s.freshAgent(ctx, agentID)
	if err != nil {
		return domain.Agent{}, time.Time{}, err
	}
	if a.Revoked() {
		return domain.Agent{}, time.Time{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; its presence cannot change", a.Handle)
	}
	now := s.now()
	cur := s.inputsOf(&a)
	b := budgetOf(&a)
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
		return domain.Agent{}, time.Time{}, storeErr(err, fmt.Sprintf("agent %q not found", agentID), fmt.Sprintf("agent %s is revoked; its presence cannot change", a.Handle))
	}
	if cause == ReasonClockIn && ch.Action == presence.Set && ch.Override.Presence == presence.Out {
		cause = "clock_out"
	}
	s.afterPresenceWrite(ctx, &updated, oldP, now, cause)
	return updated, now, nil
}

// afterPresenceWrite logs the change, tells every instance to refresh the
// agent, and evaluates the transition here at once.
func (s *Service) afterPresenceWrite(ctx context.Context, a *domain.Agent, oldP string, now time.Time, cause string) {
	p, src, until := presence.Effective(s.inputsOf(a), now)
	s.log.Info("presence changed", "agent", a.Handle, "agent_id", a.ID, "old", oldP, "new", p, "source", src, "until", until, "cause", cause)
	s.Evaluator.upsert(a, cause)
	s.signalPresence(ctx, a.ID, cause)
	s.Evaluator.evaluateOne(ctx, a.ID, now)
}

// signalPresence tells every instance that an agent's presence inputs
// changed (payload "<agent_id>:<cause>").
func (s *Service) signalPresence(ctx context.Context, agentID, cause string) {
	if err := s.bus.Publish(ctx, bus.ChannelPresence, agentID+":"+cause); err != nil {
		s.log.Warn("presence signal not published; other instances catch up within one evaluator pass", "agent_id", agentID, "err", err)
	}
}

// --- the evaluator (DESIGN.md §3.7) ---

// Evaluator keeps this instance's presence cache — every agent's presence
// inputs, last seen transition and not-ready queues — and claims
// transitions when an agent's effective presence changes. A pass costs
// O(agents whose presence changes · log n) plus one indexed "changed since"
// query: agents are kept in a min-heap by the instant their presence next
// changes (presence.Effective's until), so agents with nothing due are not
// touched.
type Evaluator struct {
	s *Service

	mu       sync.Mutex
	entries  map[string]*presenceEntry
	due      dueHeap
	lastSync time.Time
	loaded   bool
}

type presenceEntry struct {
	agentID string
	handle  string
	active  bool
	inputs  presence.Inputs
	seen    string
	// handled is the last transition this instance handled (its digest on
	// "in"): set by the transition broadcast and by CatchUp. A stored seen
	// that differs after a bus outage is a transition this instance missed.
	handled   string
	caughtUp  bool            // handled was set by CatchUp, not by the broadcast
	changedBy string          // presence_changed_by of the stored transition
	notReady  map[string]bool // queues last reported ready:false
	cause     string          // cause of the last presence write, for the digest reason
	updated   time.Time       // the row's updated_at: an older read never replaces a newer one
	due       time.Time       // zero = nothing scheduled
	idx       int             // heap index, -1 when not in the heap
}

// SyncSlack re-reads rows changed slightly before the last sync so clock
// skew between instances cannot hide a write from the safety net.
const SyncSlack = time.Minute

func newEvaluator(s *Service) *Evaluator {
	return &Evaluator{s: s, entries: map[string]*presenceEntry{}}
}

func (e *Evaluator) entryFor(a *domain.Agent) *presenceEntry {
	en := &presenceEntry{agentID: a.ID, handle: a.Handle, active: a.Active && !a.Revoked(), inputs: e.s.inputsOf(a), seen: a.Presence.Seen, updated: a.UpdatedAt, idx: -1}
	if en.seen == "" {
		en.seen = presence.In
	}
	en.handled, en.changedBy = en.seen, a.Presence.ChangedBy
	if len(a.Liveness.ProjectReadiness) > 0 {
		var rs []struct {
			Queue string `json:"queue"`
			Ready bool   `json:"ready"`
		}
		if json.Unmarshal(a.Liveness.ProjectReadiness, &rs) == nil {
			for _, r := range rs {
				if !r.Ready {
					if en.notReady == nil {
						en.notReady = map[string]bool{}
					}
					en.notReady[r.Queue] = true
				}
			}
		}
	}
	return en
}

// upsert replaces the cached entry of a freshly read agent and schedules it
// for evaluation now. Caller must not hold e.mu.
func (e *Evaluator) upsert(a *domain.Agent, cause string) {
	en := e.entryFor(a)
	en.cause = cause
	e.mu.Lock()
	defer e.mu.Unlock()
	e.putLocked(en, e.s.now())
}

func (e *Evaluator) putLocked(en *presenceEntry, due time.Time) {
	if old, ok := e.entries[en.agentID]; ok {
		if en.updated.Before(old.updated) {
			// A read that started before a newer write finished (another
			// signal's refresh racing this instance's own write): keep the
			// newer inputs, but evaluate them at due.
			if old.idx >= 0 {
				heap.Remove(&e.due, old.idx)
			}
			old.due = due
			heap.Push(&e.due, old)
			return
		}
		if old.idx >= 0 {
			heap.Remove(&e.due, old.idx)
		}
		if en.cause == "" {
			en.cause = old.cause
		}
		en.handled, en.caughtUp = old.handled, old.caughtUp
	}
	e.entries[en.agentID] = en
	if !en.active {
		return
	}
	en.due = due
	heap.Push(&e.due, en)
}

// Load fills the cache from the store (all unrevoked agents).
func (e *Evaluator) Load(ctx context.Context) error { return e.loadAt(ctx, e.s.now()) }

func (e *Evaluator) loadAt(ctx context.Context, now time.Time) error {
	if err := e.syncSince(ctx, time.Time{}, now); err != nil {
		return err
	}
	e.mu.Lock()
	e.lastSync, e.loaded = now, true
	e.mu.Unlock()
	return nil
}

// syncSince re-reads agents changed since `since` and schedules them at
// due, the pass's own now, so the same pass evaluates them.
func (e *Evaluator) syncSince(ctx context.Context, since, due time.Time) error {
	ps := e.s.presenceStore()
	after := ""
	for {
		agents, err := ps.ListAgentsChangedSince(ctx, store.ListChangedParams{Since: since, AfterID: after, Limit: 1000})
		if err != nil {
			return err
		}
		e.mu.Lock()
		for i := range agents {
			en := e.entryFor(&agents[i])
			e.putLocked(en, due)
		}
		e.mu.Unlock()
		if len(agents) < 1000 {
			return nil
		}
		after = agents[len(agents)-1].ID
	}
}

// Pass runs one evaluator pass at the clock's now: it re-reads agents
// changed since the last pass (the net under missed bus signals) and
// evaluates every agent whose presence is due to change. It returns how
// many transitions this instance claimed.
func (e *Evaluator) Pass(ctx context.Context) (int, error) {
	now := e.s.now()
	e.mu.Lock()
	since, loaded := e.lastSync, e.loaded
	e.mu.Unlock()
	if !loaded {
		if err := e.loadAt(ctx, now); err != nil {
			return 0, err
		}
	} else {
		if err := e.syncSince(ctx, since.Add(-SyncSlack), now); err != nil {
			return 0, err
		}
		e.mu.Lock()
		e.lastSync = now
		e.mu.Unlock()
	}
	var due []string
	e.mu.Lock()
	for e.due.Len() > 0 && !e.due[0].due.After(now) {
		en := heap.Pop(&e.due).(*presenceEntry)
		due = append(due, en.agentID)
	}
	e.mu.Unlock()
	claimed := 0
	for _, id := range due {
		ok, err := e.evaluateOne(ctx, id, now)
		if err != nil {
			return claimed, err
		}
		if ok {
			claimed++
		}
	}
	return claimed, nil
}

// evaluateOne compares the agent's effective presence with the last seen
// transition and, when they differ, claims the transition (only one
// instance wins) and broadcasts "<agent_id>:<new>:<reason>". It reschedules
// the agent at its next change.
func (e *Evaluator) evaluateOne(ctx context.Context, agentID string, now time.Time) (bool, error) {
	e.mu.Lock()
	en, ok := e.entries[agentID]
	if !ok || !en.active {
		e.mu.Unlock()
		return false, nil
	}
	if en.idx >= 0 {
		heap.Remove(&e.due, en.idx)
	}
	p, src, until := presence.Effective(en.inputs, now)
	seen, cause, inputs := en.seen, en.cause, en.inputs
	// A write's cause names only the transition it triggers at once; a later
	// transition is time-driven (shift_start, override_end).
	en.cause = ""
	if until != nil {
		en.due = *until
		heap.Push(&e.due, en)
	}
	e.mu.Unlock()
	if p == seen {
		return false, nil
	}
	claimed, err := e.s.presenceStore().ClaimTransition(ctx, store.ClaimTransitionParams{AgentID: agentID, New: p, At: now, By: src})
	if err != nil {
		return false, err
	}
	e.mu.Lock()
	if cur, ok := e.entries[agentID]; ok {
		cur.seen = p
	}
	e.mu.Unlock()
	if !claimed {
		return false, nil
	}
	reason := transitionReason(inputs, cause, now)
	e.s.log.Info("presence transition", "agent_id", agentID, "new", p, "source", src, "reason", reason)
	if err := e.s.bus.Publish(ctx, bus.ChannelPresenceTransition, agentID+":"+p+":"+reason); err != nil {
		e.s.log.Warn("presence transition not broadcast; the digest is lost (at-most-once)", "agent_id", agentID, "err", err)
	}
	e.s.metrics.PresenceTransition(p)
	e.s.events.PresenceTransition(ctx, agentID, p, reason)
	return true, nil
}

// transitionReason names why presence changed: the cause of the write that
// triggered it, else override_end when an override stopped deciding at
// now, else shift_start.
func transitionReason(in presence.Inputs, cause string, now time.Time) string {
	switch cause {
	case ReasonClockIn, ReasonOperator, "clock_out":
		return cause
	}
	if in.Override != "" {
		if live, _ := presence.OverrideLive(in, now.Add(-time.Microsecond)); live {
			if stillLive, _ := presence.OverrideLive(in, now); !stillLive {
				return ReasonOverrideEnd
			}
		}
		if live, _ := presence.OverrideLive(in, now); !live && in.Shift == nil {
			return ReasonOverrideEnd
		}
	}
	return ReasonShiftStart
}

// onPresenceSignal refreshes a cached agent after a presence write on any
// instance (payload "<agent_id>:<cause>").
func (e *Evaluator) onPresenceSignal(payload string) {
	agentID, cause, _ := strings.Cut(payload, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, err := e.s.store.GetAgent(ctx, store.AgentRef{ID: agentID})
	if errors.Is(err, domain.ErrNotFound) {
		e.mu.Lock()
		if en, ok := e.entries[agentID]; ok {
			if en.idx >= 0 {
				heap.Remove(&e.due, en.idx)
			}
			delete(e.entries, agentID)
		}
		e.mu.Unlock()
		return
	}
	if err != nil {
		e.s.log.Warn("presence refresh failed; the next evaluator pass retries", "agent_id", agentID, "err", err)
		return
	}
	// Evaluate at the next pass, not now: the writing instance evaluates
	// at once and knows the cause; this avoids racing it for the claim.
	en := e.entryFor(&a)
	en.cause = cause
	e.mu.Lock()
	e.putLocked(en, e.s.now().Add(time.Second))
	e.mu.Unlock()
}

// onTransition handles a claimed transition broadcast by any instance
// (payload "<agent_id>:<new>:<reason>"): it updates the cache and, on "in",
// sends one digest to one of this instance's open-stream sessions.
func (e *Evaluator) onTransition(payload string) {
	parts := strings.SplitN(payload, ":", 3)
	if len(parts) != 3 {
		return
	}
	agentID, p, reason := parts[0], parts[1], parts[2]
	e.mu.Lock()
	if en, ok := e.entries[agentID]; ok {
		en.seen = p
		if en.caughtUp && en.handled == p {
			// Already handled here: CatchUp got to it first after a bus
			// outage, and this is the broadcast arriving after all.
			en.caughtUp = false
			e.mu.Unlock()
			return
		}
		en.handled, en.caughtUp = p, false
	}
	e.mu.Unlock()
	if p == presence.In {
		e.s.Digests.Send(context.Background(), agentID, reason)
	}
}

// missedTransitions returns, and marks handled, the cached agents whose
// stored transition (seen, refreshed by a reload) this instance has not
// handled: the broadcasts it missed while its bus listener was down.
func (e *Evaluator) missedTransitions() []missedTransition {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []missedTransition
	for _, en := range e.entries {
		if en.active && en.seen != en.handled {
			en.handled, en.caughtUp = en.seen, true
			out = append(out, missedTransition{agentID: en.agentID, presence: en.seen, by: en.changedBy, inputs: en.inputs})
		}
	}
	return out
}

type missedTransition struct {
	agentID, presence, by string
	inputs                presence.Inputs
}

// catchUpReason names the reason of a transition learnt from the store
// rather than from its broadcast: from the stored source of the change
// (presence_changed_by), else as transitionReason would at now.
func catchUpReason(p, by string, in presence.Inputs, now time.Time) string {
	switch by {
	case "operator":
		return ReasonOperator
	case "agent":
		if p == presence.Out {
			return "clock_out"
		}
		return ReasonClockIn
	}
	return transitionReason(in, "", now)
}

// Presence returns the cached effective presence of an agent at now, and
// whether the agent is known and active. An agent not cached yet (vended on
// another instance a moment ago) is read from the store once.
func (e *Evaluator) Presence(agentID string, now time.Time) (p string, ok bool) {
	e.mu.Lock()
	en, ok := e.entries[agentID]
	e.mu.Unlock()
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a, err := e.s.store.GetAgent(ctx, store.AgentRef{ID: agentID})
		cancel()
		if err != nil {
			return "", false
		}
		en = e.entryFor(&a)
		e.mu.Lock()
		if cur, ok := e.entries[agentID]; ok {
			en = cur
		} else {
			e.putLocked(en, now)
		}
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !en.active {
		return "", false
	}
	p, _, _ = presence.Effective(en.inputs, now)
	return p, true
}

// NotReady reports whether the agent last reported queue not ready.
func (e *Evaluator) NotReady(agentID, queue string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	en, ok := e.entries[agentID]
	return ok && en.notReady[queue]
}

// excluded returns "<agent_id>:<queue>" for each not-ready queue of agents.
func (e *Evaluator) excluded(agents []string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, id := range agents {
		if en, ok := e.entries[id]; ok {
			for q := range en.notReady {
				out = append(out, id+":"+q)
			}
		}
	}
	return out
}

func (e *Evaluator) notReadyQueues(agentID string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	if en, ok := e.entries[agentID]; ok {
		for q := range en.notReady {
			out = append(out, q)
		}
	}
	return out
}

// dueHeap orders entries by due time.
type dueHeap []*presenceEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *dueHeap) Push(x any) {
	en := x.(*presenceEntry)
	en.idx = len(*h)
	*h = append(*h, en)
}
func (h *dueHeap) Pop() any {
	old := *h
	n := len(old)
	en := old[n-1]
	old[n-1] = nil
	en.idx = -1
	*h = old[:n-1]
	return en
}

// budgetOf returns the agent's self clock-in budget (DESIGN.md §3.4): the
// owner's cap and the stored ledger.
func budgetOf(a *domain.Agent) presence.Budget {
	b := presence.Budget{Cap: time.Duration(a.SelfClockInCap), Used: a.Presence.SelfInUsed}
	if a.Presence.SelfInStretch != nil {
		b.Stretch = *a.Presence.SelfInStretch
	}
	return b
}

// applyAgentPresence applies an agent's own self verb (clock_in, clock_out)
// with the override guard: a write of the owner's that lands between the
// read and the write (an operator out override) is never overwritten; the
// verb is decided again on the new row, up to three times (DESIGN.md §3.4:
// the owner's word beats the agent's).
func (s *Service) applyAgentPresence(ctx context.Context, agentID, cause string, decide func(presence.Inputs, presence.Budget, time.Time) (presence.Change, presence.Budget, error)) (domain.Agent, time.Time, error) {
	for attempt := 0; ; attempt++ {
		a, now, err := s.applyPresenceOnce(ctx, agentID, "agent:"+agentID, cause, true, decide)
		if !errors.Is(err, store.ErrPresenceChanged) {
			return a, now, err
		}
		if attempt == 2 {
			return domain.Agent{}, time.Time{}, domain.Errorf(domain.CodeConflict, "the presence changed while this call ran; call it again")
		}
	}
}

// SetSelfClockInCap sets the agent's self_clock_in_cap (DESIGN.md §3.4:
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
	s.signalPresence(ctx, a.ID, "")
	return updated, nil
}
