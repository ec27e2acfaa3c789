package app

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/credcache"
	"github.com/rollcall/rollcall/internal/dbclock"
	"github.com/rollcall/rollcall/internal/delivery"
	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/hooks"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/pools"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/tracker"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// Options configures a Service.
type Options struct {
	Store store.Store
	Bus   bus.Bus
	Clock clockwork.Clock // nil = real clock
	Log   *slog.Logger    // nil = slog.Default()
	// DBNow reads the database's clock (the server passes the store's
	// DBNow). The Service measures the offset of the database's clock from
	// Clock before serving (StartLiveness) and every ClockSyncInterval
	// (Run), and every engine and use case stamps and compares times on
	// Clock plus that offset (design: Database clock). nil = Clock is the
	// reference (one instance; tests on a fake clock); Clock may also be a
	// *dbclock.Clock of the caller's.
	DBNow dbclock.Reader
	// ClockSyncInterval is how often the offset is measured again
	// (default dbclock.DefaultInterval, 5 s).
	ClockSyncInterval time.Duration
	// PublicURL is the base URL agents and operators reach this server at,
	// e.g. "http://127.0.0.1:7070"; used for mcp_url and the claude mcp add line.
	PublicURL string
	// EvaluateInterval is the presence evaluator period (presence.evaluate_interval, default 30 s).
	EvaluateInterval time.Duration
	// SweepInterval is the doorbell sweep period (doorbell.sweep_interval, default 30 s).
	SweepInterval time.Duration
	// FailoverAfter is doorbell.failover_after (default 30 s): a todo rung
	// on one of several sessions of its agent here and still unclaimed this
	// long after is rung on another (design: Doorbell failover).
	FailoverAfter time.Duration
	// DeliveryRetention is hooks.delivery_retention (default 7 days): the
	// prune loop deletes deliveries received longer ago (design: Delivery
	// log retention).
	DeliveryRetention time.Duration
	// HookSecrets seals hook secrets at rest (hooks.secret_key; design:
	// Hook secrets sealed at rest); nil = plaintext. SealHookSecrets seals
	// the stored ones at start.
	HookSecrets *intake.Sealer
	// Liveness configures the heartbeat tracker (design:
	// Configuration sources); zero fields take the keys' defaults. Unused when Tracker is set.
	Liveness LivenessConfig
	// Metrics counts heartbeats, doorbells, digests, sweep rings and
	// transitions; nil = NopMetrics.
	Metrics Metrics
	// InstanceID names this process in liveness claims and event IDs; ""
	// = 8 random hex digits.
	InstanceID string
	// Events is the operator event hub (GET /v1/events); nil = New builds
	// one on Store, Bus, Clock and Log.
	Events *events.Hub
	// Tracker is the liveness tracker; nil = New builds one on the ports
	// above, Events and Liveness, its presence signal the Service's.
	Tracker *tracker.Tracker
	// Background runs the service's background work (the digests of
	// transitions and catch-ups); nil = a group of the Service's own. Close
	// closes it. A test that must wait for that work passes its own group
	// and calls its Wait.
	Background *workgroup.Group
}

// New builds a Service, its engines, and subscribes them to the bus.
func New(o Options) *Service {
	workgroup.Defaults(&o.Clock, &o.Log)
	if o.Bus == nil {
		o.Bus = bus.NewLocal()
	}
	if o.EvaluateInterval <= 0 {
		o.EvaluateInterval = 30 * time.Second
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = 30 * time.Second
	}
	if o.FailoverAfter <= 0 {
		o.FailoverAfter = DefaultFailoverAfter
	}
	if o.DeliveryRetention <= 0 {
		o.DeliveryRetention = DefaultDeliveryRetention
	}
	// One database clock for the process: every time stamped or compared
	// with what another instance stamps is read from it (design: Database clock).
	dbc := dbclock.Of(o.Clock)
	if o.DBNow != nil {
		dbc = dbclock.New(o.Clock, o.DBNow, o.ClockSyncInterval, o.Log)
	}
	s := &Service{store: o.Store, bus: o.Bus, clock: dbc, dbclock: dbc, log: o.Log, publicURL: strings.TrimRight(o.PublicURL, "/"),
		evalEvery: o.EvaluateInterval, sweepEvery: o.SweepInterval, failoverAfter: o.FailoverAfter, deliveryRetention: o.DeliveryRetention, sealer: o.HookSecrets, metrics: o.Metrics, instance: o.InstanceID}
	if s.metrics == nil {
		s.metrics = NopMetrics{}
	}
	if s.instance == "" {
		s.instance = newInstanceID()
	}
	s.events = o.Events
	if s.events == nil {
		s.events = events.New(events.Options{Store: s.store, Bus: s.bus, Clock: s.clock, Log: s.log})
	}
	s.touched = map[string]time.Time{}
	s.creds = credcache.New(CredentialCacheTTL)
	s.tokens = credcache.NewTokens(CredentialCacheTTL)
	s.targets = credcache.NewAgents(CredentialCacheTTL)
	s.verdicts = credcache.NewVerdicts(CredentialCacheTTL)
	s.Hooks = hooks.New(hooks.Config{Store: s.store, Agents: s, Sealer: s.sealer, Now: s.now, NewID: newID, PublicURL: s.PublicURL,
		Log: s.log, Retention: s.deliveryRetention})
	s.receiver = delivery.New(delivery.Config{Store: s.store, Sealer: s.sealer, Now: s.now, NewID: newID, Log: s.log,
		Metrics: hookMetrics(s.metrics), Shared: store.SharedFailures(s.store), Publish: s.publishTodoReady})
	bus.Listen(s.bus, s.onTeam, nil)
	s.liveness = o.Tracker
	if s.liveness == nil {
		s.liveness = tracker.New(tracker.Options{Store: s.store, Bus: s.bus, Events: s.events, Clock: s.clock, Log: s.log,
			Metrics: s.metrics, Instance: s.instance, SignalPresence: s.signalPresence, Config: o.Liveness})
	}
	s.bg = o.Background
	if s.bg == nil {
		s.bg = &workgroup.Group{}
	}
	// The engines get the service's ports, never the service.
	s.eval = evaluator.New(evaluator.Config{Store: s.store, Bus: s.bus, Events: s.events, Clock: s.clock, Log: s.log, Metrics: s.metrics, Instance: s.instance,
		// Digests do more I/O and run off the bus's delivery goroutine so
		// doorbells are never queued behind them.
		OnIn: func(agentID, reason string) {
			s.background(func() {
				s.bell.Digest(context.Background(), agentID, reason)
				s.bell.RouteHeld(context.Background(), agentID) // design: Pool routing
			})
		}})
	s.bell = doorbell.New(doorbell.Config{Store: s.store, Bus: s.bus, Presence: s.eval, Clock: s.clock, Log: s.log, Metrics: s.metrics,
		FailoverAfter: s.failoverAfter})
	s.Pools = pools.New(pools.Config{Store: s.store, Agents: s, Router: s.bell, Metrics: s.metrics, Now: s.now, NewID: newID, Log: s.log})
	bus.Listen(s.bus, s.onAgentSessions, nil)
	return s
}
