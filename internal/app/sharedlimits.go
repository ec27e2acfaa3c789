package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/ratelimit"
	"github.com/rollcall/rollcall/internal/store"
)

// SharedFailures returns the shared failure counter of st (design: Limits
// shared by instances): the database's when st is a store.FailureCounter
// (PostgreSQL), nil otherwise (SQLite: one instance, counted in process).
// The edge's failed-authentication limit and the per-hook failed-check
// limit both count through it.
func SharedFailures(st store.Store) ratelimit.Shared {
	fc, ok := st.(store.FailureCounter)
	if !ok {
		return nil
	}
	return ratelimit.SharedFunc(func(ctx context.Context, keys []string, now time.Time, window time.Duration) ([]ratelimit.Window, error) {
		stored := make([]string, len(keys))
		for i, k := range keys {
			stored[i] = storedKey(k)
		}
		ws, err := fc.CountFailures(ctx, store.CountFailuresParams{Keys: stored, Now: now, Window: window})
		if err != nil {
			return nil, err
		}
		out := make([]ratelimit.Window, len(ws))
		for i, w := range ws {
			out[i] = ratelimit.Window{Start: w.Start, Count: w.Count}
		}
		return out, nil
	})
}

// storedKey is the database key of a limiter key: a credential prefix
// ("cred:" + the first 12 characters of a token) is stored as a SHA-256
// digest, so the table never holds characters of a token; client
// addresses and hook ids are stored as they are.
func storedKey(k string) string {
	if p, ok := strings.CutPrefix(k, "cred:"); ok {
		sum := sha256.Sum256([]byte(p))
		return "cred#" + hex.EncodeToString(sum[:12])
	}
	return k
}

// RateWindowRetention is how long a shared failure window's row stays
// after it started; every window is far shorter (a minute), so a row past
// it is over and a failure there starts a new one.
const RateWindowRetention = time.Hour

// PruneRateWindowsOnce deletes the shared failure windows that started
// more than RateWindowRetention ago (nothing on a store without them) and
// returns how many it deleted. It runs with the delivery log prune.
func (s *Service) PruneRateWindowsOnce(ctx context.Context) (int64, error) {
	s.hookFail.Prune(s.now())
	fc, ok := s.store.(store.FailureCounter)
	if !ok {
		return 0, nil
	}
	return fc.PruneRateWindows(ctx, s.now().Add(-RateWindowRetention))
}
