package app

import (
	"context"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/doorbell"
)

// ReapInterval is how often expired leases are returned.
const ReapInterval = 5 * time.Second

// Run runs this instance's background loops until ctx ends: the presence
// evaluator (design: Presence evaluator; every EvaluateInterval and at each
// agent's next presence change, design: Shift boundaries on time), the doorbell sweep
// (design: Sweep; every SweepInterval), the lease reaper (every ReapInterval) and the
// ring recorder. Timers come from the injected clock. It loads the presence
// cache first.
func (s *Service) Run(ctx context.Context) {
	if err := s.eval.Load(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("presence cache not loaded; the evaluator retries on its next pass", "err", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.bell.RunRecorder(ctx) })
	wg.Go(func() { s.eval.Run(ctx, s.evalEvery) })
	wg.Go(func() {
		s.every(ctx, s.sweepEvery, "doorbell sweep", func(ctx context.Context) error { _, err := s.bell.SweepOnce(ctx); return err })
	})
	wg.Go(func() {
		s.every(ctx, doorbell.FailoverTick(s.failoverAfter), "doorbell failover", func(ctx context.Context) error { s.bell.FailoverOnce(ctx); return nil })
	})
	s.every(ctx, ReapInterval, "lease reaper", func(ctx context.Context) error { _, err := s.ReapOnce(ctx); return err })
	wg.Wait()
}

func (s *Service) every(ctx context.Context, d time.Duration, name string, f func(context.Context) error) {
	t := s.clock.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			if err := f(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn(name+" pass failed", "err", err)
			}
		}
	}
}
