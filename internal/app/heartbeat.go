package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/ratelimit"
	"github.com/rollcall/rollcall/internal/stall"
	"github.com/rollcall/rollcall/internal/tracker"
)

// Ack is the answer to an accepted heartbeat: sync.heartbeat_interval in
// milliseconds.
type Ack = tracker.Ack

// Arrival is when a heartbeat arrived (ArriveHeartbeat); the zero Arrival
// arrives when Heartbeat runs.
type Arrival = tracker.Arrival

// RateLimitedError is the error of a request refused by a rate limit (a
// heartbeat, a hook delivery): code rate_limited, with Retry-After.
type RateLimitedError = ratelimit.Error

// Default per-principal heartbeat rate limit (tokens per second, burst).
const (
	DefaultHeartbeatRate  = tracker.DefaultRate
	DefaultHeartbeatBurst = tracker.DefaultBurst
)

// Heartbeat is the one heartbeat use case behind both transports (REST
// POST /v1/agents/{agent}/heartbeat and the gateway op heartbeat with
// member agent; design: Heartbeat body, Heartbeat authorization, Liveness states). body is an
// agent_heartbeat.v1 document, decoded by liveness.DecodeHeartbeat; arr is
// the Arrival ArriveHeartbeat returned (the gateway acks on its read path
// and runs this off it), or the zero Arrival for a heartbeat that arrives
// now (REST). In order:
//
//  1. the per-principal rate limit (unless ArriveHeartbeat took it):
//     *RateLimitedError (code rate_limited);
//  2. authorization: the agent itself may send; any other person or agent
//     gets not_found; the agent's owner gets forbidden with reason
//     subject_kind_not_allowed (404 before 403);
//  3. the body, project_readiness, the reported-change audit and the
//     tracker's entry (tracker.Tracker.Heartbeat).
//
// The Ack carries sync.heartbeat_interval in milliseconds.
func (s *Service) Heartbeat(ctx context.Context, p domain.Principal, agentRef string, body []byte, arr Arrival) (Ack, error) {
	if arr.IsZero() {
		var err error
		if arr, err = s.liveness.Arrive(p, ""); err != nil {
			return Ack{}, err
		}
	}
	a, err := s.authorizeHeartbeat(ctx, p, agentRef)
	if err != nil {
		return Ack{}, err
	}
	return s.liveness.Heartbeat(ctx, p, a, body, arr)
}

// ArriveHeartbeat is the first, in-memory step of a heartbeat with member
// agent on a transport that runs the rest off its read path (the gateway):
// the per-principal rate limit (*RateLimitedError), then it notes that a
// heartbeat of agentID arrived now, so until Heartbeat ran the agent's
// deadline runs from this arrival (liveness first). Pass the Arrival to
// Heartbeat, which then takes no second token.
func (s *Service) ArriveHeartbeat(p domain.Principal, agentID string) (Arrival, error) {
	return s.liveness.Arrive(p, agentID)
}

// HeartbeatInterval is sync.heartbeat_interval, the period adapters are
// told to heartbeat at.
func (s *Service) HeartbeatInterval() time.Duration { return s.liveness.Config().HeartbeatInterval }

// Stalls returns the process's stall detector (nil when it is off), which
// the gateway consults for its 4009 deadlines.
func (s *Service) Stalls() *stall.Detector { return s.liveness.Stalls() }

// authorizeHeartbeat applies the heartbeat's authorization matrix and
// returns the agent row.
func (s *Service) authorizeHeartbeat(ctx context.Context, p domain.Principal, ref string) (*domain.Agent, error) {
	notFound := func() error { return domain.Errorf(domain.CodeNotFound, "agent %q not found", ref) }
	switch {
	case p.Agent != nil:
		if ref != "" && (ref == p.Agent.ID || ref == p.Agent.Handle) {
			return p.Agent, nil
		}
		return nil, notFound() // another agent: the resource is the agent itself
	case p.Person != nil:
		a, err := s.store.GetAgent(ctx, ParseRef(ref))
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

// StartLiveness applies the tracker's start rule and starts its flush loop
// (tracker.Tracker.Start). Errors: the store could not be read.
//
// The database clock is measured first (bounded: at most 5 s), so the start
// rule and the first lease, ring or token of a skewed instance are already
// on the database's clock; a failed measurement is logged and this
// process's clock is used until Run measures it (design: Database clock).
func (s *Service) StartLiveness(ctx context.Context) error {
	if err := s.dbclock.Sync(ctx); err != nil {
		s.log.Warn("database clock not measured at start; this process's clock is used until it is", "err", err)
	}
	return s.liveness.Start(ctx)
}

// StopLiveness stops the tracker for shutdown: its timers stop without
// publishing and a last flush writes what is dirty within ctx
// (tracker.Tracker.Stop).
func (s *Service) StopLiveness(ctx context.Context) error { return s.liveness.Stop(ctx) }

// RequestLivenessClaims asks every other instance to claim the agents
// whose fresh heartbeats it holds (after the bus reconnected: claims sent
// meanwhile were lost).
func (s *Service) RequestLivenessClaims(ctx context.Context) { s.liveness.RequestClaims(ctx) }

// MismatchAges calls yield once per active agent this instance owns the
// deadline of, with the seconds since a billing difference began (0
// without one): the gauge rollcall.agent.billing_mode.mismatch_age.
func (s *Service) MismatchAges(yield func(handle string, seconds float64)) {
	s.liveness.MismatchAges(yield)
}
