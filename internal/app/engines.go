package app

import (
	"context"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
)

// StreamOpened is called by the session hub when an agent gains its first
// open notification stream on this instance: it records the agent's first
// stream ever and, if the agent is in, sends a (re)connect digest, at most
// once per agent per doorbell.ReconnectDigestGate here (design:
// Connect and reconnect digests).
func (s *Service) StreamOpened(agentID string) { s.bell.StreamOpened(agentID) }

// RedeliverDoorbells hands the doorbells a session could not take — it
// closed, or its stream ended before they were written — to another session
// of the agent here at once (design: Redelivery on session loss). It returns
// how many were handed on. The session hub calls it.
func (s *Service) RedeliverDoorbells(agentID, fromSession string, msgs []domain.ChannelMessage) int {
	return s.bell.Redeliver(agentID, fromSession, msgs)
}

// EvaluatePresence runs one presence evaluator pass now (Run does every
// EvaluateInterval): agents changed since the last pass are re-read, and
// every transition due is claimed. It returns how many this instance
// claimed. Errors: the store's.
func (s *Service) EvaluatePresence(ctx context.Context) (int, error) { return s.eval.Pass(ctx) }

// SweepOnce runs one doorbell sweep pass now (Run does every
// SweepInterval): the due todos of this instance's receivers are selected
// and counted in one statement, then each is rung to one local session. It
// returns how many todos were rung. Errors: the store's.
func (s *Service) SweepOnce(ctx context.Context) (int, error) { return s.bell.SweepOnce(ctx) }

// FailoverOnce handles the doorbell failover checks due now (Run does it
// every doorbell.FailoverTick): a todo rung on one of several sessions of
// its agent here and still pending failover_after later is rung on another.
// It returns how many todos were rung again.
func (s *Service) FailoverOnce(ctx context.Context) int { return s.bell.FailoverOnce(ctx) }

// FlushRingRecords writes the ring records this instance queued (Run's
// recorder writes them in the background): afterwards every todo rung here
// shows its ring_attempts and last_ringed_at.
func (s *Service) FlushRingRecords() { s.bell.DrainRecords() }

// presenceWritten caches the row a presence write (or a vend) of this
// instance just stored and tells every other instance to refresh it
// (bus.Presence with this instance as origin: no store read here).
func (s *Service) presenceWritten(ctx context.Context, a *domain.Agent, cause string) {
	s.eval.Upsert(a, cause)
	s.sendPresence(ctx, bus.Presence{AgentID: a.ID, Cause: cause, Origin: s.instance})
}

// configWritten is presenceWritten for a write of the agent's
// configuration (update, revoke, hand-over, clock-in cap): this instance's
// tracker takes the row too, and the signal carries the configuration, so
// another instance's tracker reads nothing either (only its presence cache
// reads the row).
func (s *Service) configWritten(ctx context.Context, a *domain.Agent) {
	s.liveness.ConfigWritten(a)
	s.eval.Upsert(a, "")
	s.sendPresence(ctx, bus.Presence{AgentID: a.ID, Origin: s.instance, Config: bus.ConfigOf(a)})
}

// signalPresence tells every instance that an agent's presence inputs
// changed (bus.Presence).
func (s *Service) signalPresence(ctx context.Context, agentID, cause string) {
	s.sendPresence(ctx, bus.Presence{AgentID: agentID, Cause: cause})
}

func (s *Service) sendPresence(ctx context.Context, sig bus.Presence) {
	if err := bus.Send(ctx, s.bus, sig); err != nil {
		s.log.Warn("presence signal not published; other instances catch up within one evaluator pass", "agent_id", sig.AgentID, "err", err)
	}
}
