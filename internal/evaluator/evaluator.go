// Package evaluator holds the presence evaluator and this instance's
// presence cache (design: Presence evaluator): every agent's presence
// inputs, last seen transition and not-ready queues, kept fresh by the
// presence signals of the bus and a periodic "changed since" pass; it
// claims a transition when an agent's effective presence changes and
// broadcasts it. It is built from narrow ports (Store, bus.Bus, Publisher,
// Metrics, a clock and a logger) and knows nothing of the use cases.
package evaluator

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// Transition reasons (design: Presence evaluator): why an agent's presence changed.
const (
	ReasonClockIn     = "clock_in"
	ReasonClockOut    = "clock_out"
	ReasonOperator    = "operator"
	ReasonShiftStart  = "shift_start"
	ReasonOverrideEnd = "override_end"
)

// SyncSlack re-reads rows changed slightly before the last sync so clock
// skew between instances cannot hide a write from the safety net.
const SyncSlack = time.Minute

// Store is the part of the store the evaluator reads and writes.
type Store interface {
	// GetAgent reads one agent (a presence signal's refresh, a cache miss).
	GetAgent(ctx context.Context, ref store.AgentRef) (domain.Agent, error)
	// ListAgentsChangedSince pages through the agents whose row changed
	// at or after Since (the load and the pass's safety net).
	ListAgentsChangedSince(ctx context.Context, p store.ListChangedParams) ([]domain.Agent, error)
	// ClaimTransition records a transition once across all instances.
	ClaimTransition(ctx context.Context, p store.ClaimTransitionParams) (bool, error)
}

// Publisher publishes the operator event of a claimed transition
// (agent.presence_transition); presence is "in" or "out".
type Publisher interface {
	PresenceTransition(ctx context.Context, agentID, presence, reason string)
}

// Metrics counts claimed transitions; to is "in" or "out".
type Metrics interface {
	PresenceTransition(to string)
}

// Config holds the evaluator's ports. Store, Bus and Events are required.
type Config struct {
	Store Store
	// Bus carries the evaluator's signals: it publishes bus.PresenceTransition
	// and listens to bus.Presence and bus.PresenceTransition.
	Bus     bus.Bus
	Events  Publisher
	Clock   clockwork.Clock // nil = real clock
	Log     *slog.Logger    // nil = slog.Default()
	Metrics Metrics         // nil = counts nothing
	// Instance names this instance: a bus.Presence signal whose Origin it
	// is was written here, and Upsert already cached the row ("" = refresh
	// on every signal).
	Instance string
	// OnIn, when set, is called for every transition to "in" broadcast by
	// any instance that this instance has not handled yet (the digest of a
	// returning agent; design: Digest on return). It runs on the bus's delivery
	// goroutine and must not block: hand the digest to another goroutine.
	OnIn func(agentID, reason string)
}

// Evaluator keeps the presence cache and claims transitions. A pass costs
// O(agents whose presence changes · log n) plus one indexed "changed since"
// query: agents are kept in a min-heap by the instant their presence next
// changes (presence.Effective's until), so agents with nothing due are not
// touched. Safe for concurrent use.
type Evaluator struct {
	store   Store
	bus     bus.Bus
	events  Publisher
	clock   clockwork.Clock
	log     *slog.Logger
	metrics Metrics
	onIn    func(agentID, reason string)
	self    string // Config.Instance

	mu       sync.Mutex
	entries  map[string]*entry
	due      dueHeap
	lastSync time.Time
	loaded   bool
	// armed is the instant Run's timer is set to (zero: Run is not
	// waiting on it); wake tells Run that an agent fell due before it.
	armed time.Time
	wake  chan struct{}
}

type entry struct {
	agentID string
	handle  string
	active  bool
	inputs  presence.Inputs
	seen    string
	// handled is the last transition this instance handled (its digest on
	// "in"): set by the transition broadcast and by a catch-up. A stored
	// seen that differs after a bus outage is a transition this instance
	// missed.
	handled   string
	caughtUp  bool            // handled was set by a catch-up, not by the broadcast
	changedBy string          // presence_changed_by of the stored transition
	notReady  map[string]bool // queues last reported ready:false
	cause     string          // cause of the last presence write, for the digest reason
	updated   time.Time       // the row's updated_at: an older read never replaces a newer one
	due       time.Time       // zero = nothing scheduled
	idx       int             // heap index, -1 when not in the heap
}

type nopMetrics struct{}

func (nopMetrics) PresenceTransition(string) {}

