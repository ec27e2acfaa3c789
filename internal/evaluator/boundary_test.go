package evaluator_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/bus/pgbus"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store/postgres"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// lateness records, per agent, how late after the boundary an instance
// heard of its transition to in (OnIn: where the digest starts).
type lateness struct {
	mu       sync.Mutex
	boundary time.Time
	late     []time.Duration
	events   int
}

func (l *lateness) PresenceTransition(context.Context, string, string, string) {
	l.mu.Lock()
	l.events++
	l.mu.Unlock()
}

func (l *lateness) onIn(string, string) {
	d := time.Since(l.boundary)
	l.mu.Lock()
	l.late = append(l.late, d)
	l.mu.Unlock()
}

func (l *lateness) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.late)
}

// BenchmarkFleetBoundaryLateness measures (docs/benchmarks.md, "Shift
// boundaries on time") how late a shift start shared by
// ROLLCALL_BOUNDARY_AGENTS agents (default 1 000) reaches two instances on
// one PostgreSQL database, each with its own store pool and its own
// LISTEN/NOTIFY bus, on the real clock: the time from the boundary to each
// instance's OnIn of each agent. ROLLCALL_BOUNDARY_MODE=period runs the
// evaluators as they ran before (a pass every 30 s, no timer). It waits for
// the next minute boundary at least 20 s away and measures one boundary
// whatever b.N is (run it with -benchtime 1x).
func BenchmarkFleetBoundaryLateness(b *testing.B) {
	b.StopTimer()
	fleetBoundaryLateness(b)
}

func fleetBoundaryLateness(t testing.TB) {
	agents := 1000
	if n := os.Getenv("ROLLCALL_BOUNDARY_AGENTS"); n != "" {
		fmt.Sscan(n, &agents)
	}
	period := os.Getenv("ROLLCALL_BOUNDARY_MODE") == "period"
	ctx := t.Context()
	url := pgtest.FreshDatabase(t)
	open := func() (*postgres.Store, bus.Bus) {
		st, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		b, err := pgbus.Open(ctx, pgbus.Options{URL: url, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return st, b
	}
	st1, b1 := open()
	st2, b2 := open()
	now := time.Now().UTC()
	boundary := now.Truncate(time.Minute).Add(time.Minute)
	if boundary.Sub(now) < 20*time.Second {
		boundary = boundary.Add(time.Minute)
	}
	shift := boundary.Format("15:04") + "-" + boundary.Add(8*time.Hour).Format("15:04")
	for i := range agents {
		vend(t, st1, i, shift, time.Now().UTC())
	}
	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	ls := []*lateness{{boundary: boundary}, {boundary: boundary}}
	for i, sb := range []struct {
		st *postgres.Store
		b  bus.Bus
	}{{st1, b1}, {st2, b2}} {
		l := ls[i]
		ev := evaluator.New(evaluator.Config{Store: sb.st, Bus: sb.b, Events: l, Instance: fmt.Sprint("i", i), OnIn: l.onIn,
			Log: slog.New(slog.DiscardHandler)})
		if err := ev.Load(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if !period {
				ev.Run(runCtx, 30*time.Second)
				return
			}
			// The old loop: a pass at start (the transitions to out), then
			// one every 30 s.
			if _, err := ev.Pass(runCtx); err != nil && runCtx.Err() == nil {
				t.Error(err)
			}
			tk := time.NewTicker(30 * time.Second)
			defer tk.Stop()
			workgroup.Every(runCtx.Done(), tk.C, func() {
				if _, err := ev.Pass(runCtx); err != nil && runCtx.Err() == nil {
					t.Error(err)
				}
			})
		})
	}
	t.Logf("%d agents, shift %s; waiting %s for the boundary (mode timer=%v)", agents, shift, time.Until(boundary).Round(time.Second), !period)
	deadline := boundary.Add(45 * time.Second)
	for ls[0].count() < agents || ls[1].count() < agents {
		if time.Now().After(deadline) {
			t.Fatalf("by %s after the boundary the instances heard %d and %d of %d transitions", time.Since(boundary).Round(time.Millisecond), ls[0].count(), ls[1].count(), agents)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, l := range ls {
		l.mu.Lock()
		late := slices.Clone(l.late)
		events := l.events
		l.mu.Unlock()
		slices.Sort(late)
		q := func(p float64) time.Duration {
			return late[min(len(late)-1, int(p*float64(len(late))))].Round(time.Millisecond)
		}
		t.Logf("instance %d: claimed %d transitions (events); heard %d: first %s, p50 %s, p99 %s, last %s after the boundary",
			i+1, events, len(late), late[0].Round(time.Millisecond), q(0.5), q(0.99), late[len(late)-1].Round(time.Millisecond))
	}
}
