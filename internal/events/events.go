// Package events holds the operator event hub of one instance: the event
// stream of GET /v1/events and the console (agent.presence_changed from the
// liveness tracker, agent.presence_transition from the presence evaluator,
// agent.todos_changed from the todo use cases),
// broadcast over the bus to the hubs of every instance, kept in a ring for
// Last-Event-ID resumption and fanned out to each person's subscribers
// filtered to their own agents (design: Operator event stream).
package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// Event kinds of the operator event stream.
const (
	// KindPresenceChanged: the liveness pair (state, reported_billing_mode)
	// of an agent changed (design: Presence-changed events). Data:
	// PresenceChangedData.
	KindPresenceChanged = "agent.presence_changed"
	// KindPresenceTransition: an agent's in/out presence changed (design:
	// Operator event stream). Data: PresenceTransitionData.
	KindPresenceTransition = "agent.presence_transition"
	// KindTodosChanged: an agent's todos changed (pushed, claimed,
	// completed, failed, a lease reaped), so its counts may have: re-read
	// them. Coalesced per agent (TodosWindow; design: Operator event
	// stream). Data: TodosChangedData.
	KindTodosChanged = "agent.todos_changed"
	// KindStreamMissed is sent to a subscriber whose Last-Event-ID is no
	// longer (or never was) in the buffer: events were missed, so the client
	// should re-read the state it shows. Data: StreamMissedData.
	KindStreamMissed = "stream.missed"
)

// BufferSize is how many events every instance keeps for resumption
// with Last-Event-ID.
const BufferSize = 1024

// subscriberBuffer is how many events a slow subscriber may lag behind
// before its stream is closed (it resumes from the buffer on reconnect).
const subscriberBuffer = 256

// Event is one event of the operator stream. ID is opaque and unique (128
// random bits, so it reveals nothing about other persons' events) and
// assigned by the publishing instance; every instance
// receives every event over the bus in the same order, so an ID read from
// one instance resumes on another.
type Event struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	At      time.Time       `json:"at"`
	AgentID string          `json:"agent_id,omitempty"`
	Data    json.RawMessage `json:"data"`
	// OwnerID is the owner of AgentID: subscribers see only the events of
	// their own agents. Not part of what clients receive.
	OwnerID string `json:"-"`
}

// PresenceChangedData is the data of agent.presence_changed: the liveness
// state and the last reported billing mode (kept while offline, absent when
// not reported), with the server-clock time of the last heartbeat.
type PresenceChangedData struct {
	Agent               string     `json:"agent"` // handle
	State               string     `json:"state"`
	ReportedBillingMode *string    `json:"reported_billing_mode,omitempty"`
	LastHeartbeatAt     *time.Time `json:"last_heartbeat_at,omitempty"`
}

// PresenceTransitionData is the data of agent.presence_transition.
type PresenceTransitionData struct {
	Agent    string `json:"agent"`    // handle
	Presence string `json:"presence"` // "in" or "out"
	Reason   string `json:"reason"`   // the digest reason (design: Digest on return)
}

// TodosChangedData is the data of agent.todos_changed. It carries no
// counts: the client re-reads the agent's todos (or its console card).
type TodosChangedData struct {
	Agent string `json:"agent"` // handle
}

// OwnerTTL is how long a hub trusts the owner of an agent it read from
// the store or learnt from a hand-over signal: an event published later
// reads the owner again, so an event written more than OwnerTTL after a
// hand-over commits goes to the new owner's streams on every instance even
// when the hand-over's bus signal was lost (design: Operator event stream;
// inside the 5 s of Revocation within 5 s).
const OwnerTTL = 2 * time.Second

// TodosWindow is the coalescing window of agent.todos_changed: each
// instance publishes it at most once per window per agent, the first change
// at once and the changes within the window as one more event at its end,
// so a burst of 1 000 pushes costs two events, and the last one follows the
// last change.
const TodosWindow = 250 * time.Millisecond

// StreamMissedData is the data of stream.missed.
type StreamMissedData struct {
	LastEventID string `json:"last_event_id"`
	// Buffer is how many events the server keeps for resumption.
	Buffer int `json:"buffer"`
}

// AgentReader is the part of the store the hub reads: an agent's owner and
// handle, for events whose publisher does not know them.
type AgentReader interface {
	GetAgent(ctx context.Context, ref store.AgentRef) (domain.Agent, error)
}

