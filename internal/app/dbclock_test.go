package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/skewclock"
)

// TestLeasesOnTheDatabaseClock: instance B's wall clock is 25 s ahead of
// (or behind) A's and the database's. Both measure the database's clock
// before serving, so every lease is stamped and compared on it (design:
// Database clock): the stored lease_expires_at of a claim on either
// instance is the database's now + the lease; a 10 s lease taken on B comes
// back (reaped, claimable on A) after 10 s, not 35 s; a 40 s lease taken on
// A is not reaped by B early, and completes on A and on B at 20 s. Before,
// B stamped and compared with its own wall clock.
func TestLeasesOnTheDatabaseClock(t *testing.T) {
	for _, skew := range []time.Duration{25 * time.Second, -25 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			ctx := context.Background()
			st := openStore(t)
			proc := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
			dbNow := func(context.Context) (time.Time, error) { return proc.Now(), nil } // the database's clock
			b := bus.NewLocal()
			start := func(id string, clock clockwork.Clock) *app.Service {
				s := app.New(app.Options{Store: st, Bus: b, Clock: clock, DBNow: dbNow, InstanceID: id})
				if err := s.StartLiveness(ctx); err != nil { // measures the database's clock first
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.StopLiveness(ctx); s.Close() })
				return s
			}
			sa := start("a", proc)
			sb := start("b", skewclock.New(proc, skew))
			if got := sb.ClockOffset(); got != -skew {
				t.Fatalf("B measured the database's clock at %s from its own, want %s", got, -skew)
			}
			if got := sb.Clock().Now(); !got.Equal(proc.Now()) {
				t.Fatalf("B's clock says %s, the database's %s", got, proc.Now())
			}
			admin := bootstrapAdmin(t, sa)
			v, err := sa.Vend(ctx, admin, app.VendInput{Handle: "worker", Queues: []string{"q"}, Verbs: []string{"claim", "complete"}})
			if err != nil {
				t.Fatal(err)
			}
			p, err := sa.AuthenticateAgent(ctx, v.Credential)
			if err != nil {
				t.Fatal(err)
			}
			a := p.Agent
			push := func(s *app.Service, title string) domain.Todo {
				t.Helper()
				td, _, err := s.PushTodo(ctx, admin, a.ID, app.PushInput{Queue: "q", Title: title})
				if err != nil {
					t.Fatal(err)
				}
				if !td.CreatedAt.Equal(proc.Now()) {
					t.Fatalf("%s: created_at %s, want the database's now %s", title, td.CreatedAt, proc.Now())
				}
				return td
			}
			// claim claims on s and checks the stored lease end: the
			// database's now + lease, whichever instance stamped it.
			claim := func(s *app.Service, td domain.Todo, lease time.Duration) {
				t.Helper()
				if _, err := s.Claim(ctx, a, td.ID, int64(lease/time.Second)); err != nil {
					t.Fatalf("claim %s: %v", td.Title, err)
				}
				stored, err := sa.GetTodo(ctx, admin, td.ID)
				if err != nil {
					t.Fatal(err)
				}
				if want := proc.Now().Add(lease); stored.LeaseExpiresAt == nil || !stored.LeaseExpiresAt.Equal(want) {
					t.Fatalf("claim %s: stored lease_expires_at %v, want the database's now + %s = %s", td.Title, stored.LeaseExpiresAt, lease, want)
				}
			}
			reap := func(s *app.Service, at string, want int) {
				t.Helper()
				if n, err := s.ReapOnce(ctx); err != nil || n != want {
					t.Fatalf("%s: ReapOnce = %d, %v; want %d", at, n, err, want)
				}
			}

			onA, onA2 := push(sa, "held on A"), push(sb, "held on A, completed on B")
			onB := push(sb, "short on B")
			claim(sa, onA, 40*time.Second)
			claim(sa, onA2, 40*time.Second)
			claim(sb, onB, 10*time.Second)

			proc.Advance(9 * time.Second)
			reap(sb, "9 s", 0)
			reap(sa, "9 s", 0)
			proc.Advance(2 * time.Second)
			reap(sa, "11 s, the 10 s lease taken on B", 1)
			claim(sa, onB, 40*time.Second) // back in the queue: claimable on A

			proc.Advance(9 * time.Second) // 20 s into the 40 s leases
			reap(sb, "20 s", 0)
			if _, err := sa.Complete(ctx, a, onA.ID, nil); err != nil {
				t.Fatalf("complete on A at 20 s of a 40 s lease: %v", err)
			}
			if _, err := sb.Complete(ctx, a, onA2.ID, nil); err != nil {
				t.Fatalf("complete on B at 20 s of a 40 s lease taken on A: %v", err)
			}
		})
	}
}
