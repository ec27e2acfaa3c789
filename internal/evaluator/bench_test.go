package evaluator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/testkit"
)

// BenchmarkEvaluatorPass measures one presence evaluator pass over 100 000
// cached agents that all have shifts (design: Presence evaluator:
// cost grows with the agents whose presence changes, ≤ 10 ms when none
// does).
// A pass is the indexed "changed since" query on the real store plus the
// due-heap work. "none" runs passes between boundaries; "1pct" moves the
// clock so 1 % of the agents reach a shift boundary in each pass.
func BenchmarkEvaluatorPass(b *testing.B) {
	const agents = 100_000
	ctx := context.Background()
	st := testkit.OpenSQLite(b)
	start := time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC) // Monday
	clock := clockwork.NewFakeClockAt(start)
	s := New(Config{Store: st, Bus: bus.NewLocal(), Events: nopEvents{}, Clock: clock})
	if err := s.Load(ctx); err != nil {
		b.Fatal(err)
	}
	// Shifts start on the minute across the day, so boundaries spread out.
	for i := range agents {
		startMin := (i % 1440)
		shift := fmt.Sprintf("%02d:%02d-%02d:%02d", startMin/60, startMin%60, (startMin/60+8)%24, startMin%60)
		a := domain.Agent{ID: fmt.Sprintf("00000000-0000-7000-8000-%012d", i), Handle: fmt.Sprintf("a%d", i), Active: true,
			Presence: domain.PresenceColumns{Shift: shift, Seen: "in"}}
		s.Upsert(&a, "")
	}
	if _, err := s.Pass(ctx); err != nil { // first pass evaluates everyone
		b.Fatal(err)
	}
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Pass(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("1pct", func(b *testing.B) {
		// 100 000 agents over 1 440 start minutes and as many ends: one
		// minute of clock moves ~139 agents (0.14 %) across a boundary, so
		// 7 minutes ≈ 1 %.
		for b.Loop() {
			clock.Advance(7 * time.Minute)
			if _, err := s.Pass(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// nopEvents publishes nothing.
type nopEvents struct{}

func (nopEvents) PresenceTransition(context.Context, string, string, string) {}
