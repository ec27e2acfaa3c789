package app_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

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
	v, err := s1.Vend(ctx, admin, app.VendInput{Handle: "rev", Queues: []string{"build"}, Verbs: []string{"claim_next"}, BillingModes: []string{"api", "plan"}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s1.AuthenticateAgent(ctx, v.Credential)
	if err != nil {
		t.Fatal(err)
	}
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
