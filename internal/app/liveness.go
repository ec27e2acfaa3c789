package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/store"
)

// The liveness tracker: heartbeat presence of DESIGN.md §5 (seed 000). The
// rules themselves live in internal/liveness (pure); this file runs them on
// the injected clock and the store and bus ports.
//
// One Tracker per process keeps one entry per agent it has seen: the last
// heartbeat (database clock, liveness_clock.go), the last full report, the
// last published pair and the deadline timer. Steady heartbeats only touch
// memory; the flush loop writes dirty entries once per
// agent.heartbeat_persist_interval (D-M2-20-5), so database writes are
// bounded by agents ÷ persist interval, not by the heartbeat rate. A
// transition of the liveness state (first heartbeat, coming back, offline)
// is written at once besides (issue 8 item 1), and the reported-change
// audit (D-M2-20-3, group-committed: liveness_audit.go) and project
// readiness (D-M2-20-10) write on the heartbeat path, only on a change.
// Deadlines are extended by stalls of the process (liveness_stall.go).
//
// Several instances: the instance that receives an agent's heartbeat owns
// the agent's deadline. When it did not own it yet it broadcasts a claim on
// bus.ChannelLiveness carrying its heartbeat time; the others drop their
// timer without publishing (liveness_claims.go). So no instance reports an
// agent offline while another holds a heartbeat fresher than the timeout.

// LivenessConfig is what the tracker reads of the configuration (DESIGN.md
// §5.3). Zero durations take the §5.3 defaults.
type LivenessConfig struct {
	// PresenceTimeout is agent.presence_timeout (default 45 s): an agent is
	// offline at and after its last heartbeat + this.
	PresenceTimeout time.Duration
	// PersistInterval is agent.heartbeat_persist_interval (default 60 s):
	// the flush period, i.e. at most one database write per agent per
	// interval.
	PersistInterval time.Duration
	// HeartbeatInterval is sync.heartbeat_interval (default 15 s), returned
	// as HeartbeatAck.interval_ms and announced by the gateway.
	HeartbeatInterval time.Duration
	// MismatchAlertAfter is billing.mismatch_alert_after (default 10 min).
	MismatchAlertAfter time.Duration
	// ShutdownTimeout is shutdown.total_timeout (default 30 s), the bound of
	// the final flush when Stop's context has no deadline.
	ShutdownTimeout time.Duration
	// RateLimit (heartbeats per second, default DefaultHeartbeatRate) and
	// RateBurst (default DefaultHeartbeatBurst) bound each principal's
	// heartbeats (token bucket).
	RateLimit float64
	RateBurst int
	// DBClock reads the database's clock (the server passes the store's
	// DBNow). The tracker keeps every time it stores or compares across
	// instances — last heartbeats, claims, deadlines read from rows — on
	// that clock: it measures the offset of the database's clock from its
	// own every ClockSyncInterval and applies it, so a skewed wall clock of
	// one instance changes nothing (DESIGN.md §4). nil = this process's
	// clock is the reference (one instance; tests on a fake clock).
	DBClock func(context.Context) (time.Time, error)
	// ClockSyncInterval is how often the offset is measured again (default
	// 5 s).
	ClockSyncInterval time.Duration
	// StallThreshold turns on the stall detector (liveness_stall.go): a gap
	// this long in the process's run extends every deadline by it. 0 = off
	// (the server sets DefaultStallThreshold).
	StallThreshold time.Duration
}

func (c LivenessConfig) withDefaults() LivenessConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.PresenceTimeout, 45*time.Second)
	def(&c.PersistInterval, 60*time.Second)
	def(&c.HeartbeatInterval, 15*time.Second)
	def(&c.MismatchAlertAfter, 10*time.Minute)
	def(&c.ShutdownTimeout, 30*time.Second)
	def(&c.ClockSyncInterval, 5*time.Second)
	if c.RateLimit <= 0 {
		c.RateLimit = DefaultHeartbeatRate
	}
	if c.RateBurst <= 0 {
		c.RateBurst = DefaultHeartbeatBurst
	}
	return c
}

