package store

import (
	"context"
	"time"
)

// FailureCounter is implemented by a store that several instances share
// (PostgreSQL): it counts failures per key in fixed windows in the
// database, so the failed-authentication limit and the per-hook
// failed-signature limit are one budget for all instances (design: Limits
// shared by instances). SQLite serves one instance and does not implement
// it; its limits count in process.
type FailureCounter interface {
	// CountFailures counts one failure of each of p.Keys (distinct) at
	// p.Now in one statement: a key with no window, or one that started at
	// or before p.Now minus p.Window, starts a window at p.Now with count 1;
	// any other window's count grows by 1. It returns every key's window
	// after the count, in the order of p.Keys.
	CountFailures(ctx context.Context, p CountFailuresParams) ([]FailureWindow, error)
	// PruneRateWindows deletes the windows that started before before and
	// returns how many it deleted.
	PruneRateWindows(ctx context.Context, before time.Time) (int64, error)
}

// CountFailuresParams counts one failure of each key.
type CountFailuresParams struct {
	Keys   []string
	Now    time.Time
	Window time.Duration
}

// FailureWindow is one key's current window: when it started and the
// failures counted in it.
type FailureWindow struct {
	Key   string
	Start time.Time
	Count int
}
