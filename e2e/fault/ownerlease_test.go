package fault

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Owner lease (design: Owner lease): instance A is killed with SIGKILL (no
// shutdown, no flush, no lease release) while its agents heartbeat to it;
// B, on the same database, publishes each of them offline once within
// agent.presence_timeout + 2 s of its last heartbeat — or, when the clients
// reconnect to B within the timeout, publishes no offline at all.
//
// Timings: baseArgs (heartbeat interval 1 s, presence timeout 3 s) and the
// default agent.heartbeat_persist_interval (60 s), so only the lease can
// meet the bound: without it, B's watch takes over at timeout + 2 × persist
// interval (123 s).

// leaseSlack is what the bound allows on top of timeout + 2 s for process
// scheduling on a busy machine: the test's own clients and event reader,
// B's timers and its store round trips. It is no part of the rule.
const leaseSlack = 1500 * time.Millisecond

// leaseClient is one gateway agent that keeps a connection to the first of
// servers, and after it closes, to the next (a client that a load balancer
// sends to another instance), sending a heartbeat every period. It records
// when it sent the last heartbeat that a server acknowledged, and the
// acknowledgements each server sent.
type leaseClient struct {
	a         vended
	lastAcked atomic.Int64 // unix ns of the send of the last acknowledged heartbeat
	acks      []atomic.Int64
}

func newLeaseClient(a vended, servers int) *leaseClient {
	return &leaseClient{a: a, acks: make([]atomic.Int64, servers)}
}

func (lc *leaseClient) run(ctx context.Context, servers []*server, period time.Duration) {
	for i := 0; ctx.Err() == nil; i = min(i+1, len(servers)-1) {
		lc.once(ctx, servers[i], i, period)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // the reconnect backoff of gatewayAgent
		}
	}
}

func (lc *leaseClient) once(ctx context.Context, srv *server, idx int, period time.Duration) {
	dctx, cancel := context.WithTimeout(ctx, wait)
	c, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/gateway", nil)
	cancel()
	if err != nil {
		return
	}
	defer c.CloseNow()
	if _, _, err := c.Read(ctx); err != nil { // hello
		return
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+lc.a.Credential+`"}}`)); err != nil {
		return
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	var mu sync.Mutex
	var sent []time.Time // sends not acknowledged yet, oldest first (acks come in order)
	go func() {
		defer stop()
		for {
			_, b, err := c.Read(rctx)
			if err != nil {
				return
			}
			if strings.Contains(string(b), `"heartbeat_ack"`) {
				mu.Lock()
				if len(sent) > 0 {
					lc.lastAcked.Store(sent[0].UnixNano())
					sent = sent[1:]
				}
				mu.Unlock()
				lc.acks[idx].Add(1)
			}
		}
	}()
	for rctx.Err() == nil {
		mu.Lock()
		sent = append(sent, time.Now())
		mu.Unlock()
		if err := c.Write(rctx, websocket.MessageText, []byte(`{"op":"heartbeat","d":{"agent":{"state":"online"}}}`)); err != nil {
			return
		}
		select {
		case <-rctx.Done():
		case <-time.After(period):
		}
	}
}

// leaseREST heartbeats agent a over REST to srv every period until ctx
// ends, recording the send of the last heartbeat answered 200.
func leaseREST(ctx context.Context, srv *server, a vended, period time.Duration, last *atomic.Int64) {
	for ctx.Err() == nil {
		at := time.Now()
		if code, _ := restHeartbeat(srv, a); code == 200 {
			last.Store(at.UnixNano())
		}
		select {
		case <-ctx.Done():
		case <-time.After(period):
		}
	}
}

