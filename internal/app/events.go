package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/store"
)

// Event kinds of the operator event stream GET /v1/events (DESIGN.md §2
// console "live over SSE", issue 4 item 10).
const (
	// EventPresenceChanged: the liveness pair (state, reported_billing_mode)
	// of an agent changed (DESIGN.md §5.2, D-M2-20-4). Data:
	// PresenceChangedData.
	EventPresenceChanged = "agent.presence_changed"
	// EventPresenceTransition: an agent's in/out presence changed (DESIGN.md
	// §3.7). Data: PresenceTransitionData.
	EventPresenceTransition = "agent.presence_transition"
	// EventStreamMissed is sent to a subscriber whose Last-Event-ID is no
	// longer (or never was) in the buffer: events were missed, so the client
	// should re-read the state it shows. Data: StreamMissedData.
	EventStreamMissed = "stream.missed"
)

// EventBufferSize is how many events every instance keeps for resumption
// with Last-Event-ID.
const EventBufferSize = 1024

// subscriberBuffer is how many events a slow subscriber may lag behind
// before its stream is closed (it resumes from the buffer on reconnect).
const subscriberBuffer = 256

// Event is one event of the operator stream. ID is opaque, unique and
// assigned by the publishing instance ("<seq>-<instance>"); every instance
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
	Reason   string `json:"reason"`   // the digest reason of DESIGN.md §3.7
}

// StreamMissedData is the data of stream.missed.
type StreamMissedData struct {
	LastEventID string `json:"last_event_id"`
	// Buffer is how many events the server keeps for resumption.
	Buffer int `json:"buffer"`
}

