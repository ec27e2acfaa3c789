package connhub_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/connhub"
)

// fakeConn is a connection of one transport; Close records the reason and,
// like the real transports, unregisters the connection.
type fakeConn struct {
	transport, name, agent, cred string
	hub                          *connhub.Hub

	mu      sync.Mutex
	reasons []string
}

func (c *fakeConn) AgentID() string      { return c.agent }
func (c *fakeConn) CredentialID() string { return c.cred }
func (c *fakeConn) Close(reason string) {
	c.mu.Lock()
	c.reasons = append(c.reasons, reason)
	c.mu.Unlock()
	c.hub.Unregister(c)
}

func (c *fakeConn) closedWith() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reasons)
}

func names(cs []connhub.Conn) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.(*fakeConn).name)
	}
	sort.Strings(out)
	return out
}

// fleet registers, for agents a1 and a2, an MCP session and a gateway
// connection each; a1's gateway connection was opened with a second
// credential.
func fleet(h *connhub.Hub) map[string]*fakeConn {
	cs := map[string]*fakeConn{
		"mcp-a1": {transport: "mcp", name: "mcp-a1", agent: "a1", cred: "c1"},
		"gw-a1":  {transport: "gateway", name: "gw-a1", agent: "a1", cred: "c1b"},
		"mcp-a2": {transport: "mcp", name: "mcp-a2", agent: "a2", cred: "c2"},
		"gw-a2":  {transport: "gateway", name: "gw-a2", agent: "a2", cred: "c2"},
	}
	for _, c := range cs {
		c.hub = h
		h.Register(c)
	}
	return cs
}

func TestRegisterLookupUnregister(t *testing.T) {
	h := connhub.New(connhub.Options{})
	defer h.Close()
	cs := fleet(h)
	if got := names(h.Conns("a1")); !slices.Equal(got, []string{"gw-a1", "mcp-a1"}) {
		t.Fatalf("Conns(a1) = %v", got)
	}
	if got := h.Conns("nobody"); got != nil {
		t.Fatalf("Conns(nobody) = %v, want nil", got)
	}
	h.Register(cs["mcp-a1"]) // again: no duplicate
	if n := h.Len(); n != 4 {
		t.Fatalf("Len = %d, want 4", n)
	}
	h.Unregister(cs["gw-a1"])
	h.Unregister(cs["gw-a1"]) // again: no-op
	if got := names(h.Conns("a1")); !slices.Equal(got, []string{"mcp-a1"}) {
		t.Fatalf("Conns(a1) after unregistering gw-a1 = %v", got)
	}
	h.Unregister(cs["mcp-a1"])
	if got := h.Conns("a1"); got != nil || h.Len() != 2 {
		t.Fatalf("after unregistering a1's connections: Conns = %v, Len = %d", got, h.Len())
	}
}

// TestRevoke: revoking an agent closes its connections of both transports
// and no other agent's; revoking credentials closes only theirs.
func TestRevoke(t *testing.T) {
	h := connhub.New(connhub.Options{})
	defer h.Close()
	cs := fleet(h)
	h.Revoke("a1", []string{"c1b"}) // a rotation of a1's second credential
	if got := cs["gw-a1"].closedWith(); !slices.Equal(got, []string{connhub.ReasonCredentialRevoked}) {
		t.Fatalf("gw-a1 closed with %v", got)
	}
	if got := cs["mcp-a1"].closedWith(); got != nil {
		t.Fatalf("mcp-a1 (other credential) closed with %v", got)
	}
	h.Revoke("a2", nil) // a2 revoked or deactivated
	for _, n := range []string{"mcp-a2", "gw-a2"} {
		if got := cs[n].closedWith(); !slices.Equal(got, []string{connhub.ReasonAgentRevoked}) {
			t.Fatalf("%s closed with %v", n, got)
		}
	}
	if got := names(h.Conns("a1")); !slices.Equal(got, []string{"mcp-a1"}) || h.Len() != 1 {
		t.Fatalf("left: a1 %v, Len %d; want [mcp-a1], 1", got, h.Len())
	}
}