// Options are the ports a Hub is built from.
type Options struct {
	// Store is where owners are read (nil: none is, and an event carries
	// the owner its publisher gives or the last SetOwner recorded).
	Store AgentReader
	Bus   bus.Bus
	Clock clockwork.Clock // nil = real clock
	Log   *slog.Logger    // nil = slog.Default()
}

// Hub is this instance's event hub: it publishes events over the bus
// (bus.ChannelEvents) so they reach the hubs of every instance, keeps the
// last BufferSize events in a ring for Last-Event-ID resumption, and
// fans them out to subscribers filtered to the subscriber's own agents.
// Safe for concurrent use.
type Hub struct {
	store AgentReader
	bus   bus.Bus
	clock clockwork.Clock
	log   *slog.Logger

	mu      sync.Mutex
	ring    [BufferSize]Event
	head    int // index of the oldest event
	n       int // events in the ring
	subs    map[*Subscription]struct{}
	lastPub map[string]liveness.PublishPair // agent id → last presence_changed pair delivered
	closed  bool

	todosMu sync.Mutex
	todos   map[string]bool // agent id → window open; true = a change is waiting for its end

	ownerMu sync.Mutex
	owners  map[string]agentIdent // agent id → owner and handle (the owner changes on a hand-over)
}

// agentIdent is an agent's owner and handle as read at readAt (this hub's
// clock, taken before the read): trusted until readAt+OwnerTTL.
type agentIdent struct {
	owner, handle string
	readAt        time.Time
}

// New builds a hub and subscribes it to bus.ChannelEvents.
func New(o Options) *Hub {
	workgroup.Defaults(&o.Clock, &o.Log)
	e := &Hub{store: o.Store, bus: o.Bus, clock: o.Clock, log: o.Log, subs: map[*Subscription]struct{}{},
		lastPub: map[string]liveness.PublishPair{}, owners: map[string]agentIdent{}, todos: map[string]bool{}}
	bus.Listen(e.bus, e.deliver, func(_ string, err error) { e.log.Warn("malformed event on the bus ignored", "err", err) })
	return e
}

// now is the clock's time in UTC, in µs like every stored time.
func (e *Hub) now() time.Time { return e.clock.Now().UTC().Truncate(time.Microsecond) }

// PresenceTransition publishes agent.presence_transition for an in/out
// transition (design: Operator event stream); the presence evaluator calls it once per
// claimed transition. The owner and handle are looked up (cached for at
// most OwnerTTL).
func (e *Hub) PresenceTransition(ctx context.Context, agentID, presence, reason string) {
	id, err := e.ident(ctx, agentID)
	if err != nil {
		e.log.Warn("presence transition event not published: agent lookup failed", "agent_id", agentID, "err", err)
		return
	}
	e.Publish(ctx, KindPresenceTransition, agentID, id.owner, PresenceTransitionData{Agent: id.handle, Presence: presence, Reason: reason})
}

// TodosChanged publishes agent.todos_changed for an agent whose todos
// changed, coalesced per agent within TodosWindow (see there); use cases
// call it after commit. The owner and handle are looked up (cached for at
// most OwnerTTL).
func (e *Hub) TodosChanged(ctx context.Context, agentID string) {
	e.todosMu.Lock()
	if _, open := e.todos[agentID]; open {
		e.todos[agentID] = true
		e.todosMu.Unlock()
		return
	}
	e.todos[agentID] = false
	e.todosMu.Unlock()
	e.publishTodos(ctx, agentID)
	e.clock.AfterFunc(TodosWindow, func() { e.todosWindowEnd(agentID) })
}

// todosWindowEnd closes an agent's window, or publishes the changes it
// collected and opens the next one.
func (e *Hub) todosWindowEnd(agentID string) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	e.todosMu.Lock()
	waiting := e.todos[agentID]
	if !waiting || closed {
		delete(e.todos, agentID)
		e.todosMu.Unlock()
		return
	}
	e.todos[agentID] = false
	e.todosMu.Unlock()
	e.publishTodos(context.Background(), agentID)
	e.clock.AfterFunc(TodosWindow, func() { e.todosWindowEnd(agentID) })
}

func (e *Hub) publishTodos(ctx context.Context, agentID string) {
	id, err := e.ident(ctx, agentID)
	if err != nil {
		e.log.Warn("todos event not published: agent lookup failed", "agent_id", agentID, "err", err)
		return
	}
	e.Publish(ctx, KindTodosChanged, agentID, id.owner, TodosChangedData{Agent: id.handle})
}

