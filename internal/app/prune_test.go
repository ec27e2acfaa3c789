package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
	"github.com/rollcall/rollcall/internal/store"
)

// pruneStore reports each PruneDeliveries pass (its cutoff and count)
// after the store ran it.
type pruneStore struct {
	store.Store
	passes chan prunePass
}

type prunePass struct {
	before time.Time
	n      int64
}

func (p *pruneStore) PruneDeliveries(ctx context.Context, q store.PruneDeliveriesParams) (int64, error) {
	n, err := p.Store.PruneDeliveries(ctx, q)
	p.passes <- prunePass{q.Before, n}
	return n, err
}

// TestDeliveryLogPruning (design: Delivery log retention): the loops prune
// once at the start and every DeliveryPruneInterval, with the cutoff now
// minus the retention on the injected clock; a redelivery within the
// retention is a duplicate, after the delivery is pruned it is recorded
// anew (its todo, still live, keeps its key: no second todo).
func TestDeliveryLogPruning(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	ps := &pruneStore{Store: st, passes: make(chan prunePass, 16)}
	svc := app.New(app.Options{Store: ps, Clock: clock})
	defer svc.Close()
	tok, _, err := svc.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := svc.AuthenticatePerson(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Vend(ctx, admin, app.VendInput{Handle: "rev", Queues: []string{"q"}, Verbs: []string{"claim_next"}}); err != nil {
		t.Fatal(err)
	}
	hk, err := svc.CreateHook(ctx, admin, app.HookInput{Kind: domain.HookGitHub, Agent: "rev", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	h, body := intaketest.GitHub(t, "issues.opened")
	intaketest.SignGitHub(h, hk.Secret, body)
	deliver := func() app.DeliveryResult {
		t.Helper()
		res, err := svc.Deliver(ctx, app.DeliveryInput{HookID: hk.Hook.ID, Header: h, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := deliver()
	if first.Outcome != domain.DeliveryCreated || first.TodoID == "" {
		t.Fatalf("first delivery = %+v, want created with a todo", first)
	}
	log := func() []domain.HookDelivery {
		t.Helper()
		ds, err := svc.HookDeliveries(ctx, admin, hk.Hook.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	wantPass := func(before time.Time, n int64) {
		t.Helper()
		select {
		case p := <-ps.passes:
			if !p.before.Equal(before) || p.n != n {
				t.Fatalf("prune pass = cutoff %s, %d deleted; want %s, %d", p.before, p.n, before, n)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no prune pass within 30 s")
		}
	}

	// 5 minutes before the retention ends: the start's pass keeps it.
	clock.Advance(app.DefaultDeliveryRetention - 5*time.Minute)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { svc.Run(runCtx) })
	defer wg.Wait()
	defer stop()
	wantPass(t0.Add(-5*time.Minute), 0)
	if res := deliver(); res.Outcome != domain.DeliveryDuplicate || res.TodoID != first.TodoID {
		t.Fatalf("redelivery within the retention = %+v, want duplicate of todo %s", res, first.TodoID)
	}
	if ds := log(); len(ds) != 1 {
		t.Fatalf("delivery log = %+v, want the first delivery only", ds)
	}

	// The next tick, 10 minutes on, prunes it.
	clock.Advance(app.DeliveryPruneInterval)
	wantPass(t0.Add(5*time.Minute), 1)
	if ds := log(); len(ds) != 0 {
		t.Fatalf("delivery log after pruning = %+v, want empty", ds)
	}
	again := deliver()
	if again.Outcome != domain.DeliveryCreated || again.TodoID != first.TodoID {
		t.Fatalf("redelivery after pruning = %+v, want recorded anew with the live todo %s", again, first.TodoID)
	}
	if ds := log(); len(ds) != 1 || !ds[0].ReceivedAt.Equal(clock.Now()) {
		t.Fatalf("delivery log = %+v, want the new record at %s", ds, clock.Now())
	}
}
