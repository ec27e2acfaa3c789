package app

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// SessionInfo describes one MCP session hosted by this instance.
type SessionInfo struct {
	ID           string
	AgentID      string
	CredentialID string
	// Streaming is true while the client holds the session's GET
	// notification stream open.
	Streaming bool
	OpenedAt  time.Time
	// LastActive is when the client was last seen on the session: now while
	// a request of it (a GET stream included) is in flight, else the end of
	// its last request.
	LastActive time.Time
	// LastRequestAt is the end of the session's last POST (zero = none
	// since initialize): proof that the client still acts, which a held-open
	// GET stream is not.
	LastRequestAt time.Time
	// Stalled is true after a write on the session's stream ran past the
	// write deadline, until the client acts again (a POST or a new stream):
	// such a session is not preferred (issue 8 item 5).
	Stalled bool
}

// SessionLiveWindow: a session without an open stream whose client has not
// been seen for this long is not counted as live (the console's session
// count, issue 8 item 6); it expires soon after.
const SessionLiveWindow = 2 * time.Minute

// Live reports whether the session counts as live at now: it has an open
// stream or its client was seen within SessionLiveWindow.
func (si SessionInfo) Live(now time.Time) bool {
	return si.Streaming || now.Sub(si.LastActive) < SessionLiveWindow
}

// SessionHub is the port to this instance's MCP sessions, implemented by
// the MCP adapter.
type SessionHub interface {
	// AgentSessions lists this instance's live sessions of the agent.
	AgentSessions(agentID string) []SessionInfo
	// Notify queues a channel notification on one session without blocking;
	// an error means it was not queued (full buffer, gone, not initialized).
	Notify(sessionID string, m domain.ChannelMessage) error
	// CloseAgentSessions closes the agent's sessions: all when creds is nil,
	// otherwise those bound to one of the credential ids.
	CloseAgentSessions(agentID string, creds []string)
	// AgentsWithSessions lists the agents with at least one session here.
	AgentsWithSessions() []string
}

// The hub also calls Service.Digests.StreamOpened(agentID) when an agent
// gains its first open notification stream on this instance, and
// Service.Doorbell.Redeliver with the doorbells a session queued but never
// wrote when it closes or loses its stream (issue 8 item 5).

// DoorbellDedupTTL is how long a todo's doorbell is not sent again by this
// instance (DESIGN.md §3.8 "dedup … for a short TTL").
const DoorbellDedupTTL = 30 * time.Second

// Doorbell rings todo doorbells: on each todo-ready signal from the bus it
// picks exactly one of this instance's sessions of the agent, preferring one
// with an open stream, and queues the notification without blocking
// (DESIGN.md §3.8). A ring that was queued is recorded (ring_attempts,
// last_ringed_at) off the hot path.
type Doorbell struct {
	s *Service

	mu     sync.Mutex
	recent dedup          // todo ids rung in the last DoorbellDedupTTL
	rr     map[string]int // agent id → round-robin cursor
	marks  chan store.MarkRungParams

	failoverAfter time.Duration
	fo            []failover           // rings to check, in due order (fo[foHead:])
	foHead        int                  //
	suspect       map[string]time.Time // session id → when a ring on it went unanswered

	// OnRing, when set, observes every doorbell queued (metrics, tests).
	OnRing func(sessionID string, m domain.ChannelMessage)
}

func newDoorbell(s *Service) *Doorbell {
	d := &Doorbell{s: s, recent: newDedup(DoorbellDedupTTL), rr: map[string]int{}, marks: make(chan store.MarkRungParams, 4096),
		failoverAfter: s.failoverAfter, suspect: map[string]time.Time{}}
	s.bus.Subscribe(bus.ChannelTodoReady, d.onTodoReady)
	s.bus.Subscribe(bus.ChannelAgentSessions, s.onAgentSessions)
	return d
}

func (d *Doorbell) onTodoReady(payload string) {
	var r domain.TodoReady
	if err := json.Unmarshal([]byte(payload), &r); err != nil {
		d.s.log.Warn("malformed todo-ready signal dropped", "err", err)
		return
	}
	d.Ring(r)
}

// Ring sends the todo doorbell for r on create: only while the agent is in
// (held doorbells, DESIGN.md §3.6) and the queue is not reported not-ready
// (§5.2), to one local session, deduplicated per todo for DoorbellDedupTTL.
// A queued ring is recorded (ring_attempts+1). It reports whether a
// notification was queued.
func (d *Doorbell) Ring(r domain.TodoReady) bool {
	return d.deliver(r, ringCreate)
}

// ringKind says where a ring comes from.
type ringKind int

const (
	// ringCreate: the todo-ready signal (or the pushing instance itself).
	// Filtered by presence and readiness, deduplicated, recorded here.
	ringCreate ringKind = iota
	// ringSweep: the sweep selected, filtered and counted the todo in one
	// statement; it is sent whatever the dedup says, and marks it.
	ringSweep
	// ringCatchUp: RingMissed after a bus outage selected and counted it;
	// skipped when this instance rang it within the dedup TTL (its record
	// was not written yet), and marks the dedup so a late echo is not sent.
	ringCatchUp
)