// eventWire is an Event as it travels over the bus.
type eventWire struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	At      time.Time       `json:"at"`
	AgentID string          `json:"agent_id,omitempty"`
	OwnerID string          `json:"owner_id,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// Events is this instance's event hub: it publishes events over the bus
// (bus.ChannelEvents) so they reach the hubs of every instance, keeps the
// last EventBufferSize events in a ring for Last-Event-ID resumption, and
// fans them out to subscribers filtered to the subscriber's own agents.
// Safe for concurrent use.
type Events struct {
	s        *Service
	instance string
	seq      atomic.Uint64

	mu      sync.Mutex
	ring    [EventBufferSize]Event
	head    int // index of the oldest event
	n       int // events in the ring
	subs    map[*EventSubscription]struct{}
	lastPub map[string]liveness.PublishPair // agent id → last presence_changed pair delivered
	closed  bool

	ownerMu sync.Mutex
	owners  map[string]agentIdent // agent id → owner and handle (never change)
}

type agentIdent struct{ owner, handle string }

func newEvents(s *Service, instance string) *Events {
	e := &Events{s: s, instance: instance, subs: map[*EventSubscription]struct{}{},
		lastPub: map[string]liveness.PublishPair{}, owners: map[string]agentIdent{}}
	s.bus.Subscribe(bus.ChannelEvents, e.onBus)
	return e
}

// newInstanceID returns 8 random hex digits naming this process in event
// IDs and liveness claims.
func newInstanceID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// PresenceTransition publishes agent.presence_transition for an in/out
// transition (DESIGN.md §3.7); the presence evaluator calls it once per
// claimed transition. The owner and handle are looked up (and cached).
func (e *Events) PresenceTransition(ctx context.Context, agentID, presence, reason string) {
	id, err := e.ident(ctx, agentID)
	if err != nil {
		e.s.log.Warn("presence transition event not published: agent lookup failed", "agent_id", agentID, "err", err)
		return
	}
	e.Publish(ctx, EventPresenceTransition, agentID, id.owner, PresenceTransitionData{Agent: id.handle, Presence: presence, Reason: reason})
}

// presenceTransitionHere delivers agent.presence_transition to this
// instance's hub only, with an ID of this instance: a transition whose
// broadcast this instance missed while its bus listener was down (the other
// instances had it). CatchUp calls it.
func (e *Events) presenceTransitionHere(ctx context.Context, agentID, presence, reason string) {
	id, err := e.ident(ctx, agentID)
	if err != nil {
		e.s.log.Warn("missed presence transition event not delivered: agent lookup failed", "agent_id", agentID, "err", err)
		return
	}
	raw, _ := json.Marshal(PresenceTransitionData{Agent: id.handle, Presence: presence, Reason: reason})
	e.deliver(eventWire{ID: strconv.FormatUint(e.seq.Add(1), 10) + "-" + e.instance, Kind: EventPresenceTransition, At: e.s.now(),
		AgentID: agentID, OwnerID: id.owner, Data: raw})
}

// Publish sends one event of kind about agentID (owned by ownerID) with
// data (marshalled with encoding/json) to the hubs of every instance. When
// the bus refuses it, the event still reaches this instance's subscribers.
func (e *Events) Publish(ctx context.Context, kind, agentID, ownerID string, data any) {
	raw, err := json.Marshal(data)
	if err != nil {
		e.s.log.Error("event not published: data does not marshal", "kind", kind, "err", err)
		return
	}
	w := eventWire{ID: strconv.FormatUint(e.seq.Add(1), 10) + "-" + e.instance, Kind: kind, At: e.s.now(),
		AgentID: agentID, OwnerID: ownerID, Data: raw}
	payload, _ := json.Marshal(w) // strings, a time and raw JSON
	if err := e.s.bus.Publish(ctx, bus.ChannelEvents, string(payload)); err != nil {
		e.s.log.Warn("event not broadcast; delivered on this instance only", "kind", kind, "agent_id", agentID, "err", err)
		e.deliver(w)
	}
}

func (e *Events) onBus(payload string) {
	var w eventWire
	if err := json.Unmarshal([]byte(payload), &w); err != nil || w.ID == "" {
		e.s.log.Warn("malformed event on the bus ignored", "err", err)
		return
	}
	e.deliver(w)
}

// deliver appends the event to the ring and hands it to the matching
// subscribers without blocking: a subscriber whose buffer is full is closed
// (its client reconnects with Last-Event-ID and resumes from the ring).
func (e *Events) deliver(w eventWire) {
	ev := Event{ID: w.ID, Kind: w.Kind, At: w.At, AgentID: w.AgentID, Data: w.Data, OwnerID: w.OwnerID}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	if ev.Kind == EventPresenceChanged {
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
	if e.n == EventBufferSize {
		e.ring[e.head] = ev
		e.head = (e.head + 1) % EventBufferSize
	} else {
		e.ring[(e.head+e.n)%EventBufferSize] = ev
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

// lastPair returns the last agent.presence_changed pair of the agent this
// hub delivered (published by any instance): the pair a new owner of the
// agent's deadline compares with (D-M2-20-4 across instances).
func (e *Events) lastPair(agentID string) (liveness.PublishPair, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.lastPub[agentID]
	return p, ok
}

// EventSubscription is one subscriber of the hub (one SSE stream).
type EventSubscription struct {
	e       *Events
	ownerID string
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
func (s *EventSubscription) C() <-chan Event { return s.c }

// Close unsubscribes. Safe to call more than once.
func (s *EventSubscription) Close() {
	s.e.mu.Lock()
	defer s.e.mu.Unlock()
	if _, ok := s.e.subs[s]; ok {
		delete(s.e.subs, s)
		close(s.c)
	}
}

// ErrEventsClosed is returned by Subscribe after Close (server shutdown).
var ErrEventsClosed = errors.New("event stream closed: the server is shutting down")

// Subscribe subscribes the person ownerID to the events of their own
// agents. With lastEventID "" the stream starts now; otherwise it resumes
// after that event when it is still in the buffer (Backlog), and reports
// Missed when it is not.
func (e *Events) Subscribe(ownerID, lastEventID string) (*EventSubscription, error) {
	sub := &EventSubscription{e: e, ownerID: ownerID, c: make(chan Event, subscriberBuffer)}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrEventsClosed
	}
	if lastEventID != "" {
		found := -1
		for i := 0; i < e.n; i++ {
			if e.ring[(e.head+i)%EventBufferSize].ID == lastEventID {
				found = i
				break
			}
		}
		if found < 0 {
			sub.Missed = true
		} else {
			for i := found + 1; i < e.n; i++ {
				if ev := e.ring[(e.head+i)%EventBufferSize]; ev.OwnerID == ownerID {
					sub.Backlog = append(sub.Backlog, ev)
				}
			}
		}
	}
	e.subs[sub] = struct{}{}
	return sub, nil
}

// Close ends every subscription and refuses new ones; the server calls it
// at shutdown so open SSE streams end instead of holding the shutdown.
func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for sub := range e.subs {
		delete(e.subs, sub)
		close(sub.c)
	}
}

func (e *Events) ident(ctx context.Context, agentID string) (agentIdent, error) {
	e.ownerMu.Lock()
	id, ok := e.owners[agentID]
	e.ownerMu.Unlock()
	if ok {
		return id, nil
	}
	a, err := e.s.store.GetAgent(ctx, store.AgentRef{ID: agentID})
	if err != nil {
		return agentIdent{}, err
	}
	id = agentIdent{owner: a.OwnerID, handle: a.Handle}
	e.ownerMu.Lock()
	e.owners[agentID] = id
	e.ownerMu.Unlock()
	return id, nil
}
