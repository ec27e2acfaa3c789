package postgres

import (
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store"
)

// TestCountFailures (design: Limits shared by instances): one statement
// counts each key; a window that ended restarts at 1; two stores on one
// database (two instances) counting concurrently lose no failure; the prune
// deletes ended windows only.
func TestCountFailures(t *testing.T) {
	u := pgtest.FreshSchema(t, pgtest.FreshDatabase(t))
	a, b := openT(t, u), openT(t, u)
	ctx := t.Context()
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	count := func(s *Store, now time.Time, keys ...string) []store.FailureWindow {
		t.Helper()
		ws, err := s.CountFailures(ctx, store.CountFailuresParams{Keys: keys, Now: now, Window: time.Minute})
		if err != nil || len(ws) != len(keys) {
			t.Fatalf("CountFailures(%v) = %v, %v", keys, ws, err)
		}
		return ws
	}
	ws := count(a, t0, "ip:192.0.2.1", "cred:rct_abcdefgh")
	for i, w := range ws {
		if w.Count != 1 || !w.Start.Equal(t0) {
			t.Fatalf("first failure of key %d: %+v", i, w)
		}
	}
	ws = count(b, t0.Add(30*time.Second), "cred:rct_abcdefgh", "ip:192.0.2.1")
	if ws[0].Key != "cred:rct_abcdefgh" || ws[0].Count != 2 || !ws[0].Start.Equal(t0) || ws[1].Count != 2 {
		t.Fatalf("second failure, other instance: %+v", ws)
	}
	if ws = count(a, t0.Add(time.Minute), "ip:192.0.2.1"); ws[0].Count != 1 || !ws[0].Start.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the window: %+v", ws)
	}

	// 2 instances × 50 concurrent failures of one key: 100 counted.
	at := t0.Add(2 * time.Minute)
	var wg sync.WaitGroup
	for _, s := range []*Store{a, b} {
		for range 50 {
			wg.Go(func() {
				if _, err := s.CountFailures(ctx, store.CountFailuresParams{Keys: []string{"hook:h1"}, Now: at, Window: time.Minute}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if ws = count(a, at, "hook:h1"); ws[0].Count != 101 {
		t.Fatalf("after 100 concurrent failures and one more: count %d, want 101", ws[0].Count)
	}

	n, err := b.PruneRateWindows(ctx, t0.Add(90*time.Second))
	if err != nil || n != 2 { // the cred window of t0 and the ip window of t0+1m
		t.Fatalf("prune = %d, %v; want 2", n, err)
	}
	if ws = count(a, at, "hook:h1"); ws[0].Count != 102 {
		t.Fatalf("the live window was pruned: %+v", ws)
	}
}

// BenchmarkCountFailures measures what a counted failure adds on
// PostgreSQL: one upsert of two keys (a client address and a credential
// prefix), as the edge makes for a failed authentication.
func BenchmarkCountFailures(b *testing.B) {
	s := openT(b, pgtest.FreshSchema(b, pgtest.FreshDatabase(b)))
	now := time.Now()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		keys := []string{"ip:192.0.2." + string(rune('0'+i%10)), "cred:rct_bench"}
		if _, err := s.CountFailures(b.Context(), store.CountFailuresParams{Keys: keys, Now: now, Window: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}