// TestBusSignal: the hub's one subscription to bus.ChannelAgentSessions
// closes the agent's connections of both transports.
func TestBusSignal(t *testing.T) {
	b := bus.NewLocal()
	h := connhub.New(connhub.Options{Bus: b})
	cs := fleet(h)
	if err := bus.Send(context.Background(), b, bus.AgentSessions{AgentID: "a1"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"mcp-a1", "gw-a1"} {
		if got := cs[n].closedWith(); !slices.Equal(got, []string{connhub.ReasonAgentRevoked}) {
			t.Fatalf("%s closed with %v", n, got)
		}
	}
	if err := bus.Send(context.Background(), b, bus.AgentSessions{AgentID: "a2", Credentials: []string{"c2"}}); err != nil {
		t.Fatal(err)
	}
	if got := cs["gw-a2"].closedWith(); !slices.Equal(got, []string{connhub.ReasonCredentialRevoked}) {
		t.Fatalf("gw-a2 closed with %v", got)
	}
	// After Close the hub no longer listens.
	h.Close()
	other := &fakeConn{name: "late", agent: "a3", cred: "c3", hub: h}
	h.Register(other)
	if err := bus.Send(context.Background(), b, bus.AgentSessions{AgentID: "a3"}); err != nil {
		t.Fatal(err)
	}
	if got := other.closedWith(); got != nil {
		t.Fatalf("closed after the hub was closed: %v", got)
	}
}

// checker is a fake NoLongerValid port: the credentials in dead no longer
// authenticate; calls records each byCred it was given.
type checker struct {
	mu    sync.Mutex
	dead  map[string]bool
	err   error
	calls []map[string][]string
	ran   chan struct{}
}

func (k *checker) check(byCred map[string][]connhub.Conn) ([]connhub.Conn, error) {
	k.mu.Lock()
	defer func() {
		k.mu.Unlock()
		if k.ran != nil {
			k.ran <- struct{}{}
		}
	}()
	call := map[string][]string{}
	for id, cs := range byCred {
		call[id] = names(cs)
	}
	k.calls = append(k.calls, call)
	if k.err != nil {
		return nil, k.err
	}
	var out []connhub.Conn
	for id, cs := range byCred {
		if k.dead[id] {
			out = append(out, cs...)
		}
	}
	return out, nil
}

// TestRecheck: one port call covers every connection of both transports,
// grouped by credential; the connections it names are closed with
// ReasonNoLongerValid; a failing port closes nothing.
func TestRecheck(t *testing.T) {
	k := &checker{dead: map[string]bool{"c2": true}}
	h := connhub.New(connhub.Options{NoLongerValid: k.check, Recheck: -1})
	defer h.Close()
	cs := fleet(h)
	n, err := h.Recheck()
	if err != nil || n != 2 {
		t.Fatalf("Recheck = %d, %v; want 2, nil", n, err)
	}
	want := map[string][]string{"c1": {"mcp-a1"}, "c1b": {"gw-a1"}, "c2": {"gw-a2", "mcp-a2"}}
	if len(k.calls) != 1 || fmt.Sprint(k.calls[0]) != fmt.Sprint(want) {
		t.Fatalf("port calls = %v, want one with %v", k.calls, want)
	}
	for _, n := range []string{"mcp-a2", "gw-a2"} {
		if got := cs[n].closedWith(); !slices.Equal(got, []string{connhub.ReasonNoLongerValid}) {
			t.Fatalf("%s closed with %v", n, got)
		}
	}
	k.err, k.dead["c1"] = errors.New("store unreachable"), true
	if n, err := h.Recheck(); n != 0 || err == nil {
		t.Fatalf("Recheck with the store down = %d, %v; want 0 and the error", n, err)
	}
	if got := cs["mcp-a1"].closedWith(); got != nil || h.Len() != 2 {
		t.Fatalf("with the store down: mcp-a1 closed with %v, Len %d", got, h.Len())
	}
}

// TestRecheckLoop: the loop runs one re-check per period on the injected
// clock and stops at Close.
func TestRecheckLoop(t *testing.T) {
	clock := clockwork.NewFakeClock()
	k := &checker{dead: map[string]bool{"c1b": true}, ran: make(chan struct{}, 1)}
	h := connhub.New(connhub.Options{NoLongerValid: k.check, Clock: clock})
	cs := fleet(h)
	clock.Advance(connhub.DefaultRecheck - time.Millisecond)
	select {
	case <-k.ran:
		t.Fatal("re-checked before the period")
	default:
	}
	clock.Advance(time.Millisecond)
	select {
	case <-k.ran:
	case <-time.After(10 * time.Second):
		t.Fatal("no re-check after one period")
	}
	// The port answered; the loop closes what it named right after.
	deadline := time.Now().Add(10 * time.Second)
	for got := cs["gw-a1"].closedWith(); !slices.Equal(got, []string{connhub.ReasonNoLongerValid}); got = cs["gw-a1"].closedWith() {
		if time.Now().After(deadline) {
			t.Fatalf("gw-a1 closed with %v", got)
		}
		time.Sleep(time.Millisecond) // polling an observable state
	}
	h.Close()
	clock.Advance(connhub.DefaultRecheck)
	select {
	case <-k.ran:
		t.Fatal("re-checked after Close")
	default:
	}
}

// TestDefaultRecheck: the hub's default period is the use cases'
// RecheckInterval (design: Revocation within 5 s).
func TestDefaultRecheck(t *testing.T) {
	if connhub.DefaultRecheck != app.RecheckInterval {
		t.Fatalf("DefaultRecheck = %v, app.RecheckInterval = %v", connhub.DefaultRecheck, app.RecheckInterval)
	}
}

// TestConcurrent: registrations, unregistrations, lookups, revocations and
// re-checks from many goroutines (run with -race); afterwards exactly the
// connections neither unregistered nor closed are left.
func TestConcurrent(t *testing.T) {
	k := &checker{dead: map[string]bool{"dead": true}}
	h := connhub.New(connhub.Options{NoLongerValid: k.check, Recheck: -1})
	defer h.Close()
	const workers, each = 8, 200
	var wg sync.WaitGroup
	kept := make([][]*fakeConn, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := fmt.Sprintf("a%d", w%3)
			for i := range each {
				cred := "live"
				if i%5 == 0 {
					cred = "dead"
				}
				c := &fakeConn{name: fmt.Sprintf("%d-%d", w, i), agent: agent, cred: cred, hub: h}
				h.Register(c)
				switch {
				case i%2 == 1:
					h.Unregister(c)
				case cred == "live":
					kept[w] = append(kept[w], c)
				}
				_ = h.Conns(agent)
				if i%50 == 0 {
					h.Revoke("nobody", nil)
					if _, err := h.Recheck(); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if _, err := h.Recheck(); err != nil { // the dead ones registered last
		t.Fatal(err)
	}
	want := 0
	for _, cs := range kept {
		for _, c := range cs {
			if c.closedWith() != nil {
				t.Fatalf("%s (live) closed with %v", c.name, c.closedWith())
			}
		}
		want += len(cs)
	}
	if n := h.Len(); n != want {
		t.Fatalf("Len = %d, want %d", n, want)
	}
}