// TestFaultOwnerLeaseKilled: 3 gateway agents and 2 REST agents heartbeat
// to A every 500 ms; they stop, and A is killed with SIGKILL at once. B
// publishes each offline exactly once, within presence timeout (3 s) + 2 s
// + leaseSlack of the send of its last heartbeat A answered.
func TestFaultOwnerLeaseKilled(t *testing.T) {
	a, b, evB, gw := startLeasePair(t, 1, "lease-gw0", "lease-gw1", "lease-gw2")
	rest := make([]vended, 2)
	restLast := make([]atomic.Int64, len(rest))
	for i := range rest {
		rest[i] = vend(t, a, fmt.Sprintf("lease-rest%d", i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, lc := range gw {
		wg.Go(func() { lc.run(ctx, []*server{a}, leasePeriod) })
	}
	for i, ag := range rest {
		wg.Go(func() { leaseREST(ctx, a, ag, leasePeriod, &restLast[i]) })
	}
	last := map[string]*atomic.Int64{}
	for _, lc := range gw {
		last[lc.a.Handle] = &lc.lastAcked
	}
	for i, ag := range rest {
		last[ag.Handle] = &restLast[i]
	}
	for h := range last {
		waitFor(t, h+" online on B", func() bool { return state(b, h) == "online" })
	}
	// A few more seconds of heartbeats, past the presence timeout, so no
	// agent's first (stored at once) heartbeat is its last.
	for _, lc := range gw {
		n0 := lc.acks[0].Load()
		waitFor(t, lc.a.Handle+": 8 more heartbeats acknowledged", func() bool { return lc.acks[0].Load() >= n0+8 })
	}

	cancel()
	wg.Wait()
	a.Kill(t)
	killed := time.Now()
	t.Logf("A killed %s after the clients stopped", killed.Sub(time.Unix(0, maxLast(last))).Round(time.Millisecond))

	bound := 3*time.Second + 2*time.Second + leaseSlack
	for h, at := range last {
		ev, ok := evB.Within(wait, liveness(h, "offline"))
		if !ok {
			t.Fatalf("B never published %s offline (B logged %v)", h, b.offlineLogged())
		}
		lag := ev.Read.Sub(time.Unix(0, at.Load()))
		t.Logf("%s: offline on B %s after its last heartbeat (%s after the kill)", h, lag.Round(time.Millisecond), ev.Read.Sub(killed).Round(time.Millisecond))
		if lag < 3*time.Second {
			t.Errorf("%s published offline %s after its last heartbeat: before the presence timeout (3 s), a false offline", h, lag.Round(time.Millisecond))
		}
		if lag > bound {
			t.Errorf("%s published offline %s after its last heartbeat, want ≤ %s (timeout 3 s + 2 s + slack %s)", h, lag.Round(time.Millisecond), bound, leaseSlack)
		}
		if st := state(b, h); st != "offline" {
			t.Errorf("%s on B after its offline event: %s", h, st)
		}
	}
	fence(t, b, evB, "fence", "out") // every event B published before is read
	for h := range last {
		if n := evB.Count(liveness(h, "offline")); n != 1 {
			t.Errorf("%s published offline %d times, want exactly 1", h, n)
		}
	}
}

// TestFaultOwnerLeaseReconnect: 4 gateway agents heartbeat to A every
// 500 ms; A is killed with SIGKILL and the clients reconnect to B (100 ms
// backoff, as gatewayAgent) well within the 3 s timeout. B publishes no
// offline, during the take-over nor after it (until each client has 12
// heartbeats acknowledged by B, 6 s: past timeout + 2 s).
func TestFaultOwnerLeaseReconnect(t *testing.T) {
	a, b, evB, gw := startLeasePair(t, 2, "lease-move0", "lease-move1", "lease-move2", "lease-move3")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, lc := range gw {
		wg.Go(func() { lc.run(ctx, []*server{a, b}, leasePeriod) })
	}
	for _, lc := range gw {
		waitFor(t, lc.a.Handle+" online on B", func() bool { return state(b, lc.a.Handle) == "online" })
		n0 := lc.acks[0].Load()
		waitFor(t, lc.a.Handle+": 8 more heartbeats acknowledged by A", func() bool { return lc.acks[0].Load() >= n0+8 })
	}

	a.Kill(t)
	killed := time.Now()
	for _, lc := range gw {
		waitFor(t, lc.a.Handle+": 12 heartbeats acknowledged by B", func() bool { return lc.acks[1].Load() >= 12 })
	}
	t.Logf("12 heartbeats on B for every client %s after the kill", time.Since(killed).Round(time.Millisecond))
	fence(t, b, evB, "fence", "out")
	for _, lc := range gw {
		if n := evB.Count(liveness(lc.a.Handle, "offline")); n != 0 {
			t.Errorf("%s published offline %d times though it reconnected to B within the timeout (B logged %v)", lc.a.Handle, n, b.offlineLogged())
		}
		if st := state(b, lc.a.Handle); st != "online" {
			t.Errorf("%s on B: %s, want online", lc.a.Handle, st)
		}
	}
}

// leasePeriod is how often the owner-lease tests' clients heartbeat.
const leasePeriod = 500 * time.Millisecond

// startLeasePair starts A and B on a fresh database, both listening, vends
// the fence agent on B and subscribes to B's events, and makes a lease
// client per handle, its agent vended on A, counting the acknowledgements
// of servers servers.
func startLeasePair(t *testing.T, servers int, handles ...string) (a, b *server, evB *events, gw []*leaseClient) {
	t.Helper()
	c := sharedCluster(t)
	a, b, _ = startPair(t, c, nil)
	waitListening(t, c, a, b)
	vend(t, b, "fence")
	evB = subscribe(t, b)
	for _, h := range handles {
		gw = append(gw, newLeaseClient(vend(t, a, h), servers))
	}
	return a, b, evB, gw
}

func maxLast(last map[string]*atomic.Int64) int64 {
	var m int64
	for _, v := range last {
		m = max(m, v.Load())
	}
	return m
}