// deliver queues the doorbell on one of this instance's sessions of the
// agent (see ringKind for the filters of each kind).
func (d *Doorbell) deliver(r domain.TodoReady, kind ringKind) bool {
	onCreate := kind == ringCreate
	hub := d.s.sessionHub()
	if hub == nil {
		return false
	}
	sessions := hub.AgentSessions(r.AgentID)
	if len(sessions) == 0 {
		return false
	}
	now := d.s.now()
	if onCreate {
		if p, ok := d.s.Evaluator.Presence(r.AgentID, now); !ok || p != "in" {
			return false
		}
		if d.s.Evaluator.NotReady(r.AgentID, r.Queue) {
			return false
		}
	}
	d.mu.Lock()
	if !d.recent.add(r.TodoID, now) && kind != ringSweep {
		d.mu.Unlock()
		return false
	}
	order := pickOrder(sessions, d.rr[r.AgentID], d.badLocked(now))
	d.rr[r.AgentID]++
	d.mu.Unlock()

	msg := domain.TodoDoorbell(r)
	for _, si := range order {
		if err := hub.Notify(si.ID, msg); err != nil {
			continue
		}
		d.s.metrics.DoorbellRung()
		if d.OnRing != nil {
			d.OnRing(si.ID, msg)
		}
		if len(sessions) > 1 {
			d.watch(r, si.ID, []string{si.ID}, now)
		}
		if onCreate {
			select {
			case d.marks <- store.MarkRungParams{TodoID: r.TodoID, At: now}:
			default:
				d.s.log.Warn("ring record dropped: queue full", "todo_id", r.TodoID)
			}
		}
		return true
	}
	if onCreate {
		d.mu.Lock()
		d.recent.remove(r.TodoID)
		d.mu.Unlock()
	}
	return false
}

// pickOrder orders sessions for delivery: streaming ones the client is
// known to read first, rotating among them by cursor so load spreads; then
// streaming ones that are bad (a ring on them went unanswered, or a write
// stalled); then streamless ones (their push is held by the transport
// until a stream opens, or dropped). bad may be nil.
func pickOrder(ss []SessionInfo, cursor int, bad func(SessionInfo) bool) []SessionInfo {
	rank := func(si SessionInfo) int {
		switch {
		case !si.Streaming:
			return 2
		case si.Stalled || (bad != nil && bad(si)):
			return 1
		}
		return 0
	}
	out := make([]SessionInfo, len(ss))
	copy(out, ss)
	sort.SliceStable(out, func(i, j int) bool {
		if ri, rj := rank(out[i]), rank(out[j]); ri != rj {
			return ri < rj
		}
		return out[i].ID < out[j].ID
	})
	n := 0
	for n < len(out) && rank(out[n]) == 0 {
		n++
	}
	if n > 1 {
		k := cursor % n
		rot := append(append([]SessionInfo{}, out[k:n]...), out[:k]...)
		copy(out, rot)
	}
	return out
}

// RunRecorder writes ring records until ctx ends; it drains what is queued
// before returning.
func (d *Doorbell) RunRecorder(ctx context.Context) {
	for {
		select {
		case m := <-d.marks:
			d.record(m)
		case <-ctx.Done():
			for {
				select {
				case m := <-d.marks:
					d.record(m)
				default:
					return
				}
			}
		}
	}
}

func (d *Doorbell) record(m store.MarkRungParams) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.s.store.MarkRung(ctx, m); err != nil {
		d.s.log.Warn("ring not recorded", "todo_id", m.TodoID, "err", err)
	}
}

// DrainRecords writes every queued ring record now, on the caller's
// goroutine; tests call it instead of waiting for RunRecorder.
func (d *Doorbell) DrainRecords() {
	for {
		select {
		case m := <-d.marks:
			d.record(m)
		default:
			return
		}
	}
}

// dedup is a set of keys that expire ttl after they were added, with O(1)
// amortised cost per add and remove whatever its size: keys are kept in a
// FIFO in insertion order next to a map, and each add first drops the
// expired keys at the FIFO's head (issue 8 item 3: no sweep of the whole set
// on the hot path). Not safe for concurrent use (Doorbell.mu guards it).
type dedup struct {
	ttl  time.Duration
	at   map[string]time.Time // key → added at
	fifo []dedupEntry         // insertion order; fifo[head:] are live or stale
	head int
}

type dedupEntry struct {
	key string
	at  time.Time
}

func newDedup(ttl time.Duration) dedup { return dedup{ttl: ttl, at: map[string]time.Time{}} }

// add records key at now unless it was added less than ttl ago; it reports
// whether it was added. Keys older than ttl at now are dropped first.
func (d *dedup) add(key string, now time.Time) bool {
	d.expire(now)
	if at, ok := d.at[key]; ok && now.Sub(at) < d.ttl {
		return false
	}
	d.at[key] = now
	d.fifo = append(d.fifo, dedupEntry{key: key, at: now})
	return true
}

// remove forgets key (its FIFO entry is skipped when it reaches the head).
func (d *dedup) remove(key string) { delete(d.at, key) }

// len is the number of keys held (expired ones included until the next add).
func (d *dedup) len() int { return len(d.at) }

func (d *dedup) expire(now time.Time) {
	for d.head < len(d.fifo) {
		e := d.fifo[d.head]
		if now.Sub(e.at) < d.ttl {
			break
		}
		if at, ok := d.at[e.key]; ok && at.Equal(e.at) {
			delete(d.at, e.key)
		}
		d.fifo[d.head] = dedupEntry{}
		d.head++
	}
	// Compact once the dead prefix is at least half of the slice: each entry
	// is moved O(1) times on average.
	if d.head > 1024 && d.head*2 >= len(d.fifo) {
		n := copy(d.fifo, d.fifo[d.head:])
		clear(d.fifo[n:])
		d.fifo = d.fifo[:n]
		d.head = 0
	}
}
