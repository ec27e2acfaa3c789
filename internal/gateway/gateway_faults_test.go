package gateway_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/gateway"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/testkit"
)

// Faults of the server, not of the agents (design: Liveness first, Stall extension): a slow
// agent part and a stall of the process never close a connection whose
// heartbeats keep coming with 4009, and never make its agent offline.

// faultCfg: the load figures — heartbeat interval 1 s (gateway
// deadline 2 s), presence timeout 3 s.
var faultCfg = app.LivenessConfig{HeartbeatInterval: time.Second, PresenceTimeout: 3 * time.Second, PersistInterval: time.Minute}

// gatedStore holds every ApplyReportedChanges (the audited reports) until
// the test opens the gate: a store that is slow under load.
type gatedStore struct {
	store.Store
	once sync.Once
	gate chan struct{}
	hit  chan struct{} // closed at the first call
}

func (g *gatedStore) ApplyReportedChanges(ctx context.Context, ps []store.ApplyReportedChangeParams) ([]bool, error) {
	g.once.Do(func() { close(g.hit) })
	<-g.gate
	return g.Store.ApplyReportedChanges(ctx, ps)
}

func newFaultEnv(t *testing.T, cfg app.LivenessConfig, wrap func(store.Store) store.Store) *env {
	t.Helper()
	e := buildEnv(t, cfg, wrap)
	if err := e.svc.StartLiveness(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.svc.StopLiveness(context.Background()) })
	return e
}

// identified dials and identifies (interval 1 s: not ready()'s 15 s).
func (e *env) identified() *client {
	e.t.Helper()
	cl := e.open()
	if f := cl.read(); f.Op != "hello" {
		e.t.Fatalf("first frame %s", f.Op)
	}
	cl.send(`{"op":"identify","d":{"token":"` + e.cred + `"}}`)
	if f := cl.read(); f.Op != "ready" {
		e.t.Fatalf("after identify: %s %s", f.Op, f.D)
	}
	return cl
}

// beat sends a heartbeat with member agent and reads its ack.
func (c *client) beat(agent string) {
	c.t.Helper()
	c.send(`{"op":"heartbeat","d":{"agent":` + agent + `}}`)
	if f := c.read(); f.Op != "heartbeat_ack" {
		c.t.Fatalf("frame = %s %s, want heartbeat_ack (the connection must stay open)", f.Op, f.D)
	}
}

