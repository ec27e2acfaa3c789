package tracker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/ratelimit"
	"github.com/rollcall/rollcall/internal/stall"
	"github.com/rollcall/rollcall/internal/store"
)

// Config is what the tracker reads of the configuration (design:
// Configuration keys). Zero durations take the defaults of those keys.
type Config struct {
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
	// RateLimit (heartbeats per second, default DefaultRate) and
	// RateBurst (default DefaultBurst) bound each principal's
	// heartbeats (token bucket).
	RateLimit float64
	RateBurst int
	// DBClock reads the database's clock (the server passes the store's
	// DBNow). The tracker keeps every time it stores or compares across
	// instances — last heartbeats, claims, deadlines read from rows — on
	// that clock: it measures the offset of the database's clock from its
	// own every ClockSyncInterval and applies it, so a skewed wall clock of
	// one instance changes nothing (design: Storage and instances). nil = this process's
	// clock is the reference (one instance; tests on a fake clock).
	DBClock func(context.Context) (time.Time, error)
	// ClockSyncInterval is how often the offset is measured again (default
	// 5 s).
	ClockSyncInterval time.Duration
	// StallThreshold turns on the stall detector (internal/stall): a gap
	// this long in the process's run extends every deadline by it. 0 = off
	// (the server sets stall.DefaultThreshold).
	StallThreshold time.Duration
}

func (c Config) withDefaults() Config {
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
		c.RateLimit = DefaultRate
	}
	if c.RateBurst <= 0 {
		c.RateBurst = DefaultBurst
	}
	return c
}

// Default per-principal heartbeat rate limit: a token bucket of
// DefaultBurst tokens refilled at DefaultRate per second. An adapter
// heartbeating every second (or the load tool's 5/s) is never limited; a
// runaway loop is.
const (
	DefaultRate  = 10.0
	DefaultBurst = 20
)

// Ack is the answer to an accepted heartbeat (HeartbeatAck): the interval
// at which the adapter should send the next one, in milliseconds
// (sync.heartbeat_interval; design: Heartbeat presence, Rules).
type Ack struct {
	IntervalMS int64 `json:"interval_ms"`
}

// Store is the part of the store port the tracker uses: the liveness
// writes (store.LivenessStore) and the agent row (the watch of an agent
// another instance owns, the refresh after a configuration change).
type Store interface {
	GetAgent(ctx context.Context, ref store.AgentRef) (domain.Agent, error)
	ListLiveAgents(ctx context.Context, p store.ListLiveAgentsParams) ([]domain.Agent, error)
	PersistHeartbeats(ctx context.Context, p store.PersistHeartbeatsParams) (written int, err error)
	ApplyReportedChanges(ctx context.Context, ps []store.ApplyReportedChangeParams) (wrote []bool, err error)
	ApplyProjectReadiness(ctx context.Context, p store.ApplyProjectReadinessParams) error
}

// Publisher is the operator event hub as the tracker uses it (the
// concrete one is *events.Hub).
type Publisher interface {
	// Publish sends one event of kind about agentID, owned by ownerID, to
	// the hubs of every instance.
	Publish(ctx context.Context, kind, agentID, ownerID string, data any)
	// LastPair is the last agent.presence_changed pair of the agent that
	// any instance published: what every instance last published wins over
	// the row, so a change is published once across instances.
	LastPair(agentID string) (liveness.PublishPair, bool)
}

// Metrics counts what the tracker does. Every method is cheap, never
// blocks and is safe for concurrent use.
type Metrics interface {
	// Heartbeat counts one accepted heartbeat.
	Heartbeat()
	// HeartbeatRowsPersisted counts the agent rows one flush pass wrote
	// (called once per pass that wrote rows).
	HeartbeatRowsPersisted(n int)
}

// Options are the ports and configuration a Tracker is built from.
type Options struct {
	Store   Store
	Bus     bus.Bus
	Events  Publisher
	Clock   clockwork.Clock // nil = real clock
	Log     *slog.Logger    // nil = slog.Default()
	Metrics Metrics         // nil = counts nothing
	// Instance names this process in liveness claims (required).
	Instance string
	// SignalPresence tells every instance's presence cache that a write may
	// have changed the agent's presence; the tracker calls it with cause
	// "readiness" after writing project_readiness. nil = nothing is
	// signalled.
	SignalPresence func(ctx context.Context, agentID, cause string)
	Config         Config
}

