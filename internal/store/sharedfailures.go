package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/ratelimit"
)

// SharedFailures returns the shared failure counter of st (design: Limits
// shared by instances): the database's when st is a store.FailureCounter
// (PostgreSQL), nil otherwise (SQLite: one instance, counted in process).
// The edge's failed-authentication limit and the per-hook failed-check
// limit both count through it.
func SharedFailures(st Store) ratelimit.Shared {
	fc, ok := st.(FailureCounter)
	if !ok {
		return nil
	}
	return ratelimit.SharedFunc(func(ctx context.Context, keys []string, now time.Time, window time.Duration) ([]ratelimit.Window, error) {
		stored := make([]string, len(keys))
		for i, k := range keys {
			stored[i] = storedKey(k)
		}
		ws, err := fc.CountFailures(ctx, CountFailuresParams{Keys: stored, Now: now, Window: window})
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
