// Package app holds Rollcall's use cases: vending and managing agents,
// pushing and working todos, presence, the audit log. It orchestrates the
// ports (store.Store, bus.Bus, SessionHub) and the engines it builds from
// them (the presence evaluator, internal/evaluator; the doorbell engine,
// internal/doorbell) and holds no transport code;
// the MCP, REST and CLI adapters all call the same methods, so every rule
// exists once. Time comes from an injected clockwork.Clock, shifted onto the
// database's clock (internal/dbclock; design: Database clock).
//
// The Service wires the engines it drives, each built from the narrow ports
// it uses: the liveness tracker (internal/tracker; the heartbeat use case
// and the owner's status view are here) and the operator event hub
// (internal/events; adapters subscribe through SubscribeEvents).
package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/credcache"
	"github.com/rollcall/rollcall/internal/dbclock"
	"github.com/rollcall/rollcall/internal/delivery"
	"github.com/rollcall/rollcall/internal/domain"
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

// Token prefixes make leaked tokens recognisable (secret scanners) and tell
// person tokens from agent credentials at a glance.
const (
	PersonTokenPrefix = "rcp_"
	AgentTokenPrefix  = "rca_"
)

// LivenessConfig configures the heartbeat tracker (design:
// Configuration sources); zero fields take the keys' defaults.
type LivenessConfig = tracker.Config

// Service is the use-case layer. It is safe for concurrent use.
type Service struct {
	// The hook use cases (internal/hooks) and the pool use cases
	// (internal/pools), answered as the Service's own.
	*hooks.Hooks
	*pools.Pools

	store      store.Store
	bus        bus.Bus
	clock      clockwork.Clock // dbclock: the database's clock (design: Database clock)
	dbclock    *dbclock.Clock  // the same clock, for its measurement
	log        *slog.Logger
	publicURL  string
	evalEvery  time.Duration
	sweepEvery time.Duration

	failoverAfter     time.Duration
	deliveryRetention time.Duration // hooks.delivery_retention (hooks.go)

	hubMu sync.RWMutex
	hub   SessionHub

	bg *workgroup.Group

	bell *doorbell.Engine     // rings, failover, digests, sweep
	eval *evaluator.Evaluator // the presence cache and its transitions

	metrics  Metrics
	instance string
	events   *events.Hub      // this instance's operator event hub
	liveness *tracker.Tracker // the heartbeat tracker

	touchMu  sync.Mutex
	touched  map[string]time.Time // token id → last touch written by this instance (auth.go)
	creds    *credcache.Cache     // MCP credential lookups (auth.go)
	tokens   *credcache.Tokens    // personal token lookups (auth.go)
	targets  *credcache.Agents    // agents pushes address, by ref (todos.go)
	verdicts *credcache.Verdicts  // MayAuthenticate's answers (auth.go)

	// The per-hook delivery limits (hooks.go): deliveries that pass the
	// signature check, those that fail it, refusals recorded in the log.
	receiver *delivery.Receiver // webhook deliveries
	sealer   *intake.Sealer     // nil = hook secrets in plaintext (design: Hook secrets sealed at rest)
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

// StoreReachable checks that the store answers (the readiness probe): one
// indexed query for the agents of an owner that cannot exist, bounded by
// ctx. Errors: the store's.
func (s *Service) StoreReachable(ctx context.Context) error {
	_, err := s.store.ListAgents(ctx, store.ListAgentsParams{OwnerID: "00000000-0000-0000-0000-000000000000"})
	return err
}

// Metrics returns the metrics port the Service counts through (never nil).
func (s *Service) Metrics() Metrics { return s.metrics }

// Clock returns the process's database clock (a *dbclock.Clock over the
// injected clock): its Now is the database's time as measured from this
// process, its timers run on the injected clock (design: Database clock).
// Every adapter that stamps or compares a time another instance also
// stamps or compares (console sessions, gateway, connection re-checks)
// reads this clock.
func (s *Service) Clock() clockwork.Clock { return s.clock }

// ClockOffset returns the measured offset of the database's clock from the
// injected clock (0 without Options.DBNow or before the first measurement).
func (s *Service) ClockOffset() time.Duration { return s.dbclock.Offset() }

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

// now returns the database clock's time in UTC truncated to microseconds,
// the precision both stores keep. Every time the store gets as now is this
// (design: Database clock).
func (s *Service) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// HashToken returns the stored form of a token (domain.HashToken).
func HashToken(token string) string { return domain.HashToken(token) }

// NewToken returns prefix + 43 characters of base64url (domain.NewToken).
func NewToken(prefix string) string { return domain.NewToken(prefix) }

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

// storeErr maps store sentinels onto domain errors with a detail
// (domain.StoreError).
func storeErr(err error, notFound, conflict string) error {
	return domain.StoreError(err, notFound, conflict)
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

// EventsCursor is the id of the newest operator event this instance holds
// ("" when none): taken before a page reads the state it shows, it is the
// Last-Event-ID the page's stream resumes from (events.Hub.Cursor).
func (s *Service) EventsCursor() string { return s.events.Cursor() }

// CloseEvents ends every event subscription and refuses new ones (server
// shutdown: open SSE streams end instead of holding it).
func (s *Service) CloseEvents() { s.events.Close() }