// Tracker is the liveness tracker. Safe for concurrent use.
type Tracker struct {
	store    Store
	bus      bus.Bus
	events   Publisher
	clock    clockwork.Clock
	log      *slog.Logger
	metrics  Metrics
	instance string
	signal   func(ctx context.Context, agentID, cause string)

	cfg       Config
	limiter   *ratelimit.Limiter
	seed      maphash.Seed
	shards    [64]lvShard
	stopped   atomic.Bool
	written   atomic.Int64 // rows written by flush passes
	flushMu   sync.Mutex
	flushedAt time.Time // end of the last flush pass (guarded by flushMu)
	runMu     sync.Mutex
	cancel    context.CancelFunc
	loopDone  chan struct{}

	dbOff  atomic.Int64 // database clock − this process's clock, ns (clock.go)
	stalls *stall.Detector

	urgentMu  sync.Mutex
	urgent    map[*lvEntry]struct{} // transitions to write at once (flush.go)
	urgentRun bool

	audits auditBatcher // group commit of reported changes (audit.go)
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

type nopMetrics struct{}

func (nopMetrics) Heartbeat()                 {}
func (nopMetrics) HeartbeatRowsPersisted(int) {}

// New builds a tracker and subscribes it to bus.ChannelLiveness (claims)
// and bus.ChannelPresence (configuration changes). Start loads the stored
// state and starts the flush loop.
func New(o Options) *Tracker {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = nopMetrics{}
	}
	if o.SignalPresence == nil {
		o.SignalPresence = func(context.Context, string, string) {}
	}
	cfg := o.Config.withDefaults()
	t := &Tracker{store: o.Store, bus: o.Bus, events: o.Events, clock: o.Clock, log: o.Log, metrics: o.Metrics,
		instance: o.Instance, signal: o.SignalPresence,
		cfg: cfg, limiter: ratelimit.New(cfg.RateLimit, cfg.RateBurst), seed: maphash.MakeSeed(),
		urgent: map[*lvEntry]struct{}{}, stalls: stall.New(o.Clock, cfg.StallThreshold, o.Log)}
	t.audits.t = t
	for i := range t.shards {
		t.shards[i].m = map[string]*lvEntry{}
	}
	t.bus.Subscribe(bus.ChannelLiveness, t.onLivenessSignal)
	t.bus.Subscribe(bus.ChannelPresence, t.onPresenceSignal)
	return t
}

// Config returns the effective configuration (defaults applied).
func (t *Tracker) Config() Config { return t.cfg }

