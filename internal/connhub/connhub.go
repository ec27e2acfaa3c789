// Package connhub is this instance's connection hub: the open agent
// connections of every transport — MCP sessions (internal/mcpserver) and
// gateway WebSocket connections (internal/gateway) — each registered under
// its agent and the credential it was opened with (design: Connection hub).
//
// The hub holds what the transports share, once: the per-agent index, the
// revocation of an agent's connections (all of them, or those of given
// credentials), the periodic credential re-check — one store query for every
// connection of the instance each Options.Recheck (2 s) — and the one bus
// subscription to bus.ChannelAgentSessions (revoke, rotate, deactivate). So a
// revocation closes the agent's MCP sessions and gateway connections alike,
// at once where the signal arrives and within one re-check period where it
// was lost (design: Revocation within 5 s).
//
// A transport's connection is a Conn: the hub closes it with the transport's
// own close (an MCP session is forgotten and its streams end; a gateway
// connection closes with 4004). What is the transport's alone — MCP session
// reservation, eviction, streams, doorbell delivery; gateway frames and
// deadlines — stays in the transport.
//
//	h := connhub.New(connhub.Options{Bus: b, NoLongerValid: check})
//	defer h.Close()
//	h.Register(c)         // once c's agent and credential are known
//	defer h.Unregister(c) // when c has closed
package connhub

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// DefaultRecheck is the period of the credential re-check when
// Options.Recheck is 0; it equals app.RecheckInterval.
const DefaultRecheck = 2 * time.Second

// Reasons passed to Conn.Close.
const (
	// ReasonAgentRevoked: every credential of the agent (revoked or
	// deactivated agent).
	ReasonAgentRevoked = "agent revoked or deactivated"
	// ReasonCredentialRevoked: the connection's credential was revoked or
	// rotated.
	ReasonCredentialRevoked = "credential revoked"
	// ReasonNoLongerValid: the periodic re-check found the credential no
	// longer authenticating.
	ReasonNoLongerValid = "credential no longer valid"
)

// Conn is one open connection of an agent, as a transport registers it.
// AgentID and CredentialID must not change once registered.
type Conn interface {
	AgentID() string
	CredentialID() string
	// Close closes the connection with the transport's own close; reason
	// is one of the Reason constants. It is called without any lock of
	// the hub held, may be called again for a connection already closing,
	// and must not block for long (a close handshake runs off the
	// caller's goroutine). The transport unregisters the connection.
	Close(reason string)
}

// NoLongerValid is the re-check's port to the store (CheckLive builds it):
// byCred maps each credential id to the connections opened with it; it
// returns the connections whose credential no longer authenticates
// (revoked or rotated credential, revoked or deactivated agent), in one
// bounded query. On an error nothing is closed.
type NoLongerValid func(byCred map[string][]Conn) ([]Conn, error)

// Options configures a Hub.
type Options struct {
	// NoLongerValid runs the periodic re-check; nil = no re-check.
	NoLongerValid NoLongerValid
	// Recheck is the re-check period; 0 = DefaultRecheck, negative
	// disables the re-check.
	Recheck time.Duration
	// Bus delivers bus.ChannelAgentSessions: Revoke runs for each signal.
	// nil = not subscribed.
	Bus bus.Bus
	// Clock drives the re-check; nil = the real clock.
	Clock clockwork.Clock
	// Log receives re-check failures; nil = slog.Default().
	Log *slog.Logger
}

// Hub is the connection hub of one instance. Safe for concurrent use.
type Hub struct {
	log *slog.Logger
	nlv NoLongerValid

	mu      sync.RWMutex
	byAgent map[string]map[Conn]struct{}

	unsubscribe func()
	stop        chan struct{}
	done        chan struct{} // closed when the re-check loop has ended
	closeOnce   sync.Once
}

