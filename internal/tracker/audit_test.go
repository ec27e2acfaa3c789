package tracker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/testkit"
)

// countingStore counts the audited-report transactions and holds the first
// one until the gate opens.
type countingStore struct {
	store.Store
	calls atomic.Int64
	gate  chan struct{}
	once  sync.Once
	hit   chan struct{}
}

func (c *countingStore) ApplyReportedChanges(ctx context.Context, ps []store.ApplyReportedChangeParams) ([]bool, error) {
	c.calls.Add(1)
	c.once.Do(func() { close(c.hit); <-c.gate })
	return c.Store.ApplyReportedChanges(ctx, ps)
}

func (c *countingStore) ApplyReportedChange(ctx context.Context, p store.ApplyReportedChangeParams) (bool, error) {
	c.calls.Add(1) // the per-heartbeat transaction of the old code
	return c.Store.ApplyReportedChange(ctx, p)
}

// TestFirstReportsGroupCommitted (design: Billing-mode audit): the first reports of
// many agents arriving together — a fleet reconnecting — do not queue one
// transaction each behind the audit chain's lock: while one batch is being
// written, every report that arrives waits for the next one, so 200 first
// reports take 2 transactions. Each is still audited exactly once and the
// chain verifies. On the old code each heartbeat ran its own
// transaction (200).
func TestFirstReportsGroupCommitted(t *testing.T) {
	forStores(t, func(t *testing.T, opts ...envOpt) {
		cs := &countingStore{gate: make(chan struct{}), hit: make(chan struct{})}
		e := newLvEnv(t, append(opts, withConfig(crossCfg), wrapStore(func(s store.Store) store.Store { cs.Store = s; return cs }))...)
		const n = 200
		ps := make([]domain.Principal, n)
		for i := range ps {
			ps[i] = e.vend(fmt.Sprintf("fleet-%03d", i))
		}
		errs := make(chan error, n)
		go func() {
			_, err := e.svc.Heartbeat(t.Context(), ps[0], ps[0].Agent.ID, []byte(body("api")), app.Arrival{})
			errs <- err
		}()
		<-cs.hit // the first batch is being written
		for _, p := range ps[1:] {
			go func() {
				_, err := e.svc.Heartbeat(t.Context(), p, p.Agent.ID, []byte(body("api")), app.Arrival{})
				errs <- err
			}()
		}
		deadline := time.Now().Add(testkit.Wait)
		for trk(e.svc).AuditsWaiting() < n-1 {
			if time.Now().After(deadline) {
				t.Fatalf("%d reports waiting, want %d", trk(e.svc).AuditsWaiting(), n-1)
			}
			time.Sleep(time.Millisecond)
		}
		close(cs.gate)
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := cs.calls.Load(); got != 2 {
			t.Errorf("audited-report transactions = %d, want 2 (one batch written, one for all that waited)", got)
		}
		for _, p := range ps {
			if es := auditOf(t, e.store, p.Agent.ID, "agent.heartbeat"); len(es) != 1 {
				t.Fatalf("agent %s: %d agent.heartbeat entries, want 1", p.Agent.Handle, len(es))
			}
		}
		res, err := e.store.VerifyAudit(t.Context(), store.VerifyAuditParams{})
		if err != nil || !res.OK {
			t.Fatalf("VerifyAudit = %+v, %v", res, err)
		}
	})
}