// Ack is the answer to an accepted heartbeat (HeartbeatAck): the interval
// at which the adapter should send the next one, in milliseconds
// (sync.heartbeat_interval; DESIGN.md §5.2, D-M2-20-11).
type Ack struct {
	IntervalMS int64 `json:"interval_ms"`
}

// Tracker is the liveness tracker. Safe for concurrent use.
type Tracker struct {
	s         *Service
	cfg       LivenessConfig
	ls        store.LivenessStore // nil when the store has no liveness part
	limiter   *rateLimiter
	seed      maphash.Seed
	shards    [64]lvShard
	stopped   atomic.Bool
	written   atomic.Int64 // rows written by flush passes
	flushMu   sync.Mutex
	flushedAt time.Time // end of the last flush pass (guarded by flushMu)
	runMu     sync.Mutex
	cancel    context.CancelFunc
	loopDone  chan struct{}

	dbOff  atomic.Int64 // database clock − this process's clock, ns (liveness_clock.go)
	stalls *StallDetector

	urgentMu  sync.Mutex
	urgent    map[*lvEntry]struct{} // transitions to write at once (liveness_flush.go)
	urgentRun bool

	audits auditBatcher // group commit of reported changes (liveness_audit.go)
}

type lvShard struct {
	mu sync.RWMutex
	m  map[string]*lvEntry
}

// lvEntry is what the tracker knows of one agent. Every field is guarded by
// mu (held only for memory, never across a store call); hbMu serialises the
// heartbeats of one agent, store writes included.
type lvEntry struct {
	hbMu sync.Mutex // serialises the agent's heartbeats, store writes included
	mu   sync.Mutex

	id, handle, owner string
	active            bool
	configAt          time.Time // updated_at of the row the configuration came from
	billingMode       string    // configured ("" = none)
	toolClass         string    // configured ("" = none)

	owned         bool // this instance owns the deadline
	timer         clockwork.Timer
	armedAt       time.Time // when timer fires; zero = not armed
	fromStart     bool      // loaded by the start rule, no heartbeat since
	startDeadline time.Time // the start rule's deadline (fromStart only)
	reported      string    // state the last heartbeat reported (online/degraded)
	lastHB        time.Time // latest known heartbeat, database clock (local or claimed)
	// arr holds the arrivals of heartbeats (database clock): the newest, and
	// the one before it. A heartbeat still being processed — queued behind
	// the agent part of an earlier one on a gateway connection, where a
	// newer one replaces it, or waiting for the audit's group commit —
	// defers the deadline (liveness first) but never makes the agent online
	// by itself. Its own lock: Arrive never waits for mu.
	arr struct {
		mu           sync.Mutex
		latest, prev time.Time
	}
	state string // the state last evaluated and published
	pub   liveness.PublishPair

	hb             *liveness.Heartbeat // the last full report (nil: none known)
	audited        store.ReportedPair  // the audited pair as last stored
	readiness      []liveness.ReadinessEntry
	readinessKnown bool

	mismatchSince, modeMismatchSince *time.Time
	dirty                            bool

	last atomic.Pointer[decoded] // read without mu
}

func newTracker(s *Service, cfg LivenessConfig) *Tracker {
	cfg = cfg.withDefaults()
	t := &Tracker{s: s, cfg: cfg, limiter: newRateLimiter(cfg.RateLimit, cfg.RateBurst), seed: maphash.MakeSeed(),
		urgent: map[*lvEntry]struct{}{}, stalls: newStallDetector(s.clock, cfg.StallThreshold, s.log)}
	t.ls = s.store
	t.audits.t = t
	for i := range t.shards {
		t.shards[i].m = map[string]*lvEntry{}
	}
	s.bus.Subscribe(bus.ChannelLiveness, t.onLivenessSignal)
	bus.Listen(s.bus, t.onPresenceSignal, nil)
	return t
}

// Config returns the effective configuration (defaults applied).
func (t *Tracker) Config() LivenessConfig { return t.cfg }

// Instance returns the id naming this process in liveness claims.
func (t *Tracker) Instance() string { return t.s.instance }