// New returns a Hub. With Options.NoLongerValid and a positive period it
// starts the re-check loop (its ticker exists when New returns); with
// Options.Bus it subscribes to bus.ChannelAgentSessions. Close stops both.
func New(o Options) *Hub {
	workgroup.Defaults(&o.Clock, &o.Log)
	if o.Recheck == 0 {
		o.Recheck = DefaultRecheck
	}
	h := &Hub{log: o.Log, nlv: o.NoLongerValid, byAgent: map[string]map[Conn]struct{}{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if o.Bus != nil {
		h.unsubscribe = bus.Listen(o.Bus, h.onAgentSessions, nil)
	}
	if o.NoLongerValid != nil && o.Recheck > 0 {
		go h.recheckLoop(o.Clock.NewTicker(o.Recheck))
	} else {
		close(h.done)
	}
	return h
}

// Close unsubscribes from the bus and stops the re-check loop, waiting for
// a re-check under way. It closes no connection (each transport closes its
// own at shutdown). Idempotent.
func (h *Hub) Close() {
	h.closeOnce.Do(func() {
		if h.unsubscribe != nil {
			h.unsubscribe()
		}
		close(h.stop)
	})
	<-h.done
}

// Register adds c under c.AgentID(). Registering c again is a no-op.
func (h *Hub) Register(c Conn) {
	id := c.AgentID()
	h.mu.Lock()
	m := h.byAgent[id]
	if m == nil {
		m = map[Conn]struct{}{}
		h.byAgent[id] = m
	}
	m[c] = struct{}{}
	h.mu.Unlock()
}

// Unregister removes c; a c not registered is a no-op.
func (h *Hub) Unregister(c Conn) {
	id := c.AgentID()
	h.mu.Lock()
	if m := h.byAgent[id]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(h.byAgent, id)
		}
	}
	h.mu.Unlock()
}

// Conns returns the agent's registered connections, of every transport, in
// no particular order (a new slice; nil when none).
func (h *Hub) Conns(agentID string) []Conn {
	h.mu.RLock()
	defer h.mu.RUnlock()
	m := h.byAgent[agentID]
	if len(m) == 0 {
		return nil
	}
	out := make([]Conn, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	return out
}

// Len returns how many connections are registered.
func (h *Hub) Len() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	n := 0
	for _, m := range h.byAgent {
		n += len(m)
	}
	return n
}

// Revoke closes the agent's connections on this instance: all of them
// (ReasonAgentRevoked) when creds is nil, otherwise those opened with one
// of the credential ids (ReasonCredentialRevoked). Each Close runs on the
// caller's goroutine before Revoke returns. It is what a
// bus.AgentSessions signal does on every instance.
func (h *Hub) Revoke(agentID string, creds []string) {
	reason := ReasonAgentRevoked
	if creds != nil {
		reason = ReasonCredentialRevoked
	}
	for _, c := range h.Conns(agentID) {
		if creds == nil || slices.Contains(creds, c.CredentialID()) {
			c.Close(reason)
		}
	}
}

func (h *Hub) onAgentSessions(sig bus.AgentSessions) { h.Revoke(sig.AgentID, sig.Credentials) }

// Recheck runs one re-check now: one NoLongerValid call for every
// registered connection, then Close(ReasonNoLongerValid) for those it
// returns. It returns how many it closed; on the port's error it closes
// none and returns the error (the connections stay until a check can
// tell). Without a NoLongerValid port it does nothing.
func (h *Hub) Recheck() (int, error) {
	if h.nlv == nil {
		return 0, nil
	}
	byCred := map[string][]Conn{}
	h.mu.RLock()
	for _, m := range h.byAgent {
		for c := range m {
			id := c.CredentialID()
			byCred[id] = append(byCred[id], c)
		}
	}
	h.mu.RUnlock()
	if len(byCred) == 0 {
		return 0, nil
	}
	dead, err := h.nlv(byCred)
	if err != nil {
		return 0, err
	}
	for _, c := range dead {
		c.Close(ReasonNoLongerValid)
	}
	return len(dead), nil
}

// CheckLive builds the NoLongerValid port from one store query (the use
// case's LiveCredentials, bounded by 10 s): live reports which of the
// credential ids still authenticate (credential unrevoked, agent active and
// unrevoked), and the holders of the others are returned for closing. A
// store error returns it and nothing to close: the holders stay until a
// check can tell.
func CheckLive(live func(ctx context.Context, ids []string) (map[string]bool, error)) NoLongerValid {
	return func(byCred map[string][]Conn) ([]Conn, error) {
		if len(byCred) == 0 {
			return nil, nil
		}
		ids := make([]string, 0, len(byCred))
		for id := range byCred {
			ids = append(ids, id)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, err := live(ctx, ids)
		if err != nil {
			return nil, err
		}
		var dead []Conn
		for id, held := range byCred {
			if !ok[id] {
				dead = append(dead, held...)
			}
		}
		return dead, nil
	}
}

// recheckLoop runs Recheck every period until Close (design: Revocation
// within 5 s).
func (h *Hub) recheckLoop(t clockwork.Ticker) {
	defer close(h.done)
	defer t.Stop()
	workgroup.Every(h.stop, t.Chan(), func() {
		if _, err := h.Recheck(); err != nil {
			h.log.Warn("re-checking connection credentials failed; connections kept until the next check", "err", err)
		}
	})
}