// PresenceTransitionHere delivers agent.presence_transition to this
// instance's hub only, with an ID of this instance: a transition whose
// broadcast this instance missed while its bus listener was down (the other
// instances had it). The catch-up after a lost bus listener calls it.
func (e *Hub) PresenceTransitionHere(ctx context.Context, agentID, presence, reason string) {
	id, err := e.ident(ctx, agentID)
	if err != nil {
		e.log.Warn("missed presence transition event not delivered: agent lookup failed", "agent_id", agentID, "err", err)
		return
	}
	raw, _ := json.Marshal(PresenceTransitionData{Agent: id.handle, Presence: presence, Reason: reason})
	e.deliver(bus.Event{ID: newEventID(), Kind: KindPresenceTransition, At: e.now(),
		AgentID: agentID, OwnerID: id.owner, Data: raw})
}

// Publish sends one event of kind about agentID with data (marshalled
// with encoding/json) to the hubs of every instance. The event carries the
// agent's owner as this hub reads it (cached for at most OwnerTTL, so a
// hand-over whose bus signal was lost is followed within OwnerTTL); ownerID
// is the publisher's idea of it, used only when the store cannot be read
// and nothing is cached. When the bus refuses the event, it still reaches
// this instance's subscribers.
func (e *Hub) Publish(ctx context.Context, kind, agentID, ownerID string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		e.log.Error("event not published: data does not marshal", "kind", kind, "err", err)
		return
	}
	if id, err := e.ident(ctx, agentID); err == nil {
		ownerID = id.owner // an agent handed over: its new owner
	}
	w := bus.Event{ID: newEventID(), Kind: kind, At: e.now(),
		AgentID: agentID, OwnerID: ownerID, Data: raw}
	bus.Post(e.bus, w, func(err error) {
		e.log.Warn("event not broadcast; delivered on this instance only", "kind", kind, "agent_id", agentID, "err", err)
		e.deliver(w)
	})
}

// deliver appends the event to the ring and hands it to the matching
// subscribers without blocking: a subscriber whose buffer is full is closed
// (its client reconnects with Last-Event-ID and resumes from the ring).
func (e *Hub) deliver(w bus.Event) {
	ev := Event{ID: w.ID, Kind: w.Kind, At: w.At, AgentID: w.AgentID, Data: w.Data, OwnerID: w.OwnerID}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if ev.Kind == KindPresenceChanged {
		// Several instances may publish the same change (the start rule of
		// two instances, a hand-over of ownership): consecutive equal pairs
		// of one agent are one change, delivered once.
		var d PresenceChangedData
		if json.Unmarshal(ev.Data, &d) == nil {
			pair := liveness.PublishPair{State: d.State, ReportedBillingMode: d.ReportedBillingMode}
			if last, ok := e.lastPub[ev.AgentID]; ok && last.Equal(pair) {
				return
			}
			e.lastPub[ev.AgentID] = pair
		}
	}
	if e.n == BufferSize {
		e.ring[e.head] = ev
		e.head = (e.head + 1) % BufferSize
	} else {
		e.ring[(e.head+e.n)%BufferSize] = ev
		e.n++
	}
	for sub := range e.subs {
		if sub.ownerID != ev.OwnerID {
			continue
		}
		select {
		case sub.c <- ev:
		default:
			delete(e.subs, sub)
			close(sub.c)
		}
	}
}

// LastPair returns the last agent.presence_changed pair of the agent this
// hub delivered (published by any instance): the pair a new owner of the
// agent's deadline compares with, so a change is published once across
// instances (design: Presence-changed events).
func (e *Hub) LastPair(agentID string) (liveness.PublishPair, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.lastPub[agentID]
	return p, ok
}

// Subscription is one subscriber of the hub (one SSE stream).
type Subscription struct {
	e       *Hub
	ownerID string
	tokenID string // the personal token the stream was opened with
	c       chan Event
	// Backlog holds the buffered events after the Last-Event-ID given to
	// Subscribe (the subscriber's own agents only), oldest first.
	Backlog []Event
	// Missed is true when the Last-Event-ID was not in the buffer: the
	// client missed events and should re-read state (send stream.missed).
	Missed bool
}

// C delivers the live events. It is closed when the subscriber fell too
// far behind, or when the hub closes (server shutdown).
func (s *Subscription) C() <-chan Event { return s.c }

// Close unsubscribes. Safe to call more than once.
func (s *Subscription) Close() {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if _, ok := s.e.subs[s]; ok {
		delete(s.e.subs, s)
		close(s.c)
	}
}

var errNoStore = errors.New("the hub reads no store")

// ErrClosed is returned by Subscribe after Close (server shutdown).
var ErrClosed = errors.New("event stream closed: the server is shutting down")

