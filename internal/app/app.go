// Package app holds Rollcall's use cases: vending and managing agents,
// pushing and working todos, presence, the audit log. It orchestrates the
// ports (store.Store, bus.Bus, SessionHub) and the engines it builds from
// them (the presence evaluator, internal/evaluator; the doorbell engine,
// internal/doorbell) and holds no transport code;
// the MCP, REST and CLI adapters all call the same methods, so every rule
// exists once. Time comes from an injected clockwork.Clock.
//
// The Service wires the engines it drives, each built from the narrow ports
// it uses: the liveness tracker (internal/tracker; the heartbeat use case
// and the owner's status view are here) and the operator event hub
// (internal/events; adapters subscribe through SubscribeEvents).
package app

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/tracker"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// Token prefixes make leaked tokens recognisable (secret scanners) and tell
// person tokens from agent credentials at a glance.
const (
	PersonTokenPrefix = "rcp_"
	AgentTokenPrefix  = "rca_"
)

// LivenessConfig configures the heartbeat tracker (design:
// Configuration sources); zero fields take the keys' defaults.
type LivenessConfig = tracker.Config

// Options configures a Service.
type Options struct {
	Store store.Store
	Bus   bus.Bus
	Clock clockwork.Clock // nil = real clock
	Log   *slog.Logger    // nil = slog.Default()
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

// Service is the use-case layer. It is safe for concurrent use.
type Service struct {
	store      store.Store
	bus        bus.Bus
	clock      clockwork.Clock
	log        *slog.Logger
	publicURL  string
	evalEvery  time.Duration
	sweepEvery time.Duration

	failoverAfter time.Duration

	hubMu sync.RWMutex
	hub   SessionHub

	bg *workgroup.Group

	bell *doorbell.Engine     // rings, failover, digests, sweep
	eval *evaluator.Evaluator // the presence cache and its transitions

	metrics  Metrics
	instance string
	events   *events.Hub      // this instance's operator event hub
	liveness *tracker.Tracker // the heartbeat tracker

	team   teamState   // persons, tokens, the credential cache (team.go)
	intake intakeState // hook rate limits (hooks.go)
}

// New builds a Service, its engines, and subscribes them to the bus.
func New(o Options) *Service {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
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
	s := &Service{store: o.Store, bus: o.Bus, clock: o.Clock, log: o.Log, publicURL: strings.TrimRight(o.PublicURL, "/"),
		evalEvery: o.EvaluateInterval, sweepEvery: o.SweepInterval, failoverAfter: o.FailoverAfter, metrics: o.Metrics, instance: o.InstanceID}
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
	s.initTeam()
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
			s.background(func() { s.bell.Digest(context.Background(), agentID, reason) })
		}})
	s.bell = doorbell.New(doorbell.Config{Store: s.store, Bus: s.bus, Presence: s.eval, Clock: s.clock, Log: s.log, Metrics: s.metrics,
		FailoverAfter: s.failoverAfter})
	bus.Listen(s.bus, s.onAgentSessions, nil)
	return s
}

// The session port is the doorbell engine's; the use cases close sessions
// through it too.
type (
	// SessionInfo describes one MCP session hosted by this instance.
	SessionInfo = doorbell.SessionInfo
	// SessionHub is the port to this instance's MCP sessions, implemented
	// by the MCP adapter.
	SessionHub = doorbell.SessionHub
	// ToldReporter is optionally implemented by a SessionHub whose streams
	// deliver doorbells on their own when they open.
	ToldReporter = doorbell.ToldReporter
)

// DefaultFailoverAfter is doorbell.failover_after's default.
const DefaultFailoverAfter = doorbell.DefaultFailoverAfter

// onAgentSessions closes this instance's sessions named by a session-close
// signal.
func (s *Service) onAgentSessions(sig bus.AgentSessions) {
	s.forgetCredentials(sig.AgentID)
	if h := s.sessionHub(); h != nil {
		h.CloseAgentSessions(sig.AgentID, sig.Credentials)
	}
}

// StoreReachable checks that the store answers (the readiness probe): one
// indexed query for the agents of an owner that cannot exist, bounded by
// ctx. Errors: the store's.
func (s *Service) StoreReachable(ctx context.Context) error {
	_, err := s.store.ListAgents(ctx, store.ListAgentsParams{OwnerID: "00000000-0000-0000-0000-000000000000"})
	return err
}

// Metrics returns the metrics port the Service counts through (never nil).
func (s *Service) Metrics() Metrics { return s.metrics }

// Clock returns the injected clock.
func (s *Service) Clock() clockwork.Clock { return s.clock }

// SetPublicURL sets the base URL once the listener address is known.
func (s *Service) SetPublicURL(u string) { s.publicURL = strings.TrimRight(u, "/") }

// PublicURL returns the base URL used in vend results.
func (s *Service) PublicURL() string { return s.publicURL }

