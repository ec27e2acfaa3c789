// Package bus defines the bus port for cross-instance signals, its channels
// and its in-process adapter, Local (one instance: SQLite). The PostgreSQL
// adapter (LISTEN/NOTIFY) lives in bus/pgbus. Delivery is at-most-once: a
// missed signal costs at most an extra ring or a late digest; the periodic
// evaluator, the sweep and the re-check are the net (design: Bus delivery).
package bus

import (
	"context"
	"sync"
)

// Channels used by Rollcall. Payloads are short strings (PostgreSQL NOTIFY
// limits them to 8000 bytes), encoded and decoded by the signal types of
// signal.go.
const (
	// ChannelTodoReady carries a JSON domain.TodoReady after a todo commit.
	ChannelTodoReady = "rollcall_todo_ready"
	// ChannelAgentSessions carries "<agent_id>" (close every session of the
	// agent) or "<agent_id>:<credential_id>,…" (close the sessions bound to
	// those credentials) after a revoke or a credential rotation.
	ChannelAgentSessions = "rollcall_agent_sessions"
	// ChannelPresence carries "<agent_id>:<cause>[:<origin>[:<config>]]"
	// after a write that may change an agent's presence (override, shift,
	// readiness, vend, update); see Presence.
	ChannelPresence = "rollcall_presence"
	// ChannelPresenceTransition carries "<agent_id>:<in|out>:<reason>" from
	// the one instance that claimed a transition (design: Transition claim).
	ChannelPresenceTransition = "rollcall_presence_transition"
	// ChannelLiveness carries heartbeat ownership across instances
	// (design: Deadline ownership): claims
	// "<agent_id>:<instance_id>:<unix_micro>" (the claimer's heartbeat time;
	// several claims are joined by newlines) and sync requests
	// "?:<instance_id>" sent by a starting instance, which every owner answers
	// with claims.
	ChannelLiveness = "rollcall_liveness"
	// ChannelEvents carries one JSON event (events.Hub wire form) for the SSE
	// event hubs of every instance (GET /v1/events).
	ChannelEvents = "rollcall_events"
	// ChannelTeam carries person and token changes that end open streams and
	// sessions on every instance (design: Revocation within 5 s):
	// "token:<token_id>", "person:<person_id>" (deactivated) and
	// "owner:<agent_id>:<owner_id>:<handle>" (an agent handed over).
	ChannelTeam = "rollcall_team"
)

// Channels lists every channel, for adapters that LISTEN up front.
var Channels = []string{ChannelTodoReady, ChannelAgentSessions, ChannelPresence, ChannelPresenceTransition, ChannelLiveness, ChannelEvents, ChannelTeam}

// Handler receives one payload. Handlers run on the bus's delivery
// goroutine and must not block for long.
type Handler func(payload string)

// Bus publishes signals to every instance, including the publisher's own.
type Bus interface {
	// Publish sends payload on channel to every subscriber of every instance.
	Publish(ctx context.Context, channel, payload string) error
	// Subscribe registers fn for channel until the returned func is called.
	Subscribe(channel string, fn Handler) (unsubscribe func())
	// Close stops delivery.
	Close() error
}

// Queuer is a Bus that can queue a payload and return before it is sent,
// in order with its Publish calls; failed, if not nil, is called with the
// error when it could not be sent.
type Queuer interface {
	Enqueue(channel, payload string, failed func(error))
}

// Local is the in-process bus for a single instance (the SQLite default).
// Publish delivers synchronously to the subscribers of this process.
type Local struct {
	mu   sync.RWMutex
	next int
	subs map[string]map[int]Handler
}

// NewLocal returns an empty in-process bus.
func NewLocal() *Local { return &Local{subs: map[string]map[int]Handler{}} }

// Publish calls every handler of channel in this process, synchronously.
func (l *Local) Publish(_ context.Context, channel, payload string) error {
	l.mu.RLock()
	hs := make([]Handler, 0, len(l.subs[channel]))
	for _, h := range l.subs[channel] {
		hs = append(hs, h)
	}
	l.mu.RUnlock()
	for _, h := range hs {
		h(payload)
	}
	return nil
}

// Subscribe registers fn for channel.
func (l *Local) Subscribe(channel string, fn Handler) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	id := l.next
	if l.subs[channel] == nil {
		l.subs[channel] = map[int]Handler{}
	}
	l.subs[channel][id] = fn
	return func() {
		l.mu.Lock()
		delete(l.subs[channel], id)
		l.mu.Unlock()
	}
}

// Close is a no-op for the in-process bus.
func (l *Local) Close() error { return nil }