// New builds an evaluator with an empty cache (Load fills it) and
// subscribes it to its bus signals.
func New(c Config) *Evaluator {
	workgroup.Defaults(&c.Clock, &c.Log)
	if c.Metrics == nil {
		c.Metrics = nopMetrics{}
	}
	e := &Evaluator{store: c.Store, bus: c.Bus, events: c.Events, clock: c.Clock, log: c.Log, metrics: c.Metrics, onIn: c.OnIn, self: c.Instance,
		entries: map[string]*entry{}, wake: make(chan struct{}, 1)}
	// A presence signal refreshes the cache on the bus's delivery goroutine
	// (one indexed read), so every signal delivered after it — a todo-ready,
	// a transition — already sees the new presence.
	bus.Listen(c.Bus, func(sig bus.Presence) {
		if sig.Origin != "" && sig.Origin == e.self {
			return // written here: Upsert cached the row
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.Refresh(ctx, sig.AgentID, sig.Cause)
	}, nil)
	bus.Listen(c.Bus, func(sig bus.PresenceTransition) {
		if e.transitioned(sig.AgentID, sig.Presence) && sig.Presence == presence.In && e.onIn != nil {
			e.onIn(sig.AgentID, sig.Reason)
		}
	}, nil)
	return e
}

// now returns the clock's time in UTC truncated to microseconds, the
// precision both stores keep.
func (e *Evaluator) now() time.Time { return e.clock.Now().UTC().Truncate(time.Microsecond) }

// InputsOf turns stored presence columns into presence.Inputs. A stored
// shift that no longer parses (it was validated on write) is ignored and
// logged on log rather than making the agent unusable.
func InputsOf(a *domain.Agent, log *slog.Logger) presence.Inputs {
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
			log.Error("stored shift does not parse; ignoring it", "agent", a.Handle, "err", err)
		} else {
			in.Shift = sh
		}
	}
	return in
}

