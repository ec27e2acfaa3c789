package app

import (
	"context"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// Sweep limits (DESIGN.md §3.8).
const (
	SweepPerAgent = 3    // todos per agent per pass
	SweepLimit    = 1000 // todos per pass in all
)

// Receivers returns this instance's receivers: agents with at least one
// session attached here (streaming or momentarily streamless) whose
// effective presence is in (DESIGN.md §3.8).
func (s *Service) Receivers() []string {
	hub := s.sessionHub()
	if hub == nil {
		return nil
	}
	now := s.now()
	var out []string
	for _, id := range hub.AgentsWithSessions() {
		if p, ok := s.Evaluator.Presence(id, now); ok && p == presence.In {
			out = append(out, id)
		}
	}
	return out
}

// SweepOnce runs one sweep pass: the todos of this instance's receivers
// that are due for a re-ring are selected and counted in one statement,
// then each is rung to one local session. No receivers → no query. It
// returns how many todos were rung.
func (s *Service) SweepOnce(ctx context.Context) (int, error) {
	recv := s.Receivers()
	if len(recv) == 0 {
		return 0, nil
	}
	todos, err := s.presenceStore().SweepRing(ctx, store.SweepParams{
		Receivers: recv, Excluded: s.Evaluator.excluded(recv), Now: s.now(), PerAgent: SweepPerAgent, Limit: SweepLimit,
	})
	if err != nil {
		return 0, err
	}
	d := s.Doorbell
	s.metrics.SweepRung(len(todos))
	for _, t := range todos {
		d.deliver(domain.TodoReady{AgentID: t.AgentID, TodoID: t.ID, Queue: t.Queue, Title: t.Title, Kind: t.Kind, Source: t.Source}, ringSweep)
	}
	return len(todos), nil
}
