package doorbell

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// Sweep limits (design: Sweep).
const (
	SweepPerAgent = 3    // todos per agent per pass
	SweepLimit    = 1000 // todos per pass in all
)

// CatchUpSlack widens a catch-up's window before the moment the bus
// listener was noticed lost: a NOTIFY sent shortly before was lost too, and
// the todo's created_at comes from the pushing instance's clock.
const CatchUpSlack = time.Minute

// CatchUpLimit bounds the todos one catch-up rings.
const CatchUpLimit = 1000

// Receivers returns this instance's receivers: agents with at least one
// session attached here (streaming or momentarily streamless) whose
// effective presence is in (design: Sweep).
func (d *Engine) Receivers() []string {
	hub := d.sessionHub()
	if hub == nil {
		return nil
	}
	now := d.now()
	var out []string
	for _, id := range hub.AgentsWithSessions() {
		if p, ok := d.presence.Presence(id, now); ok && p == presence.In {
			out = append(out, id)
		}
	}
	return out
}

// SweepOnce runs one sweep pass: the todos of this instance's receivers
// that are due for a re-ring are selected and counted in one statement,
// then each is rung to one local session. No receivers → no query. It
// returns how many todos were rung. Errors: the store's.
func (d *Engine) SweepOnce(ctx context.Context) (int, error) {
	recv := d.Receivers()
	if len(recv) == 0 {
		return 0, nil
	}
	todos, err := d.store.SweepRing(ctx, store.SweepParams{
		Receivers: recv, Excluded: d.presence.Excluded(recv), Now: d.now(), PerAgent: SweepPerAgent, Limit: SweepLimit,
	})
	if err != nil {
		return 0, err
	}
	d.metrics.SweepRung(len(todos))
	for _, t := range todos {
		d.deliver(readyOf(t), ringSweep)
	}
	held := d.RouteHeld(ctx, recv...) // held pooled todos (design: Pool routing)
	return len(todos) + held, nil
}

// RingMissed rings, after a bus outage noticed at lostAt, the never-rung
// pending todos of this instance's receivers created since lostAt −
// CatchUpSlack (store.RingMissed: selected and counted in one statement),
// delivered like sweep rings but not twice within the dedup TTL (design:
// Catch-up after a lost listener). It returns how many todos the store selected and
// how many of them were rung here. Call DrainRecords first, so todos this
// instance already rang count as rung. Errors: the store's.
func (d *Engine) RingMissed(ctx context.Context, lostAt time.Time) (selected, rung int, err error) {
	recv := d.Receivers()
	if len(recv) == 0 {
		return 0, 0, nil
	}
	todos, err := d.store.RingMissed(ctx, store.MissedRingParams{
		Receivers: recv, Excluded: d.presence.Excluded(recv), Since: lostAt.UTC().Add(-CatchUpSlack), Now: d.now(), Limit: CatchUpLimit,
	})
	if err != nil {
		return 0, 0, err
	}
	for _, t := range todos {
		if d.deliver(readyOf(t), ringCatchUp) {
			rung++
		}
	}
	return len(todos), rung, nil
}