func (e *Evaluator) entryFor(a *domain.Agent) *entry {
	en := &entry{agentID: a.ID, handle: a.Handle, active: a.Active && !a.Revoked(), inputs: InputsOf(a, e.log), seen: a.Presence.Seen, updated: a.UpdatedAt, idx: -1}
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

// Upsert replaces the cached entry of a freshly read (or just written)
// agent row and schedules it for evaluation now. cause is the cause of the
// presence write ("" = none), which names the transition it triggers.
func (e *Evaluator) Upsert(a *domain.Agent, cause string) {
	en := e.entryFor(a)
	en.cause = cause
	e.mu.Lock()
	defer e.mu.Unlock()
	e.putLocked(en, e.now())
}

func (e *Evaluator) putLocked(en *entry, due time.Time) {
	if old, ok := e.entries[en.agentID]; ok {
		if en.updated.Before(old.updated) {
			// A read that started before a newer write finished (another
			// signal's refresh racing this instance's own write): keep the
			// newer inputs, but evaluate them at due.
			if old.idx >= 0 {
				heap.Remove(&e.due, old.idx)
			}
			old.due = due
			e.pushLocked(old)
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
	e.pushLocked(en)
}

// pushLocked schedules en at en.due and wakes Run when en is now the first
// agent due and earlier than Run's timer (design: Shift boundaries on time).
func (e *Evaluator) pushLocked(en *entry) {
	heap.Push(&e.due, en)
	if en.idx == 0 && (e.armed.IsZero() || en.due.Before(e.armed)) {
		select {
		case e.wake <- struct{}{}:
		default: // a wake is pending already
		}
	}
}

// Load fills the cache from the store (all unrevoked agents). Errors: the
// store's.
func (e *Evaluator) Load(ctx context.Context) error { return e.loadAt(ctx, e.now()) }

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
	after := ""
	for {
		agents, err := e.store.ListAgentsChangedSince(ctx, store.ListChangedParams{Since: since, AfterID: after, Limit: 1000})
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
// many transitions this instance claimed. Errors: the store's.
func (e *Evaluator) Pass(ctx context.Context) (int, error) {
	now := e.now()
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
	return e.evaluateDue(ctx, now)
}

// PassDue evaluates, at the clock's now, every cached agent whose presence
// is due to change, without re-reading the store: what Run does at the
// instant the first agent falls due (design: Shift boundaries on time). It
// returns how many transitions this instance claimed. Errors: the store's.
func (e *Evaluator) PassDue(ctx context.Context) (int, error) { return e.evaluateDue(ctx, e.now()) }

// evaluateDue evaluates the agents due at or before now.
func (e *Evaluator) evaluateDue(ctx context.Context, now time.Time) (int, error) {
	var due []string
	e.mu.Lock()
	for e.due.Len() > 0 && !e.due[0].due.After(now) {
		en := heap.Pop(&e.due).(*entry)
		due = append(due, en.agentID)
	}
	e.mu.Unlock()
	// Agents on one shift fall due at the same instant; their claims are
	// independent rows, so up to dueWorkers run at once (design: Shift
	// boundaries on time). The first error stops the rest; the agents not
	// evaluated are due again at the next pass.
	var (
		claimed atomic.Int64
		next    atomic.Int64
		errOnce sync.Once
		first   error
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	work := func() {
		for !stop.Load() {
			i := int(next.Add(1)) - 1
			if i >= len(due) {
				return
			}
			ok, err := e.Evaluate(ctx, due[i], now)
			if err != nil {
				errOnce.Do(func() { first = err })
				stop.Store(true)
				e.reschedule(due[i:], now.Add(RetryAfter))
				return
			}
			if ok {
				claimed.Add(1)
			}
		}
	}
	for range min(dueWorkers, len(due)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return int(claimed.Load()), first
}

// dueWorkers bounds the evaluations of one instant's due agents that run at
// once: enough to overlap the claims' round trips, few against the store's
// pool (24 connections on PostgreSQL; SQLite queues them on its writer).
const dueWorkers = 8

// RetryAfter is how soon the agents of a due evaluation that failed (a
// claim the store refused) are evaluated again, rather than at their next
// change or the next pass.
const RetryAfter = 5 * time.Second

// reschedule makes the agents ids due at the latest at at: those of a due
// evaluation that failed, whose transition would otherwise wait for their
// next change.
func (e *Evaluator) reschedule(ids []string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range ids {
		en, ok := e.entries[id]
		if !ok || !en.active || (en.idx >= 0 && !en.due.After(at)) {
			continue
		}
		if en.idx >= 0 {
			heap.Remove(&e.due, en.idx)
		}
		en.due = at
		e.pushLocked(en)
	}
}

// Run runs the evaluator until ctx ends (design: Shift boundaries on time):
// a Pass every `every` (the safety net that re-reads the rows changed
// since the last one), and between passes a timer set to the instant the
// first cached agent's presence is due to change (a shift's start or end,
// an override's until), at which PassDue evaluates the agents due. Every
// write or signal that makes an agent due earlier re-arms the timer, and
// every wake-up re-arms it from the clock, so a jump of the wall clock
// misplaces it for at most one period. A failed pass is logged; the next
// one retries.
func (e *Evaluator) Run(ctx context.Context, every time.Duration) {
	tick := e.clock.NewTicker(every)
	defer tick.Stop()
	timer := e.clock.NewTimer(every)
	defer timer.Stop()
	defer func() {
		e.mu.Lock()
		e.armed = time.Time{}
		e.mu.Unlock()
	}()
	for {
		e.arm(timer, every)
		var err error
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
			_, err = e.Pass(ctx)
		case <-timer.Chan():
			_, err = e.PassDue(ctx)
		case <-e.wake:
		}
		if err != nil && ctx.Err() == nil {
			e.log.Warn("presence evaluator pass failed", "err", err)
		}
	}
}

// arm sets timer to the instant the first cached agent falls due, at most
// every ahead (nothing due: the timer only wakes Run up, harmlessly).
func (e *Evaluator) arm(timer clockwork.Timer, every time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	at := now.Add(every)
	if e.due.Len() > 0 && e.due[0].due.Before(at) {
		at = e.due[0].due
	}
	e.armed = at
	timer.Reset(max(at.Sub(now), 0))
}

// Evaluate compares the agent's effective presence at now with the last
// seen transition and, when they differ, claims the transition (only one
// instance wins), broadcasts it (bus.PresenceTransition) and publishes its
// event. It reschedules the agent at its next change and reports whether
// this instance claimed a transition. The use cases call it right after
// every presence write (design: Presence evaluator). Errors: the store's.
func (e *Evaluator) Evaluate(ctx context.Context, agentID string, now time.Time) (bool, error) {
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
		e.pushLocked(en)
	}
	e.mu.Unlock()
	if p == seen {
		return false, nil
	}
	claimed, err := e.store.ClaimTransition(ctx, store.ClaimTransitionParams{AgentID: agentID, New: p, At: now, By: src})
	if err != nil {
		return false, err
	}
	if !claimed {
		// Another instance claimed p, or claimed a transition at a later
		// instant than now (its clock a little ahead): the row says which.
		// Re-read it and evaluate again a second later (design: Transition
		// claim), so a lost race costs one read and a refused write-driven
		// transition is claimed then, with its cause.
		e.Refresh(ctx, agentID, cause)
		return false, nil
	}
	e.mu.Lock()
	if cur, ok := e.entries[agentID]; ok {
		cur.seen = p
	}
	e.mu.Unlock()
	reason := TransitionReason(inputs, cause, now)
	e.log.Info("presence transition", "agent_id", agentID, "new", p, "source", src, "reason", reason)
	if err := bus.Send(ctx, e.bus, bus.PresenceTransition{AgentID: agentID, Presence: p, Reason: reason}); err != nil {
		e.log.Warn("presence transition not broadcast; the digest is lost (at-most-once)", "agent_id", agentID, "err", err)
	}
	e.metrics.PresenceTransition(p)
	e.events.PresenceTransition(ctx, agentID, p, reason)
	return true, nil
}

// TransitionReason names why presence changed: the cause of the write that
// triggered it, else override_end when an override stopped deciding at
// now, else shift_start.
func TransitionReason(in presence.Inputs, cause string, now time.Time) string {
	switch cause {
	case ReasonClockIn, ReasonOperator, ReasonClockOut:
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

// Refresh re-reads a cached agent after a presence write on any instance
// (the bus.Presence signal); cause is the write's. It evaluates the agent
// a second later (Run's timer, or the next pass), not now: the writing
// instance evaluates at once; this avoids racing it for the claim. An agent gone from
// the store leaves the cache. A failed read is logged; the next pass
// retries.
func (e *Evaluator) Refresh(ctx context.Context, agentID, cause string) {
	a, err := e.store.GetAgent(ctx, store.AgentRef{ID: agentID})
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
		e.log.Warn("presence refresh failed; the next evaluator pass retries", "agent_id", agentID, "err", err)
		return
	}
	en := e.entryFor(&a)
	en.cause = cause
	e.mu.Lock()
	e.putLocked(en, e.now().Add(time.Second))
	e.mu.Unlock()
}

// transitioned records a claimed transition broadcast by any instance
// (bus.PresenceTransition) and reports whether this instance still has to
// handle it (its digest on "in"): false when a catch-up after a bus outage
// handled it first and this is the broadcast arriving after all.
func (e *Evaluator) transitioned(agentID, p string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if en, ok := e.entries[agentID]; ok {
		en.seen = p
		if en.caughtUp && en.handled == p {
			en.caughtUp = false
			return false
		}
		en.handled, en.caughtUp = p, false
	}
	return true
}

// MissedTransitions returns, and marks handled, the cached agents whose
// stored transition (refreshed by a Load) this instance has not handled:
// the broadcasts it missed while its bus listener was down, each as the
// bus.PresenceTransition that would have carried it. Its Reason comes from
// the stored source of the change (presence_changed_by), else as
// TransitionReason would give it now.
func (e *Evaluator) MissedTransitions() []bus.PresenceTransition {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []bus.PresenceTransition
	for _, en := range e.entries {
		if en.active && en.seen != en.handled {
			en.handled, en.caughtUp = en.seen, true
			out = append(out, bus.PresenceTransition{AgentID: en.agentID, Presence: en.seen, Reason: catchUpReason(en.seen, en.changedBy, en.inputs, now)})
		}
	}
	return out
}

// catchUpReason names the reason of a transition learnt from the store
// rather than from its broadcast: from the stored source of the change
// (presence_changed_by), else as TransitionReason would at now.
func catchUpReason(p, by string, in presence.Inputs, now time.Time) string {
	switch by {
	case "operator":
		return ReasonOperator
	case "agent":
		if p == presence.Out {
			return ReasonClockOut
		}
		return ReasonClockIn
	}
	return TransitionReason(in, "", now)
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
		a, err := e.store.GetAgent(ctx, store.AgentRef{ID: agentID})
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

// Excluded returns "<agent_id>:<queue>" for each not-ready queue of agents
// (the form of store.SweepParams.Excluded).
func (e *Evaluator) Excluded(agents []string) []string {
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

// NotReadyQueues returns the queues the agent last reported not ready, in
// no particular order.
func (e *Evaluator) NotReadyQueues(agentID string) []string {
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
type dueHeap []*entry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *dueHeap) Push(x any) {
	en := x.(*entry)
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
