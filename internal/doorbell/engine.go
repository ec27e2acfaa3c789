package doorbell

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// DedupTTL is how long a todo's doorbell is not sent again by this
// instance (design: Doorbell dedup).
const DedupTTL = 30 * time.Second

// DefaultFailoverAfter is doorbell.failover_after's default (design:
// Doorbell failover).
const DefaultFailoverAfter = 30 * time.Second

// failoverBatch bounds the todos one FailoverRings statement counts.
const failoverBatch = 1000

// SuspectFor is how long a session on which a ring went unanswered stays
// not preferred when its client does nothing else.
const SuspectFor = time.Hour

// FailoverTick is the period of the failover loop for a failover_after.
func FailoverTick(after time.Duration) time.Duration {
	return max(min(time.Second, after/4), time.Millisecond)
}

// Store is the part of the store the doorbell engine reads and writes.
type Store interface {
	// MarkRungBatch records rings on create (ring_attempts+1,
	// last_ringed_at), several in one transaction.
	MarkRungBatch(ctx context.Context, marks []store.MarkRungParams) (int, error)
	// FailoverRings counts the failover rings of one pass in one statement.
	FailoverRings(ctx context.Context, p store.FailoverRingsParams) ([]string, error)
	// PendingDoorbellTodos lists what a digest counts.
	PendingDoorbellTodos(ctx context.Context, p store.PendingParams) ([]store.PendingTodo, error)
	// MarkDigestRung sets last_ringed_at on the todos a digest counted.
	MarkDigestRung(ctx context.Context, p store.MarkDigestParams) (int, error)
	// MarkFirstStream records an agent's first notification stream ever.
	MarkFirstStream(ctx context.Context, agentID string, now time.Time) (bool, error)
	// SweepRing selects and counts the todos due for a re-ring.
	SweepRing(ctx context.Context, p store.SweepParams) ([]domain.Todo, error)
	// RingMissed selects and counts the never-rung todos a bus outage hid.
	RingMissed(ctx context.Context, p store.MissedRingParams) ([]domain.Todo, error)

	// Pool routing (design: Pool routing): pools, their todos, members'
	// liveness and the conditional ring updates.
	GetPool(ctx context.Context, p store.GetPoolParams) (domain.Pool, error)
	ListPools(ctx context.Context, p store.ListPoolsParams) ([]domain.Pool, error)
	GetTodo(ctx context.Context, id string) (domain.Todo, error)
	ListTodos(ctx context.Context, p store.ListTodosParams) ([]domain.Todo, error)
	GetAgent(ctx context.Context, ref store.AgentRef) (domain.Agent, error)
	RouteRing(ctx context.Context, p store.RouteRingParams) (bool, error)
	ReleaseRing(ctx context.Context, p store.ReleaseRingParams) (bool, error)
}

// Presence is this instance's presence cache (the presence evaluator).
type Presence interface {
	// Presence returns the agent's effective presence at now, and whether
	// the agent is known and active.
	Presence(agentID string, now time.Time) (p string, ok bool)
	// NotReady reports whether the agent last reported queue not ready.
	NotReady(agentID, queue string) bool
	// NotReadyQueues lists the queues the agent last reported not ready.
	NotReadyQueues(agentID string) []string
	// Excluded returns "<agent_id>:<queue>" for each not-ready queue of
	// agents.
	Excluded(agents []string) []string
}

// Metrics counts what the engine sends. Every method is cheap, never
// blocks and is safe for concurrent use.
type Metrics interface {
	// DoorbellRung counts one todo doorbell queued to a session.
	DoorbellRung()
	// DigestSent counts one digest queued to a session.
	DigestSent()
	// SweepRung counts n todos rung by one sweep pass.
	SweepRung(n int)
}

// Engine rings todo doorbells: on each todo-ready signal from the bus it
// picks exactly one of this instance's sessions of the agent, preferring
// one with an open stream, and queues the notification without blocking.
// A ring that was queued is recorded (ring_attempts, last_ringed_at) off
// the hot path, with the others queued meanwhile (RunRecorder). Safe for
// concurrent use.
type Engine struct {
	store    Store
	presence Presence
	clock    clockwork.Clock
	log      *slog.Logger
	metrics  Metrics

	hubMu sync.RWMutex
	hub   SessionHub

	mu     sync.Mutex
	recent dedup          // todo ids rung in the last DedupTTL
	rr     map[string]int // agent id → round-robin cursor

	records // ring records not written yet (ring.go)

	failoverAfter time.Duration
	fo            []failover           // rings to check, in due order (fo[foHead:])
	foHead        int                  //
	suspect       map[string]time.Time // session id → when a ring on it went unanswered
	pooling                            // pooled rings made here, watched, and the bus (pool.go)

	digestMu  sync.Mutex
	reconnect map[string]time.Time // agent id → last reconnect digest here
}

// SetSessionHub attaches this instance's session hub (nil = none: nothing
// is rung).
func (d *Engine) SetSessionHub(h SessionHub) {
	d.hubMu.Lock()
	d.hub = h
	d.hubMu.Unlock()
}

func (d *Engine) sessionHub() SessionHub {
	d.hubMu.RLock()
	defer d.hubMu.RUnlock()
	return d.hub
}

// now returns the clock's time in UTC truncated to microseconds, the
// precision both stores keep.
func (d *Engine) now() time.Time { return d.clock.Now().UTC().Truncate(time.Microsecond) }

// failover is one ring to check at due: if the todo is still unclaimed
// then, it is rung on another session of the agent here.
type failover struct {
	r       domain.TodoReady
	session string   // the session the last ring went to
	tried   []string // sessions rung so far
	rungAt  time.Time
	due     time.Time
	again   int // times put back because no session could take it
}

// maxFailoverAgain bounds how often a failover that no session could take
// is tried again (one failover_after apart); after that the sweep has it.
const maxFailoverAgain = 3

// again puts f back for one more failover_after when no session could
// take it now (none streaming, or every outbox full), at most
// maxFailoverAgain times; rungAt is the ring the store last counted.
func (d *Engine) again(f failover, rungAt, now time.Time) {
	if f.again >= maxFailoverAgain {
		return
	}
	f.again++
	f.rungAt, f.due = rungAt, now.Add(d.failoverAfter)
	d.mu.Lock()
	d.fo = append(d.fo, f)
	d.mu.Unlock()
}

// watch schedules the failover check of a ring just queued on session.
func (d *Engine) watch(r domain.TodoReady, session string, tried []string, now time.Time) {
	d.mu.Lock()
	d.fo = append(d.fo, failover{r: r, session: session, tried: tried, rungAt: now, due: now.Add(d.failoverAfter)})
	d.mu.Unlock()
}

// bad returns the predicate of pickOrder for sessions not to prefer: a
// ring on them went unanswered (failed over) and their client made no
// request since. It takes d.mu on each call; callers must not hold it.
func (d *Engine) bad(now time.Time) func(SessionInfo) bool {
	return func(si SessionInfo) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		f := d.badLocked(now)
		return f != nil && f(si)
	}
}

// badLocked is bad for callers that hold d.mu while they call the
// predicate (O(1) per call: one map lookup).
func (d *Engine) badLocked(now time.Time) func(SessionInfo) bool {
	if len(d.suspect) == 0 {
		return nil
	}
	return func(si SessionInfo) bool {
		at, ok := d.suspect[si.ID]
		return ok && now.Sub(at) < SuspectFor && !si.LastRequestAt.After(at)
	}
}
