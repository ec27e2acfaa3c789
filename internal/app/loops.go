package app

import (
	"context"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// ReapInterval is how often expired leases are returned: a lease comes
// back within about a second of its end, as it holds its length (design:
// Database clock). A pass with nothing expired is one indexed statement.
const ReapInterval = time.Second

// Run runs this instance's background loops until ctx ends: the presence
// evaluator (design: Presence evaluator; every EvaluateInterval and at each
// agent's next presence change, design: Shift boundaries on time), the doorbell sweep
// (design: Sweep; every SweepInterval), the lease reaper (every ReapInterval) and the
// ring recorder, and the delivery log's pruning (design: Delivery log
// retention; every DeliveryPruneInterval, and once at the start) with the
// shared failure windows' (design: Limits shared by instances). Timers come from the injected clock. It loads the presence
// cache first.
func (s *Service) Run(ctx context.Context) {
	if err := s.eval.Load(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("presence cache not loaded; the evaluator retries on its next pass", "err", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.dbclock.Run(ctx) }) // the offset of the database's clock, every ClockSyncInterval
	wg.Go(func() { s.bell.RunRecorder(ctx) })
	wg.Go(func() { s.eval.Run(ctx, s.evalEvery) })
	wg.Go(func() {
		s.every(ctx, s.sweepEvery, "doorbell sweep", func(ctx context.Context) error { _, err := s.bell.SweepOnce(ctx); return err })
	})
	wg.Go(func() {
		s.every(ctx, doorbell.FailoverTick(s.failoverAfter), "doorbell failover", func(ctx context.Context) error { s.bell.FailoverOnce(ctx); return nil })
	})
	wg.Go(func() {
		s.loop(ctx, DeliveryPruneInterval, "delivery log prune", true, func(ctx context.Context) error {
			_, err := s.PruneDeliveriesOnce(ctx)
			if _, rerr := s.PruneRateWindowsOnce(ctx); rerr != nil && err == nil {
				err = rerr
			}
			return err
		})
	})
	s.every(ctx, ReapInterval, "lease reaper", func(ctx context.Context) error { _, err := s.ReapOnce(ctx); return err })
	wg.Wait()
}

func (s *Service) every(ctx context.Context, d time.Duration, name string, f func(context.Context) error) {
	s.loop(ctx, d, name, false, f)
}

// loop runs f every d of the injected clock until ctx ends, and once
// before the first tick when atStart (the ticker exists by then). A failed
// pass is logged; the next tick tries again.
func (s *Service) loop(ctx context.Context, d time.Duration, name string, atStart bool, f func(context.Context) error) {
	t := s.clock.NewTicker(d)
	defer t.Stop()
	pass := func() {
		if err := f(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn(name+" pass failed", "err", err)
		}
	}
	if atStart {
		pass()
	}
	workgroup.Every(ctx.Done(), t.Chan(), pass)
}
