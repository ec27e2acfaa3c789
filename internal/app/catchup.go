package app

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/presence"
)

// CatchUpResult is what one CatchUp did.
type CatchUpResult struct {
	// Transitions is how many presence transitions broadcast while the
	// listener was down were handled here afterwards (event and digest).
	Transitions int
	// Claimed is how many due transitions the evaluator pass claimed.
	Claimed int
	// Rung is how many never-rung todos were rung.
	Rung int
}

// CatchUp recovers what this instance missed while its bus listener was
// down, lost at lostAt (design: Catch-up after a lost listener); the bus calls it
// once the listener LISTENs again, so nothing sent after the reload is
// missed:
//
//  1. the ring records queued here are written, so todos this instance
//     already rang count as rung;
//  2. the presence cache is reloaded from the store, and every transition
//     whose broadcast was missed is handled here: its
//     agent.presence_transition event goes to this instance's event hub,
//     and on "in" one digest to this instance's sessions;
//  3. an evaluator pass claims the transitions that fell due meanwhile
//     (also those whose claim failed during a database outage);
//  4. the never-rung pending todos of this instance's receivers created
//     since lostAt − doorbell.CatchUpSlack are rung (doorbell
//     Engine.RingMissed).
//
// Errors: the store's; the steps after a failed one are skipped (the next
// evaluator pass and sweep are the net).
func (s *Service) CatchUp(ctx context.Context, lostAt time.Time) (CatchUpResult, error) {
	var res CatchUpResult
	s.bell.DrainRecords()
	if err := s.eval.Load(ctx); err != nil {
		return res, err
	}
	for _, m := range s.eval.MissedTransitions() {
		s.log.Info("missed presence transition caught up", "agent_id", m.AgentID, "new", m.Presence, "reason", m.Reason)
		s.events.PresenceTransitionHere(ctx, m.AgentID, m.Presence, m.Reason)
		if m.Presence == presence.In {
			agentID, reason := m.AgentID, m.Reason
			s.background(func() { s.bell.Digest(context.Background(), agentID, reason) })
		}
		res.Transitions++
	}
	claimed, err := s.eval.Pass(ctx)
	res.Claimed = claimed
	if err != nil {
		return res, err
	}
	selected, rung, err := s.bell.RingMissed(ctx, lostAt)
	res.Rung = rung
	if err != nil {
		return res, err
	}
	res.Rung += s.bell.RouteHeld(ctx, s.bell.Receivers()...) // pooled todos the outage left held (design: Pool routing)
	if selected > 0 || res.Transitions > 0 || res.Claimed > 0 {
		s.log.Info("bus catch-up done", "transitions", res.Transitions, "claimed", res.Claimed, "rung", res.Rung, "lost_at", lostAt)
	}
	return res, nil
}