func (e *env) state() string {
	e.t.Helper()
	st, err := e.svc.AgentStatus(e.t.Context(), e.admin, e.agent.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.State
}

func (e *env) waitState(want string) {
	e.t.Helper()
	deadline := time.Now().Add(testkit.Wait)
	for e.state() != want {
		if time.Now().After(deadline) {
			e.t.Fatalf("state %s, want %s within %s", e.state(), want, testkit.Wait)
		}
		time.Sleep(time.Millisecond)
	}
}

// busyWorker opens an identified connection of an online agent whose
// worker then waits in the store on an audited billing change (to "api"),
// until the test closes gs.gate.
func busyWorker(t *testing.T) (*env, *client, *gatedStore) {
	t.Helper()
	gs := &gatedStore{gate: make(chan struct{}), hit: make(chan struct{})}
	e := newFaultEnv(t, faultCfg, func(s store.Store) store.Store { gs.Store = s; return gs })
	close(gs.gate) // the first report goes through
	c := e.identified()
	c.beat(`{"state":"online","billing_mode":"subscription"}`)
	e.waitState("online")
	gs.gate, gs.hit, gs.once = make(chan struct{}), make(chan struct{}), sync.Once{}
	c.beat(`{"state":"online","billing_mode":"api"}`) // audited: waits for the gate
	<-gs.hit
	return e, c, gs
}

// TestSlowAgentPartKeepsReading: the audited part of a heartbeat (a billing
// change) waits for a slow store for longer than the gateway deadline (2 s)
// and the presence timeout (3 s). The read loop keeps reading and acking
// the heartbeats that follow, the connection is not closed with 4009 and
// the agent is not published offline; once the store answers, the change
// is applied. On the old code the agent part ran on the read
// loop: no ack came while the store was slow.
func TestSlowAgentPartKeepsReading(t *testing.T) {
	e, c, gs := busyWorker(t)
	for i := range 40 { // 10 s of heartbeats every 250 ms, far past both deadlines
		e.clock.Advance(250 * time.Millisecond)
		c.beat(`{"state":"online","billing_mode":"api"}`)
		if st := e.state(); st != "online" {
			t.Fatalf("after %d ms with the store slow: %s, want online", (i+1)*250, st)
		}
	}
	close(gs.gate)
	deadline := time.Now().Add(testkit.Wait)
	for {
		st, err := e.svc.AgentStatus(t.Context(), e.admin, e.agent.ID)
		if err != nil {
			t.Fatal(err)
		}
		if deref(st.ReportedBillingMode) == "api" && st.State == "online" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after the store answered: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	c.beat(`{"state":"online","billing_mode":"api"}`)
}

// TestStallKeepsConnections: the process could not run for 5 s (the fake
// clock jumps while the gateway's deadline, 2 s, and the agent's, 3 s, are
// due); the heartbeat that waited on the socket is read just after. With
// the stall detector on, the connection is not closed with 4009 and the
// agent stays online. On the old code: 4009.
func TestStallKeepsConnections(t *testing.T) {
	cfg := faultCfg
	cfg.StallThreshold = time.Second
	e := newFaultEnv(t, cfg, nil)
	c := e.identified()
	const hb = `{"state":"online"}`
	c.beat(hb)
	e.waitState("online")
	settle := func() {
		ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
		defer cancel()
		// The flush loop, the stall detector, the agent's deadline and the
		// connection's deadline.
		if err := e.clock.BlockUntilContext(ctx, 4); err != nil {
			t.Fatalf("timers did not settle: %v", err)
		}
	}
	settle()
	for i := range 20 {
		e.clock.Advance(250 * time.Millisecond)
		settle()
		if i%4 == 3 {
			c.beat(hb)
		}
	}
	e.clock.Advance(5 * time.Second) // the stall
	settle()
	c.beat(hb) // queued on the socket during the stall: acked, not 4009
	for i := range 8 {
		e.clock.Advance(250 * time.Millisecond)
		settle()
		if i%4 == 3 {
			c.beat(hb)
		}
	}
	if st := e.state(); st != "online" {
		t.Fatalf("after the stall: %s, want online", st)
	}
	if n := e.gw.Connections(); n != 1 {
		t.Fatalf("connections after the stall = %d, want 1", n)
	}
}

// TestSlowFirstReport: the agent's first report (an audited write) waits
// for a slow store for 5 s while its heartbeats keep coming every 250 ms;
// they replace each other behind it. Once the store answers the agent is
// online and never published offline: a heartbeat that replaced a waiting
// one was not preceded by silence. (Under load, before the arrival chain,
// every such agent was published offline and online again.)
func TestSlowFirstReport(t *testing.T) {
	gs := &gatedStore{gate: make(chan struct{}), hit: make(chan struct{})}
	e := newFaultEnv(t, faultCfg, func(s store.Store) store.Store { gs.Store = s; return gs })
	sub, err := e.svc.SubscribeEvents(e.admin.ID, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	c := e.identified()
	const hb = `{"state":"online","billing_mode":"subscription"}`
	c.beat(hb)
	<-gs.hit
	for range 20 {
		e.clock.Advance(250 * time.Millisecond)
		c.beat(hb)
	}
	close(gs.gate)
	e.waitState("online")
	for range 8 {
		e.clock.Advance(250 * time.Millisecond)
		c.beat(hb)
	}
	e.waitState("online")
	// The events are published after the state changes: wait for the first
	// (an offline published before the online would come first), then take
	// whatever else is already there.
	state := func(ev events.Event) string {
		var d events.PresenceChangedData
		_ = json.Unmarshal(ev.Data, &d)
		return d.State
	}
	var states []string
	select {
	case ev := <-sub.C():
		states = append(states, state(ev))
	case <-time.After(testkit.Wait):
		t.Fatalf("no presence-changed event within %s, want [online]", testkit.Wait)
	}
	for drained := false; !drained; {
		select {
		case ev := <-sub.C():
			states = append(states, state(ev))
		default:
			drained = true
		}
	}
	if len(states) != 1 || states[0] != "online" {
		t.Fatalf("published %v, want exactly [online]", states)
	}
}

// TestBadFrameBehindBusyWorker: while the connection's worker waits for a
// slow store (an audited billing change), a heartbeat whose member agent is
// invalid arrives, followed at once by a good one that takes its place in
// the worker's slot. The bad one is still answered, with error
// {op: "heartbeat"} right after its ack, and counted: bad frames in a row
// still close the connection with 1008 while the worker waits. On the old
// code the bad body waited in the slot, was replaced unread, and was never
// answered nor counted.
func TestBadFrameBehindBusyWorker(t *testing.T) {
	_, c, gs := busyWorker(t)
	defer close(gs.gate)
	const bad = `{"op":"heartbeat","d":{"agent":{"state":"degraded"}}}`
	c.send(bad)
	c.send(`{"op":"heartbeat","d":{"agent":{"state":"online","billing_mode":"api"}}}`)
	want := []string{"heartbeat_ack", "error", "heartbeat_ack"}
	for i, op := range want {
		f := c.read()
		if f.Op != op {
			t.Fatalf("frame %d = %s %s, want %s (frames %v)", i, f.Op, f.D, op, want)
		}
		if op == "error" {
			var d struct{ Op, Code, Pointer string }
			_ = json.Unmarshal(f.D, &d)
			if d.Op != "heartbeat" || d.Code != "invalid_argument" || d.Pointer != "/agent/state" {
				t.Fatalf("error frame %s, want op heartbeat, invalid_argument at /agent/state", f.D)
			}
		}
	}
	for i := range gateway.DefaultMaxBadFrames {
		c.send(bad)
		if f := c.read(); f.Op != "heartbeat_ack" {
			t.Fatalf("bad frame %d: %s %s, want heartbeat_ack first", i+1, f.Op, f.D)
		}
		if f := c.read(); f.Op != "error" {
			t.Fatalf("bad frame %d: %s %s, want its error frame", i+1, f.Op, f.D)
		}
	}
	if code := c.closed(); code != websocket.StatusPolicyViolation {
		t.Fatalf("after %d bad frames in a row: close %d, want 1008", gateway.DefaultMaxBadFrames, code)
	}
}
