package app_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/skewclock"
	"github.com/rollcall/rollcall/internal/store"
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
			p := vendAgent(t, sa, admin, app.VendInput{Handle: "worker", Queues: []string{"q"}, Verbs: []string{"claim", "complete"}})
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

// countingStore counts the reads of agent rows one instance makes.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (c *countingStore) GetAgent(ctx context.Context, ref store.AgentRef) (domain.Agent, error) {
	c.reads.Add(1)
	return c.Store.GetAgent(ctx, ref)
}

func (c *countingStore) ListAgentsChangedSince(ctx context.Context, p store.ListChangedParams) ([]domain.Agent, error) {
	c.reads.Add(1)
	return c.Store.ListAgentsChangedSince(ctx, p)
}

// TestOnePresenceCacheRead: two instances on one store and one bus, each
// with its own counting port. A presence write costs the writing instance
// only the use case's own read (OwnedAgent: its cache and its tracker take
// the written row) and the other instance one read (its presence cache's
// refresh); so does a configuration write (PATCH billing_mode) of an agent
// both track: the writer's cache and tracker take the written row, and the
// other tracker the configuration the signal carries; a readiness change
// reported in a heartbeat costs each instance one read (design: Presence
// cache).
func TestOnePresenceCacheRead(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	b := bus.NewLocal()
	c1, c2 := &countingStore{Store: st}, &countingStore{Store: st}
	s1 := app.New(app.Options{Store: c1, Bus: b, Clock: clock, InstanceID: "i1"})
	defer s1.Close()
	s2 := app.New(app.Options{Store: c2, Bus: b, Clock: clock, InstanceID: "i2"})
	defer s2.Close()
	admin := bootstrapAdmin(t, s1)
	p := vendAgent(t, s1, admin, app.VendInput{Handle: "rev", Queues: []string{"build"}, Verbs: []string{"claim_next"}, BillingModes: []string{"api", "plan"}})
	beat := func(s *app.Service, body string) {
		t.Helper()
		if _, err := s.Heartbeat(ctx, p, p.Agent.ID, []byte(body), app.Arrival{}); err != nil {
			t.Fatal(err)
		}
	}
	// Both instances cache the agent and track its heartbeats.
	for _, s := range []*app.Service{s1, s2} {
		if _, err := s.EvaluatePresence(ctx); err != nil {
			t.Fatal(err)
		}
	}
	beat(s2, `{"state":"online"}`)
	beat(s1, `{"state":"online"}`)
	// The first transition's event looks the agent's owner up once per
	// event hub (events.Hub caches it): not a presence cache read.
	if _, err := s1.SetPresence(ctx, admin, "rev", app.PresenceInput{Presence: "out"}); err != nil {
		t.Fatal(err)
	}
	reads := func(what string, want1, want2 int64, f func()) {
		t.Helper()
		c1.reads.Store(0)
		c2.reads.Store(0)
		f()
		if got1, got2 := c1.reads.Load(), c2.reads.Load(); got1 != want1 || got2 != want2 {
			t.Errorf("%s: %d reads on the writing instance and %d on the other, want %d and %d", what, got1, got2, want1, want2)
		}
	}
	reads("presence write", 1, 1, func() {
		if _, err := s1.SetPresence(ctx, admin, "rev", app.PresenceInput{Presence: "in"}); err != nil {
			t.Fatal(err)
		}
	})
	mode := "plan"
	reads("configuration write", 1, 1, func() {
		if _, err := s1.UpdateAgent(ctx, admin, "rev", app.UpdateInput{BillingMode: &mode}); err != nil {
			t.Fatal(err)
		}
	})
	reads("readiness change", 1, 1, func() {
		beat(s1, `{"state":"online","project_readiness":[{"queue":"build","ready":false,"reason":"no_checkout"}]}`)
	})
}

// allSessionsHub is a SessionHub with one streaming session for each of
// its agents that takes every notification.
type allSessionsHub struct{ agents []string }

func (allSessionsHub) AgentSessions(agentID string) []app.SessionInfo {
	return []app.SessionInfo{{ID: "s-" + agentID, AgentID: agentID, Streaming: true}}
}
func (allSessionsHub) Notify(string, domain.ChannelMessage) error { return nil }
func (allSessionsHub) CloseAgentSessions(string, []string)        {}
func (h allSessionsHub) AgentsWithSessions() []string             { return h.agents }

// BenchmarkSweepOnce measures one doorbell sweep pass through the use case
// (receivers' cached presence, the store's SweepRing on SQLite, one ring
// per selected todo) with 500 receivers holding 20 pending todos each:
// every op moves the clock 7 h, past every backoff, so each pass rings the
// pass limit (1 000 todos, 3 per agent). 40 ops stay within the ring budget
// of the 10 000 todos.
//
//	go test -run '^$' -bench BenchmarkSweepOnce -benchtime 40x -benchmem ./internal/app/
func BenchmarkSweepOnce(b *testing.B) {
	const agents, perAgent = 500, 20
	ctx := context.Background()
	st := openStore(b)
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	owner := domain.Person{ID: "00000000-0000-7000-8000-000000000001", Name: "admin", Active: true, CreatedAt: t0}
	owner.SetRole(domain.RoleAdmin)
	if _, err := st.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: owner, TokenHash: "h", TokenID: "00000000-0000-7000-8000-000000000002"}); err != nil {
		b.Fatal(err)
	}
	hub := allSessionsHub{}
	for i := range agents {
		a := domain.Agent{ID: fmt.Sprintf("00000000-0000-7000-8001-%012d", i), Handle: fmt.Sprintf("a%d", i), OwnerID: owner.ID, Name: "a",
			Active: true, Scope: domain.Scope{Queues: []string{"q"}, Verbs: []string{"claim_next"}}, BillingModes: []string{}, CreatedAt: t0, UpdatedAt: t0}
		if err := st.CreateAgent(ctx, store.CreateAgentParams{Agent: a, CredentialID: fmt.Sprintf("00000000-0000-7000-8002-%012d", i), CredentialHash: fmt.Sprint("c", i),
			Audit: domain.AuditRecord{Actor: "operator:" + owner.ID, Action: "agent.vend", AgentID: a.ID}}); err != nil {
			b.Fatal(err)
		}
		hub.agents = append(hub.agents, a.ID)
		for j := range perAgent {
			td := domain.Todo{ID: fmt.Sprintf("00000000-0000-7000-8003-%06d%06d", i, j), AgentID: a.ID, Queue: "q", Title: "t", PushEligible: true,
				CreatedBy: "operator:" + owner.ID, State: domain.TodoPending, MaxAttempts: 3, CreatedAt: t0, UpdatedAt: t0}
			if _, _, err := st.CreateTodo(ctx, store.CreateTodoParams{Todo: td}); err != nil {
				b.Fatal(err)
			}
		}
	}
	s := app.New(app.Options{Store: st, Clock: clock})
	defer s.Close()
	s.SetSessionHub(hub)
	rung := 0
	for b.Loop() {
		clock.Advance(7 * time.Hour)
		n, err := s.SweepOnce(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rung += n
	}
	b.ReportMetric(float64(rung)/float64(b.N), "rings/op")
}