// Stalls returns the process's stall detector (nil when it is off).
func (t *Tracker) Stalls() *stall.Detector { return t.stalls }

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
// tracker has none (the stored values are the initial published pair).
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
			t.log.Warn("stored project_readiness does not decode; the next list is applied", "agent_id", a.ID, "err", err)
		}
	}
	e.pub = liveness.PublishPair{State: e.state, ReportedBillingMode: lv.ReportedBillingMode}
	if p, ok := t.events.LastPair(a.ID); ok {
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
// start; StateAt (inclusive boundary) once this instance owns a
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
		if pair, ok := t.events.LastPair(e.id); ok && pair.State == liveness.StateOffline {
			return liveness.StateOffline // the owner published offline (over the bus) before the watch read the row
		}
		return e.reported
	}
	if e.lastHB.IsZero() {
		return liveness.StateUnknown
	}
	if !now.Before(t.deadline(e)) {
		return liveness.StateOffline // at and after the deadline (inclusive)
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

// --- the heartbeat ---

// Arrival is when a heartbeat arrived (database clock), returned by Arrive,
// which took the rate limit's token. The zero Arrival is a heartbeat that
// arrives when Heartbeat runs.
type Arrival struct{ at time.Time }

// IsZero reports whether a is the zero Arrival.
func (a Arrival) IsZero() bool { return a.at.IsZero() }

// Arrive is the first, in-memory step of a heartbeat: the per-principal
// rate limit (*ratelimit.Error, code rate_limited), then, for agentID not
// "", it notes that a heartbeat of the agent arrived now, so until its
// agent part is done the agent's deadline runs from this arrival (liveness
// first, design: Heartbeat presence, Rules). Pass the Arrival to Heartbeat,
// which then takes no second token.
func (t *Tracker) Arrive(p domain.Principal, agentID string) (Arrival, error) {
	now := t.now()
	if err := t.allow(p, now); err != nil {
		return Arrival{}, err
	}
	if agentID != "" {
		if e := t.lookup(agentID); e != nil {
			e.notePending(now)
		}
	}
	return Arrival{at: now}, nil
}

func (t *Tracker) allow(p domain.Principal, now time.Time) error {
	if ok, wait := t.limiter.Allow(limiterKey(p), now); !ok {
		return &ratelimit.Error{RetryAfter: wait, Err: &domain.Error{Code: domain.CodeRateLimited,
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

// Heartbeat records one heartbeat of agent a, sent by p (whom the caller
// authorized), with body an agent_heartbeat.v1 document decoded by
// liveness.DecodeHeartbeat, that arrived at arr (the zero Arrival: now, and
// the rate limit's token is taken here). In order:
//
//  1. the body: invalid_argument / unknown_member with a pointer;
//  2. project_readiness, when present and different from the last list
//     applied, in its own unit of work; a failure is an internal error and
//     changes no presence;
//  3. the reported-change audit when the billing mode or tool class differs
//     from the stored pair; a failure is an internal error;
//  4. the entry: last heartbeat = the arrival on the server's (database)
//     clock — the sender's clock is never read —, the deadline,
//     agent.presence_changed when the pair (state, reported_billing_mode)
//     changed, the warnings' timing.
//
// The heartbeat time it records is the arrival, not when this ran. The Ack
// carries sync.heartbeat_interval in milliseconds.
func (t *Tracker) Heartbeat(ctx context.Context, p domain.Principal, a *domain.Agent, body []byte, arr Arrival) (Ack, error) {
	now := arr.at
	if now.IsZero() {
		now = t.now()
		if err := t.allow(p, now); err != nil {
			return Ack{}, err
		}
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
	// waits for a slow audit.
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
		if pair, ok := t.events.LastPair(e.id); ok {
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
	t.metrics.Heartbeat()
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

func toReported(p store.ReportedPair) liveness.Reported {
	return liveness.Reported{BillingMode: p.BillingMode, ToolClass: p.ToolClass}
}

// applyReadiness writes the list in its own unit of work, before the audit
// transaction, and tells every instance's presence cache.
func (t *Tracker) applyReadiness(ctx context.Context, e *lvEntry, rs []liveness.ReadinessEntry, now time.Time) error {
	raw := encodeReadiness(rs)
	if err := t.store.ApplyProjectReadiness(ctx, store.ApplyProjectReadinessParams{AgentID: e.id, Readiness: raw, Now: now}); err != nil {
		return fmt.Errorf("applying project_readiness of agent %s: %w", e.id, err)
	}
	e.mu.Lock()
	e.readiness, e.readinessKnown = rs, true
	e.mu.Unlock()
	t.signal(ctx, e.id, "readiness")
	return nil
}

// applyReportedChange runs the audited unit of work.
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
		t.log.Info("agent reported a new billing mode or tool class", "agent", handle, "agent_id", e.id,
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
// began.
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
		e.timer = t.clock.AfterFunc(d, func() { t.onTimer(e) })
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
// reported_billing_mode) differs from the last published one.
// The last reported mode stays in the pair while offline.
func (t *Tracker) publishLocked(e *lvEntry) {
	pair := liveness.PublishPair{State: e.state, ReportedBillingMode: e.reportedMode()}
	if pair.Equal(e.pub) {
		return
	}
	if pair.State != e.pub.State {
		// A transition is written at once, not at the next flush, so every
		// other instance reading the row sees it.
		t.persistSoon(e)
	}
	e.pub = pair
	var last *time.Time
	if !e.lastHB.IsZero() {
		hb := e.lastHB
		last = &hb
	}
	t.log.Info("agent liveness changed", "agent", e.handle, "agent_id", e.id, "state", pair.State,
		"reported_billing_mode", derefOr(pair.ReportedBillingMode, "-"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.events.Publish(ctx, events.KindPresenceChanged, e.id, e.owner, events.PresenceChangedData{
		Agent: e.handle, State: pair.State, ReportedBillingMode: pair.ReportedBillingMode, LastHeartbeatAt: last,
	})
}

// onPresenceSignal refreshes the configuration of a tracked agent after a
// write that may have changed it (bus.ChannelPresence "<agent_id>:<cause>",
// e.g. PATCH of billing_mode or active), off the bus's delivery goroutine.
func (t *Tracker) onPresenceSignal(payload string) {
	id, _, _ := cutColon(payload)
	e := t.lookup(id)
	if e == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a, err := t.store.GetAgent(ctx, store.AgentRef{ID: id})
		if err != nil {
			if !errors.Is(err, domain.ErrNotFound) {
				t.log.Warn("liveness: agent refresh failed", "agent_id", id, "err", err)
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

func cutColon(s string) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
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
