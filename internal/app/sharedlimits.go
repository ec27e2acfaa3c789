package app

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/store"
)

// RateWindowRetention is how long a shared failure window's row stays
// after it started; every window is far shorter (a minute), so a row past
// it is over and a failure there starts a new one.
const RateWindowRetention = time.Hour

// PruneRateWindowsOnce deletes the shared failure windows that started
// more than RateWindowRetention ago (nothing on a store without them) and
// returns how many it deleted. It runs with the delivery log prune.
func (s *Service) PruneRateWindowsOnce(ctx context.Context) (int64, error) {
	s.receiver.PruneFailures(s.now())
	fc, ok := s.store.(store.FailureCounter)
	if !ok {
		return 0, nil
	}
	return fc.PruneRateWindows(ctx, s.now().Add(-RateWindowRetention))
}
