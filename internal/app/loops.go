package app

import (
	"context"
	"time"
)

// ReapInterval is how often expired leases are returned.
const ReapInterval = 5 * time.Second

// Run runs the background loops of this instance (the lease reaper and the
// ring recorder) until ctx ends. Timers come from the injected clock.
func (s *Service) Run(ctx context.Context) {
	go s.Doorbell.RunRecorder(ctx)
	t := s.clock.NewTicker(ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			if _, err := s.ReapOnce(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reaper pass failed", "err", err)
			}
		}
	}
}
