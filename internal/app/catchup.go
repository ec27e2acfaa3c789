package app

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// CatchUpSlack widens a catch-up's window before the moment the bus
// listener was noticed lost: a NOTIFY sent shortly before was lost too, and
// the todo's created_at comes from the pushing instance's clock.
const CatchUpSlack = time.Minute

// CatchUpLimit bounds the todos one catch-up rings.
const CatchUpLimit = 1000

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
// down, lost at lostAt (DESIGN.md §4, issue 8 item 2); the bus calls it once
// the listener LISTENs again, so nothing sent after the reload is missed:
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
//     since lostAt − CatchUpSlack are rung (store.RingMissed: selected and
//     counted in one statement) and delivered like sweep rings.
//
// Errors: the store's; the steps after a failed one are skipped (the next
// evaluator pass and sweep are the net).
func (s *Service) CatchUp(ctx context.Context, lostAt time.Time) (CatchUpResult, error) {
	var res CatchUpResult
	s.Doorbell.DrainRecords()
	if err := s.Evaluator.Load(ctx); err != nil {
		return res, err
	}
	now := s.now()
	for _, m := range s.Evaluator.missedTransitions() {
		reason := catchUpReason(m.presence, m.by, m.inputs, now)
		s.log.Info("missed presence transition caught up", "agent_id", m.agentID, "new", m.presence, "reason", reason)
		s.events.PresenceTransitionHere(ctx, m.agentID, m.presence, reason)
		if m.presence == presence.In {
			agentID := m.agentID
			s.background(func() { s.Digests.Send(context.Background(), agentID, reason) })
		}
		res.Transitions++
	}
	claimed, err := s.Evaluator.Pass(ctx)
	res.Claimed = claimed
	if err != nil {
		return res, err
	}
	recv := s.Receivers()
	if len(recv) == 0 {
		return res, nil
	}
	todos, err := s.presenceStore().RingMissed(ctx, store.MissedRingParams{
		Receivers: recv, Excluded: s.Evaluator.excluded(recv), Since: lostAt.UTC().Add(-CatchUpSlack), Now: now, Limit: CatchUpLimit,
	})
	if err != nil {
		return res, err
	}
	for _, t := range todos {
		if s.Doorbell.deliver(domain.TodoReady{AgentID: t.AgentID, TodoID: t.ID, Queue: t.Queue, Title: t.Title, Kind: t.Kind, Source: t.Source}, ringCatchUp) {
			res.Rung++
		}
	}
	if len(todos) > 0 || res.Transitions > 0 || res.Claimed > 0 {
		s.log.Info("bus catch-up done", "transitions", res.Transitions, "claimed", res.Claimed, "rung", res.Rung, "lost_at", lostAt)
	}
	return res, nil
}