// SetSessionHub attaches the MCP session hub of this instance.
func (s *Service) SetSessionHub(h SessionHub) {
	s.hubMu.Lock()
	s.hub = h
	s.hubMu.Unlock()
	s.bell.SetSessionHub(h)
}

func (s *Service) sessionHub() SessionHub {
	s.hubMu.RLock()
	defer s.hubMu.RUnlock()
	return s.hub
}

// now returns the clock's time in UTC truncated to microseconds, the
// precision both stores keep.
func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// HashToken returns the stored form of a token: hex SHA-256. Tokens carry
// 256 random bits, so a fast hash is enough; the plain token is never stored
// or logged.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewToken returns prefix + 43 characters of base64url (256 random bits).
func NewToken(prefix string) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("rollcall: crypto/rand failed: " + err.Error())
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// newInstanceID returns 8 random hex digits naming this process in event
// IDs and liveness claims.
func newInstanceID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Bootstrap creates the admin person on an empty store. token "" makes a new
// random token. It returns the token and created=true only when it created
// the admin; on later starts it returns "", false.
func (s *Service) Bootstrap(ctx context.Context, token string) (string, bool, error) {
	if token == "" {
		token = NewToken(PersonTokenPrefix)
	}
	p := domain.Person{ID: newID(), Name: "admin", Active: true, CreatedAt: s.now()}
	p.SetRole(domain.RoleAdmin)
	created, err := s.store.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: p, TokenHash: HashToken(token), TokenID: newID()})
	if err != nil || !created {
		return "", false, err
	}
	return token, true, nil
}

var errUnauthenticated = &domain.Error{Code: domain.CodeUnauthenticated, Detail: "missing or invalid bearer token"}

// AuthenticatePerson resolves a personal API token into its person, with
// Person.TokenID set. Errors: unauthenticated (unknown, revoked or expired
// token; deactivated person — Reason says which).
func (s *Service) AuthenticatePerson(ctx context.Context, token string) (domain.Person, error) {
	return s.personByToken(ctx, token)
}

// AuthenticateAgent resolves an agent credential into a principal carrying
// the agent and the credential id. Revoked or inactive agents are refused.
// Errors: unauthenticated, forbidden (agent inactive).
func (s *Service) AuthenticateAgent(ctx context.Context, token string) (domain.Principal, error) {
	if !strings.HasPrefix(token, AgentTokenPrefix) {
		return domain.Principal{}, errUnauthenticated
	}
	a, credID, err := s.store.AgentByCredentialHash(ctx, HashToken(token))
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Principal{}, errUnauthenticated
	}
	if err != nil {
		return domain.Principal{}, err
	}
	if a.Revoked() {
		return domain.Principal{}, errUnauthenticated
	}
	if !a.Active {
		return domain.Principal{}, domain.Errorf(domain.CodeForbidden, "agent %s is inactive; its owner can set active=true", a.Handle)
	}
	return domain.Principal{Agent: &a, CredentialID: credID}, nil
}

// Authenticate resolves a bearer token of either kind.
func (s *Service) Authenticate(ctx context.Context, token string) (domain.Principal, error) {
	if strings.HasPrefix(token, AgentTokenPrefix) {
		return s.AuthenticateAgent(ctx, token)
	}
	p, err := s.AuthenticatePerson(ctx, token)
	if err != nil {
		return domain.Principal{}, err
	}
	return domain.Principal{Person: &p}, nil
}

// storeErr maps store sentinels onto domain errors with a detail.
func storeErr(err error, notFound, conflict string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, domain.ErrNotFound):
		return &domain.Error{Code: domain.CodeNotFound, Detail: notFound}
	case errors.Is(err, domain.ErrConflict):
		return &domain.Error{Code: domain.CodeConflict, Detail: conflict}
	}
	return err
}

// background runs f on its own goroutine unless the service is closing;
// Close waits for every such goroutine, so none outlives the store.
func (s *Service) background(f func()) { s.bg.Go(f) }

// Close stops accepting background work (bus-triggered digests) and waits
// for what is running. Call it after Run returned and before closing the
// store.
func (s *Service) Close() { s.bg.Close() }

// SubscribeEvents subscribes the person ownerID, who opened the stream with
// the personal token tokenID, to the operator events of their own agents
// (events.Hub.SubscribeWith): resumed after lastEventID ("" = from now)
// while it is buffered. Revoking that token or deactivating the person
// closes the subscription. Errors: events.ErrClosed at shutdown.
func (s *Service) SubscribeEvents(ownerID, tokenID, lastEventID string) (*events.Subscription, error) {
	return s.events.SubscribeWith(ownerID, tokenID, lastEventID)
}

// CloseEvents ends every event subscription and refuses new ones (server
// shutdown: open SSE streams end instead of holding it).
func (s *Service) CloseEvents() { s.events.Close() }
