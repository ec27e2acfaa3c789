package tracker

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/dbclock"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/ratelimit"
	"github.com/rollcall/rollcall/internal/stall"
	"github.com/rollcall/rollcall/internal/store"
)

// Defaults of the owner lease (design: Owner lease). The server uses them;
// Config.OwnerLease = 0 keeps leases off (one instance, tests on a fake
// clock).
const (
	DefaultOwnerLease      = 1500 * time.Millisecond
	DefaultOwnerLeaseRenew = 500 * time.Millisecond
)

// Config is what the tracker reads of the configuration (design:
// Configuration sources). Zero durations take the defaults of those keys.
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
	// StallThreshold turns on the stall detector (internal/stall): a gap
	// this long in the process's run extends every deadline by it, by at
	// most PresenceTimeout per stall window. 0 = off (the server sets
	// stall.DefaultThreshold).
	StallThreshold time.Duration
	// OwnerLease is the owner lease this instance holds in the store
	// (design: Owner lease): when it is not renewed for this long — the
	// instance died —, another instance takes the agents it owned over and
	// publishes them offline PresenceTimeout after the take-over.
	// 0 = no lease (one instance; the server sets DefaultOwnerLease).
	OwnerLease time.Duration
	// OwnerLeaseRenew is how often the lease is renewed and the others'
	// checked (default DefaultOwnerLeaseRenew, at most OwnerLease / 2).
	OwnerLeaseRenew time.Duration
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
	if c.OwnerLease > 0 {
		def(&c.OwnerLeaseRenew, min(DefaultOwnerLeaseRenew, c.OwnerLease/2))
	}
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

// causeReadiness is the cause of the presence signal the tracker sends after
// writing an agent's project_readiness.
const causeReadiness = "readiness"

// Ack is the answer to an accepted heartbeat (HeartbeatAck): the interval
// at which the adapter should send the next one, in milliseconds
// (sync.heartbeat_interval; design: Heartbeat interval).
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
	// The owner lease (design: Owner lease; used when Config.OwnerLease > 0).
	RenewOwnerLease(ctx context.Context, p store.RenewOwnerLeaseParams) (held bool, err error)
	ReleaseOwnerLease(ctx context.Context, instance string, now time.Time) error
	ExpiredOwnerLeases(ctx context.Context, now time.Time, except string) ([]string, error)
	TakeOverOwnerLease(ctx context.Context, p store.TakeOverOwnerLeaseParams) (won bool, agentIDs []string, err error)
	SetAgentOwner(ctx context.Context, p store.SetAgentOwnerParams) (wrote bool, err error)
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
	Clock   clockwork.Clock // nil = real clock; a *dbclock.Clock puts every stored or compared time on the database's clock (design: Database clock)
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
	stopCh    chan struct{} // closed by Stop; ends the transition writer's backoff
	written   atomic.Int64  // rows written by flush passes
	flushMu   sync.Mutex
	flushedAt time.Time // end of the last flush pass (guarded by flushMu)
	runMu     sync.Mutex
	cancel    context.CancelFunc
	loopDone  chan struct{}
	leaseDone chan struct{} // closed when the lease loop ended (nil: no loop)
	leaseMu   sync.Mutex    // serialises the passes of the lease check
	leaseHeld atomic.Bool   // the lease was acquired at least once
	// leaseSince is when the lease was renewed first since the last failed
	// renewal (unix µs, database clock; 0 = the last one failed).
	leaseSince   atomic.Int64
	leaseFailing atomic.Bool // the last pass of the lease loop failed

	clk    *dbclock.Clock // Options.Clock as a database clock (internal/dbclock; clock.go)
	stalls *stall.Detector

	urgentMu   sync.Mutex
	urgent     map[*lvEntry]struct{} // transitions to write at once (flush.go)
	urgentRun  bool
	urgentDone chan struct{} // closed when the running writer ends

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

// decoded is the last body an entry accepted, with its decoded value. Both
// are immutable once stored.
type decoded struct {
	body []byte
	hb   *liveness.Heartbeat
}

type nopMetrics struct{}

func (nopMetrics) Heartbeat()                 {}
func (nopMetrics) HeartbeatRowsPersisted(int) {}

// Config returns the effective configuration (defaults applied).
func (t *Tracker) Config() Config { return t.cfg }

// Stalls returns the process's stall detector (nil when it is off).
func (t *Tracker) Stalls() *stall.Detector { return t.stalls }

// now is the tracker's time: the database's clock (clock.go).
func (t *Tracker) now() time.Time { return t.clk.Now().UTC().Truncate(time.Microsecond) }

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

func (e *lvEntry) reportedMode() *string {
	if e.hb != nil {
		return e.hb.BillingMode
	}
	return e.audited.BillingMode
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

func derefOr(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
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