// Subscribe subscribes the person ownerID to the events of their own
// agents. With lastEventID "" the stream starts now; otherwise it resumes
// after that event when it is still in the buffer (Backlog), and reports
// Missed when it is not.
func (e *Hub) Subscribe(ownerID, lastEventID string) (*Subscription, error) {
	return e.SubscribeWith(ownerID, "", lastEventID)
}

// SubscribeWith is Subscribe for a stream opened with the personal token
// tokenID: revoking that token (or deactivating the person) closes the
// subscription on every instance the signal reaches.
func (e *Hub) SubscribeWith(ownerID, tokenID, lastEventID string) (*Subscription, error) {
	sub := &Subscription{e: e, ownerID: ownerID, tokenID: tokenID, c: make(chan Event, subscriberBuffer)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if lastEventID != "" {
		found := -1
		for i := 0; i < e.n; i++ {
			if e.ring[(e.head+i)%BufferSize].ID == lastEventID {
				found = i
				break
			}
		}
		if found < 0 {
			sub.Missed = true
		} else {
			for i := found + 1; i < e.n; i++ {
				if ev := e.ring[(e.head+i)%BufferSize]; ev.OwnerID == ownerID {
					sub.Backlog = append(sub.Backlog, ev)
				}
			}
		}
	}
	e.subs[sub] = struct{}{}
	return sub, nil
}

// Cursor returns the id of the newest buffered event ("" when the buffer is
// empty). A page that reads the state it shows after taking the cursor and
// then subscribes with it as the Last-Event-ID misses no event that came in
// between (design: Console live updates).
func (e *Hub) Cursor() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == 0 {
		return ""
	}
	return e.ring[(e.head+e.n-1)%BufferSize].ID
}

// Close ends every subscription and refuses new ones; the server calls it
// at shutdown so open SSE streams end instead of holding the shutdown.
func (e *Hub) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for sub := range e.subs {
		delete(e.subs, sub)
		close(sub.c)
	}
}

// ident returns the agent's owner and handle: the cached pair while it is
// younger than OwnerTTL, else a fresh read of the store (design: Operator
// event stream). When the read fails the stale pair is returned (the
// store is unreachable: the last owner known), or the error when none is.
func (e *Hub) ident(ctx context.Context, agentID string) (agentIdent, error) {
	now := e.clock.Now() // before the read: a hand-over committed after it is read again within OwnerTTL
	e.ownerMu.Lock()
	id, ok := e.owners[agentID]
	e.ownerMu.Unlock()
	if ok && now.Sub(id.readAt) < OwnerTTL {
		return id, nil
	}
	if e.store == nil {
		if ok {
			return id, nil
		}
		return agentIdent{}, errNoStore
	}
	a, err := e.store.GetAgent(ctx, store.AgentRef{ID: agentID})
	if err != nil {
		if ok {
			return id, nil
		}
		return agentIdent{}, err
	}
	id = agentIdent{owner: a.OwnerID, handle: a.Handle, readAt: now}
	e.ownerMu.Lock()
	defer e.ownerMu.Unlock()
	if cur, ok := e.owners[agentID]; ok && cur.readAt.After(now) {
		return cur, nil // a hand-over signal came during the read: it is newer
	}
	e.owners[agentID] = id
	return id, nil
}

// newEventID returns 128 random bits as hex: event ids reveal no count or
// order of other persons' events.
func newEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SetOwner records an agent's new owner and handle (a hand-over's bus
// signal): later events of the agent go to the new owner's streams only.
// A hub the signal does not reach reads the new owner within OwnerTTL.
func (e *Hub) SetOwner(agentID, ownerID, handle string) {
	e.ownerMu.Lock()
	e.owners[agentID] = agentIdent{owner: ownerID, handle: handle, readAt: e.clock.Now()}
	e.ownerMu.Unlock()
}

// CloseToken closes the subscriptions opened with the personal token
// tokenID (revoked): their streams end and the client must authenticate
// again.
func (e *Hub) CloseToken(tokenID string) {
	e.closeWhere(func(sub *Subscription) bool { return sub.tokenID == tokenID })
}

// CloseOwner closes the subscriptions of the person ownerID (deactivated).
func (e *Hub) CloseOwner(ownerID string) {
	e.closeWhere(func(sub *Subscription) bool { return sub.ownerID == ownerID })
}

func (e *Hub) closeWhere(match func(*Subscription) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for sub := range e.subs {
		if match(sub) {
			delete(e.subs, sub)
			close(sub.c)
		}
	}
}