// RowsWritten returns how many agent rows the flush passes wrote so far
// (database writes of the heartbeat path; the load tool reads it through
// the metrics).
func (t *Tracker) RowsWritten() int64 { return t.written.Load() }

func (t *Tracker) shard(id string) *lvShard {
	return &t.shards[maphash.String(t.seed, id)%uint64(len(t.shards))]
}

func (t *Tracker) lookup(id string) *lvEntry {
	sh := t.shard(id)
	sh.mu.RLock()
	e := sh.m[id]
	sh.mu.RUnlock()
	return e
}

// entries returns every entry (a snapshot of the map, not of the entries).
func (t *Tracker) entries() []*lvEntry {
	var out []*lvEntry
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.RLock()
		for _, e := range sh.m {
			out = append(out, e)
		}
		sh.mu.RUnlock()
	}
	return out
}

// entryFor returns the agent's entry, creating it from the row when the
// tracker has none (the stored values are the initial published pair,
// D-M2-20-4).
func (t *Tracker) entryFor(a *domain.Agent) *lvEntry {
	if e := t.lookup(a.ID); e != nil {
		return e
	}
	e := t.newEntry(a)
	sh := t.shard(a.ID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if cur := sh.m[a.ID]; cur != nil {
		return cur
	}
	sh.m[a.ID] = e
	return e
}

func (t *Tracker) newEntry(a *domain.Agent) *lvEntry {
	lv := a.Liveness
	e := &lvEntry{id: a.ID, handle: a.Handle, owner: a.OwnerID, active: a.Active && !a.Revoked(), configAt: a.UpdatedAt,
		billingMode: a.BillingMode, toolClass: a.ToolClass,
		state:   lv.State,
		audited: store.ReportedPair{BillingMode: lv.ReportedBillingMode, ToolClass: lv.ReportedToolClass},
	}
	if e.state == "" {
		e.state = liveness.StateUnknown
	}
	if lv.LastHeartbeatAt != nil {
		e.lastHB = lv.LastHeartbeatAt.UTC()
	}
	if len(lv.ReportedState) > 0 {
		if h, err := liveness.DecodeHeartbeat(lv.ReportedState); err == nil {
			e.hb = &h
		}
	}
	if lv.ProjectReadiness != nil {
		if rs, err := decodeReadiness(lv.ProjectReadiness); err == nil {
			e.readiness, e.readinessKnown = rs, true
		} else {
			t.s.log.Warn("stored project_readiness does not decode; the next list is applied", "agent_id", a.ID, "err", err)
		}
	}
	e.pub = liveness.PublishPair{State: e.state, ReportedBillingMode: lv.ReportedBillingMode}
	if p, ok := t.s.Events.lastPair(a.ID); ok {
		e.pub = p // what every instance last published wins over the row
	}
	return e
}

// refreshConfigLocked takes the configured values and the active flag from
// a row at least as new as the one they came from.
func (e *lvEntry) refreshConfigLocked(a *domain.Agent) {
	if a.UpdatedAt.Before(e.configAt) {
		return
	}
	e.configAt = a.UpdatedAt
	e.handle = a.Handle
	e.active = a.Active && !a.Revoked()
	e.billingMode, e.toolClass = a.BillingMode, a.ToolClass
}

// stateOf is the liveness state of the entry at now as this instance knows
// it: the start rule's state until its deadline for an agent loaded at
// start; StateAt (inclusive boundary, D-M2-20-4) once this instance owns a
// heartbeat; for an agent another instance owns, online (as reported) until
// the watch would take over, since the owner holds heartbeats at least as
// fresh as the last one known here and flushes them.
func (t *Tracker) stateOf(e *lvEntry, now time.Time) string {
	if e.fromStart {
		if e.startDeadline.IsZero() || !now.Before(t.deadline(e)) {
			return liveness.StateOffline
		}
		return e.reported
	}
	if e.reported == "" {
		return e.state // never heartbeated here: as stored
	}
	if !e.owned {
		if e.state == liveness.StateOffline || !now.Before(t.takeoverAt(e)) {
			return liveness.StateOffline
		}
		if pair, ok := t.s.Events.lastPair(e.id); ok && pair.State == liveness.StateOffline {
			return liveness.StateOffline // the owner published offline (over the bus) before the watch read the row
		}
		return e.reported
	}
	if e.lastHB.IsZero() {
		return liveness.StateUnknown
	}
	if !now.Before(t.deadline(e)) {
		return liveness.StateOffline // at and after the deadline (inclusive, D-M2-20-4)
	}
	switch e.reported {
	case liveness.StateOnline, liveness.StateDegraded:
		return e.reported
	}
	return liveness.StateUnknown
}

// alive is the time the entry's deadline runs from: the last heartbeat, or
// a later one that arrived and is still being processed (liveness first).
func (e *lvEntry) alive() time.Time {
	e.arr.mu.Lock()
	at := e.arr.latest
	e.arr.mu.Unlock()
	if at.After(e.lastHB) {
		return at
	}
	return e.lastHB
}

// deadline is when the entry becomes offline without another heartbeat:
// agent.presence_timeout after alive (the start rule's deadline for an
// entry loaded at start), extended by every stall of the process since.
func (t *Tracker) deadline(e *lvEntry) time.Time {
	if e.fromStart {
		if e.startDeadline.IsZero() {
			return e.startDeadline
		}
		return t.extend(e.startDeadline.Add(-t.cfg.PresenceTimeout), t.cfg.PresenceTimeout)
	}
	from := e.alive()
	return t.extend(from, t.cfg.PresenceTimeout)
}

func (e *lvEntry) reportedMode() *string {
	if e.hb != nil {
		return e.hb.BillingMode
	}
	return e.audited.BillingMode
}

// --- the use case ---

// Heartbeat is the one heartbeat use case behind both transports (REST
// POST /v1/agents/{agent}/heartbeat and the gateway op heartbeat with
// member agent; DESIGN.md §5.2, D-M2-20-1). body is an agent_heartbeat.v1
// document (§5.1), decoded by liveness.DecodeHeartbeat. In order:
//
//  1. the per-principal rate limit: *RateLimitedError (code rate_limited);
//  2. authorization: the agent itself may send; any other person or agent
//     gets not_found; the agent's owner gets forbidden with reason
//     subject_kind_not_allowed (404 before 403);
//  3. the body: invalid_argument / unknown_member with a pointer;
//  4. project_readiness, when present and different from the last list
//     applied, in its own unit of work; a failure is an internal error and
//     changes no presence (D-M2-20-10);
//  5. the reported-change audit when the billing mode or tool class differs
//     from the stored pair (D-M2-20-3); a failure is an internal error;
//  6. the entry: last heartbeat = the server clock's now (the sender's clock
//     is never read), the deadline, agent.presence_changed when the pair
//     (state, reported_billing_mode) changed, the warnings' timing.
//
// The Ack carries sync.heartbeat_interval in milliseconds.
func (s *Service) Heartbeat(ctx context.Context, p domain.Principal, agentRef string, body []byte) (Ack, error) {
	return s.Liveness.Heartbeat(ctx, p, agentRef, body)
}

// Heartbeat is Service.Heartbeat.
func (t *Tracker) Heartbeat(ctx context.Context, p domain.Principal, agentRef string, body []byte) (Ack, error) {
	return t.HeartbeatAt(ctx, p, agentRef, body, time.Time{})
}

// Arrive is the first, in-memory step of a heartbeat with member agent on
// a transport that runs the rest off its read path (the gateway): the
// per-principal rate limit (*RateLimitedError, as Heartbeat), then it
// notes that a heartbeat of the agent arrived now, so until its agent part
// is done the agent's deadline runs from this arrival (liveness first,
// DESIGN.md §5.2). It returns the arrival time (database clock) to pass to
// HeartbeatAt, which then takes no second token.
func (t *Tracker) Arrive(p domain.Principal, agentID string) (time.Time, error) {
	now := t.now()
	if err := t.allow(p, now); err != nil {
		return time.Time{}, err
	}
	if e := t.lookup(agentID); e != nil {
		e.notePending(now)
	}
	return now, nil
}

func (t *Tracker) allow(p domain.Principal, now time.Time) error {
	if ok, wait := t.limiter.allow(limiterKey(p), now); !ok {
		return &RateLimitedError{RetryAfter: wait, Err: &domain.Error{Code: domain.CodeRateLimited,
			Detail: fmt.Sprintf("too many heartbeats: at most %g per second (burst %d); retry in %s", t.cfg.RateLimit, t.cfg.RateBurst, wait.Round(time.Millisecond))}}
	}
	return nil
}

// notePending records the arrival of a heartbeat.
func (e *lvEntry) notePending(at time.Time) {
	e.arr.mu.Lock()
	if at.After(e.arr.latest) {
		e.arr.prev, e.arr.latest = e.arr.latest, at
	}
	e.arr.mu.Unlock()
}

// arrivedBefore is the arrival of the heartbeat before the one that arrived
// at (zero when unknown): a heartbeat that replaced a waiting one was not
// preceded by silence.
func (e *lvEntry) arrivedBefore(at time.Time) time.Time {
	e.arr.mu.Lock()
	defer e.arr.mu.Unlock()
	if at.Equal(e.arr.latest) {
		return e.arr.prev
	}
	return time.Time{}
}

// failPending forgets the arrival of a heartbeat that failed: it keeps
// nothing alive.
func (e *lvEntry) failPending(at time.Time) {
	e.arr.mu.Lock()
	if at.Equal(e.arr.latest) {
		e.arr.latest = e.arr.prev
	}
	e.arr.mu.Unlock()
}

// HeartbeatAt is Heartbeat for a heartbeat that arrived at arrived (a time
// Arrive returned, which took the rate limit's token; zero = now, and the
// token is taken here): the heartbeat time it records is the arrival, not
// when its agent part ran.
func (t *Tracker) HeartbeatAt(ctx context.Context, p domain.Principal, agentRef string, body []byte, arrived time.Time) (Ack, error) {
	now := arrived
	if now.IsZero() {
		now = t.now()
		if err := t.allow(p, now); err != nil {
			return Ack{}, err
		}
	}
	a, err := t.authorize(ctx, p, agentRef)
	if err != nil {
		return Ack{}, err
	}
	h, err := t.decode(a.ID, body)
	if err != nil {
		return Ack{}, err
	}
	e := t.entryFor(a)
	claim := false
	e.notePending(now)
	ok := false
	defer func() {
		if !ok {
			e.failPending(now)
		}
	}()
	// hbMu serialises this agent's heartbeats across the store writes; e.mu
	// is held only for memory, so a status read, a deadline or a flush never
	// waits for a slow audit (issue 8 item 3).
	e.hbMu.Lock()
	defer e.hbMu.Unlock()
	e.mu.Lock()
	e.refreshConfigLocked(a)
	handle := e.handle
	needReadiness := h.ProjectReadinessPresent && !(e.readinessKnown && liveness.SameReadiness(e.readiness, h.ProjectReadiness))
	needAudit := liveness.ReportedChanged(toReported(e.audited), h.Reported())
	e.mu.Unlock()
	if needReadiness {
		if err := t.applyReadiness(ctx, e, h.ProjectReadiness, now); err != nil {
			return Ack{}, err
		}
	}
	if needAudit {
		if err := t.applyReportedChange(ctx, e, handle, p, h, now); err != nil {
			return Ack{}, err
		}
	}
	e.mu.Lock()
	base := e.lastHB // the heartbeat before this one
	if prev := e.arrivedBefore(now); prev.After(base) {
		base = prev
	}
	if e.owned && e.state != liveness.StateOffline && !e.fromStart && !e.lastHB.IsZero() &&
		!now.Before(liveness.Deadline(base, t.cfg.PresenceTimeout)) {
		// The deadline passed and its timer has not run yet: the agent was
		// offline until this heartbeat, whatever the goroutines' order —
		// unless the process itself stalled meanwhile (the heartbeat may
		// have waited on the socket), which extends the deadline.
		t.stalls.Check()
		if !now.Before(t.extend(base, t.cfg.PresenceTimeout)) {
			t.goOfflineLocked(e, now)
		}
	} else if e.owned && e.fromStart && e.state != liveness.StateOffline && t.stateOf(e, now) == liveness.StateOffline {
		t.goOfflineLocked(e, now)
	}
	if !e.owned {
		e.owned, claim = true, true
		if pair, ok := t.s.Events.lastPair(e.id); ok {
			e.pub = pair
		}
	}
	if e.state != liveness.StateOnline && e.state != liveness.StateDegraded {
		claim = true // coming back (or first heartbeat): announce it at once
	}
	if now.After(e.lastHB) {
		e.lastHB = now
	}
	e.fromStart = false
	e.reported, e.state = h.State, h.State
	e.hb = h
	e.dirty = true
	t.assessLocked(e, now)
	// Lazily: a timer armed for an earlier instant fires there and re-arms
	// to the deadline then current (onTimer), so a steady heartbeat does not
	// touch the timer at all.
	if dl := t.deadline(e); e.armedAt.IsZero() || e.armedAt.After(dl) {
		t.armLocked(e, dl)
	}
	t.publishLocked(e)
	e.mu.Unlock()
	ok = true
	if claim {
		t.publishClaim(e.id, now)
	}
	t.s.metrics.Heartbeat()
	return Ack{IntervalMS: t.cfg.HeartbeatInterval.Milliseconds()}, nil
}

// decoded is the last body an entry accepted, with its decoded value. Both
// are immutable once stored.
type decoded struct {
	body []byte
	hb   *liveness.Heartbeat
}

// decode runs the one decoder, liveness.DecodeHeartbeat, unless the body is
// byte for byte the last one this agent sent and the decoder accepted: an
// adapter's steady heartbeats repeat themselves, and skipping the decode
// keeps them free of allocations. The result is shared and must not be
// modified.
func (t *Tracker) decode(agentID string, body []byte) (*liveness.Heartbeat, error) {
	e := t.lookup(agentID)
	if e != nil {
		if c := e.last.Load(); c != nil && bytes.Equal(c.body, body) {
			return c.hb, nil
		}
	}
	h, err := liveness.DecodeHeartbeat(body)
	if err != nil {
		return nil, err
	}
	if e != nil {
		e.last.Store(&decoded{body: bytes.Clone(body), hb: &h})
	}
	return &h, nil
}

// limiterKey is the principal's rate-limit key: its id (agent and person
// ids are distinct UUIDs), without building a string per heartbeat.
func limiterKey(p domain.Principal) string {
	switch {
	case p.Agent != nil:
		return p.Agent.ID
	case p.Person != nil:
		return p.Person.ID
	}
	return ""
}

// authorize applies DESIGN.md §5.2's matrix and returns the agent row.
func (t *Tracker) authorize(ctx context.Context, p domain.Principal, ref string) (*domain.Agent, error) {
	notFound := func() error { return domain.Errorf(domain.CodeNotFound, "agent %q not found", ref) }
	switch {
	case p.Agent != nil:
		if ref != "" && (ref == p.Agent.ID || ref == p.Agent.Handle) {
			return p.Agent, nil
		}
		return nil, notFound() // another agent: the resource is the agent itself
	case p.Person != nil:
		a, err := t.s.store.GetAgent(ctx, ParseRef(ref))
		if errors.Is(err, domain.ErrNotFound) || (err == nil && a.OwnerID != p.Person.ID) {
			return nil, notFound()
		}
		if err != nil {
			return nil, err
		}
		return nil, &domain.Error{Code: domain.CodeForbidden, Reason: "subject_kind_not_allowed",
			Detail: fmt.Sprintf("only agent %s itself sends its heartbeats, with its own credential; its owner reads GET /v1/agents/%s/status", a.Handle, a.Handle)}
	}
	return nil, errUnauthenticated
}

func toReported(p store.ReportedPair) liveness.Reported {
	return liveness.Reported{BillingMode: p.BillingMode, ToolClass: p.ToolClass}
}

// applyReadiness writes the list in its own unit of work, before the audit
// transaction, and tells every instance's presence cache (D-M2-20-10).
func (t *Tracker) applyReadiness(ctx context.Context, e *lvEntry, rs []liveness.ReadinessEntry, now time.Time) error {
	raw := encodeReadiness(rs)
	if err := t.ls.ApplyProjectReadiness(ctx, store.ApplyProjectReadinessParams{AgentID: e.id, Readiness: raw, Now: now}); err != nil {
		return fmt.Errorf("applying project_readiness of agent %s: %w", e.id, err)
	}
	e.mu.Lock()
	e.readiness, e.readinessKnown = rs, true
	e.mu.Unlock()
	t.s.signalPresence(ctx, e.id, "readiness")
	return nil
}

// applyReportedChange runs the audited unit of work (D-M2-20-3).
func (t *Tracker) applyReportedChange(ctx context.Context, e *lvEntry, handle string, p domain.Principal, h *liveness.Heartbeat, now time.Time) error {
	next := store.ReportedPair{BillingMode: h.BillingMode, ToolClass: h.ToolClass}
	actor := p.Actor()
	wrote, err := t.audits.apply(ctx, store.ApplyReportedChangeParams{
		AgentID: e.id, BillingMode: h.BillingMode, ToolClass: h.ToolClass,
		RuntimeVersion: h.RuntimeVersion, ReportedState: h.Canonical(), State: h.State, HeartbeatAt: now,
		Audit: func(old store.ReportedPair) domain.AuditRecord {
			return domain.AuditRecord{Actor: actor, Action: "agent.heartbeat", AgentID: e.id, Decision: "allow",
				Data: liveness.AuditData(toReported(old), h.Reported(), h.BillingEvidence)}
		},
	})
	if err != nil {
		return fmt.Errorf("auditing the reported change of agent %s: %w", e.id, err)
	}
	if wrote {
		t.s.log.Info("agent reported a new billing mode or tool class", "agent", handle, "agent_id", e.id,
			"billing_mode", derefOr(h.BillingMode, "-"), "tool_class", derefOr(h.ToolClass, "-"))
	}
	e.mu.Lock()
	e.audited = next
	e.mu.Unlock()
	return nil
}

func derefOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// assessLocked runs liveness.Assess at now and keeps when the differences
// began (D-M2-20-7).
func (t *Tracker) assessLocked(e *lvEntry, now time.Time) {
	a := liveness.Assess(t.assessInputs(e, now), now)
	e.mismatchSince, e.modeMismatchSince = a.MismatchSince, a.ModeMismatchSince
}

func (t *Tracker) assessInputs(e *lvEntry, now time.Time) liveness.AssessInputs {
	in := liveness.AssessInputs{
		State: t.stateOf(e, now), BillingMode: e.billingMode, ToolClass: e.toolClass,
		ReportedBillingMode: e.reportedMode(), ReportedToolClass: e.audited.ToolClass,
		MismatchSince: e.mismatchSince, ModeMismatchSince: e.modeMismatchSince, AlertAfter: t.cfg.MismatchAlertAfter,
	}
	if e.hb != nil {
		in.ReportedToolClass = e.hb.ToolClass
		in.ReportedBillingModesSupported = e.hb.BillingModesSupported
		in.Evidence = e.hb.BillingEvidence
	}
	return in
}

// armLocked (re)arms the entry's timer to fire at the instant at (server
// clock). Stopped trackers arm nothing.
func (t *Tracker) armLocked(e *lvEntry, at time.Time) {
	if t.stopped.Load() {
		return
	}
	d := max(at.Sub(t.now()), 0)
	e.armedAt = at
	if e.timer == nil {
		e.timer = t.s.clock.AfterFunc(d, func() { t.onTimer(e) })
	} else {
		e.timer.Reset(d)
	}
	// The clock may have passed at between reading it and arming (a fake
	// clock advanced by another goroutine): fire now rather than late. The
	// callbacks are idempotent, so a second firing is harmless.
	if d > 0 && !t.now().Before(at) {
		e.timer.Reset(0)
	}
}

// onTimer runs when an entry's timer fires: the owner's deadline (offline
// at and after it, published once) or, for an entry another instance owns,
// the watch that takes over when that instance is gone.
func (t *Tracker) onTimer(e *lvEntry) {
	if t.stopped.Load() {
		return // shutdown: timers stop without publishing
	}
	t.stalls.Check() // a stall that ended just now extends the deadline first
	now := t.now()
	e.mu.Lock()
	e.armedAt = time.Time{}
	if !e.owned {
		e.mu.Unlock()
		t.watch(e, now)
		return
	}
	if t.stopped.Load() {
		e.mu.Unlock()
		return
	}
	if t.stateOf(e, now) != liveness.StateOffline {
		// A heartbeat moved the deadline (or the timer fired a hair early).
		t.armLocked(e, t.deadline(e))
		e.mu.Unlock()
		return
	}
	if e.state != liveness.StateOffline {
		t.goOfflineLocked(e, now)
	}
	e.mu.Unlock()
}

// goOfflineLocked marks the entry offline, to be written by the next flush
// with its last heartbeat time, and publishes the change.
func (t *Tracker) goOfflineLocked(e *lvEntry, now time.Time) {
	e.state = liveness.StateOffline
	e.dirty = true
	t.assessLocked(e, now)
	t.publishLocked(e)
}

// publishLocked publishes agent.presence_changed when the pair (state,
// reported_billing_mode) differs from the last published one (D-M2-20-4).
// The last reported mode stays in the pair while offline.
func (t *Tracker) publishLocked(e *lvEntry) {
	pair := liveness.PublishPair{State: e.state, ReportedBillingMode: e.reportedMode()}
	if pair.Equal(e.pub) {
		return
	}
	if pair.State != e.pub.State {
		// A transition is written at once, not at the next flush, so every
		// other instance reading the row sees it (issue 8 item 1).
		t.persistSoon(e)
	}
	e.pub = pair
	var last *time.Time
	if !e.lastHB.IsZero() {
		hb := e.lastHB
		last = &hb
	}
	t.s.log.Info("agent liveness changed", "agent", e.handle, "agent_id", e.id, "state", pair.State,
		"reported_billing_mode", derefOr(pair.ReportedBillingMode, "-"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.s.Events.Publish(ctx, EventPresenceChanged, e.id, e.owner, PresenceChangedData{
		Agent: e.handle, State: pair.State, ReportedBillingMode: pair.ReportedBillingMode, LastHeartbeatAt: last,
	})
}

// onPresenceSignal refreshes the configuration of a tracked agent after a
// write that may have changed it (e.g. PATCH of billing_mode or active),
// off the bus's delivery goroutine. A presence or readiness write changes
// no configuration: the presence evaluator's refresh is then the one store
// read of this instance.
func (t *Tracker) onPresenceSignal(sig bus.Presence) {
	if !sig.ConfigChanged() {
		return
	}
	id := sig.AgentID
	e := t.lookup(id)
	if e == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, err := t.s.store.GetAgent(ctx, store.AgentRef{ID: id})
		if err != nil {
			if !errors.Is(err, domain.ErrNotFound) {
				t.s.log.Warn("liveness: agent refresh failed", "agent_id", id, "err", err)
			}
			return
		}
		now := t.now()
		e.mu.Lock()
		e.refreshConfigLocked(&a)
		t.assessLocked(e, now)
		e.mu.Unlock()
	}()
}

// --- project readiness encoding ---

type readinessJSON struct {
	Queue  string `json:"queue"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// encodeReadiness is the stored form of a list: [{queue, ready, reason?}].
func encodeReadiness(rs []liveness.ReadinessEntry) []byte {
	out := make([]readinessJSON, len(rs))
	for i, r := range rs {
		out[i] = readinessJSON(r)
	}
	b, _ := json.Marshal(out) // strings and bools
	return b
}

func decodeReadiness(b []byte) ([]liveness.ReadinessEntry, error) {
	var in []readinessJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	out := make([]liveness.ReadinessEntry, len(in))
	for i, r := range in {
		out[i] = liveness.ReadinessEntry(r)
	}
	return out, nil
}
