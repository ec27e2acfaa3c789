package doorbell_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/sqlite"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// hub is a SessionHub with one session per agent (of the agents in only,
// when set), streaming unless the agent was cut off; it records what it was
// given and which agent each message reached; fail makes every Notify fail.
type hub struct {
	mu   sync.Mutex
	got  []domain.ChannelMessage
	fail bool
	cut  map[string]bool
	only map[string]bool // when set: the only agents with a session here
	rung []string        // agent ids, in order
}

func (h *hub) setCut(agentID string, cut bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cut == nil {
		h.cut = map[string]bool{}
	}
	h.cut[agentID] = cut
}

func (h *hub) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.rung) == 0 {
		return ""
	}
	return h.rung[len(h.rung)-1]
}

func (h *hub) AgentSessions(agentID string) []doorbell.SessionInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.only != nil && !h.only[agentID] {
		return nil
	}
	return []doorbell.SessionInfo{{ID: "s-" + agentID, AgentID: agentID, Streaming: !h.cut[agentID]}}
}

func (h *hub) Notify(sessionID string, m domain.ChannelMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail {
		return errors.New("injected: write failed")
	}
	h.got = append(h.got, m)
	h.rung = append(h.rung, sessionID[2:])
	return nil
}
func (h *hub) CloseAgentSessions(string, []string) {}
func (h *hub) AgentsWithSessions() []string        { return nil }

func (h *hub) notes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

type nopEvents struct{}

func (nopEvents) PresenceTransition(context.Context, string, string, string) {}

// env is the engine on a real SQLite store and the real presence cache.
type env struct {
	st    *sqlite.Store
	clock *clockwork.FakeClock
	bus   *bus.Local
	eval  *evaluator.Evaluator
	bell  *doorbell.Engine
	hub   *hub
	agent domain.Agent
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{st: st, clock: clockwork.NewFakeClockAt(t0), bus: bus.NewLocal(), hub: &hub{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.eval = evaluator.New(evaluator.Config{Store: st, Bus: e.bus, Events: nopEvents{}, Clock: e.clock, Log: log})
	e.bell = doorbell.New(doorbell.Config{Store: st, Bus: e.bus, Presence: e.eval, Clock: e.clock, Log: log})
	e.bell.SetSessionHub(e.hub)
	owner := domain.Person{ID: "00000000-0000-7000-8000-000000000001", Name: "admin", Active: true, CreatedAt: t0}
	owner.SetRole(domain.RoleAdmin)
	if _, err := st.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: owner, TokenHash: "h", TokenID: "00000000-0000-7000-8000-000000000002"}); err != nil {
		t.Fatal(err)
	}
	e.agent = domain.Agent{ID: "00000000-0000-7000-8001-000000000001", Handle: "ada", OwnerID: owner.ID, Name: "ada",
		Active: true, Scope: domain.Scope{Queues: []string{"q"}, Verbs: []string{"claim_next"}}, BillingModes: []string{}, CreatedAt: t0, UpdatedAt: t0}
	if err := st.CreateAgent(ctx, store.CreateAgentParams{Agent: e.agent, CredentialID: "00000000-0000-7000-8002-000000000001", CredentialHash: "c",
		Audit: domain.AuditRecord{Actor: "operator:" + owner.ID, Action: "agent.vend", AgentID: e.agent.ID}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) push(t testing.TB, n int) domain.TodoReady {
	t.Helper()
	td := domain.Todo{ID: fmt.Sprintf("00000000-0000-7000-8003-%012d", n), AgentID: e.agent.ID, Queue: "q", Title: "t", PushEligible: true,
		CreatedBy: "operator:x", State: domain.TodoPending, MaxAttempts: 3, CreatedAt: e.clock.Now(), UpdatedAt: e.clock.Now()}
	if _, _, err := e.st.CreateTodo(t.Context(), store.CreateTodoParams{Todo: td}); err != nil {
		t.Fatal(err)
	}
	return domain.TodoReady{AgentID: td.AgentID, TodoID: td.ID, Queue: td.Queue, Title: td.Title}
}

func (e *env) setOut(t *testing.T) { e.setOverride(t, "out") }

// setOverride sets the operator's override ("in" or "out").
func (e *env) setOverride(t *testing.T, override string) {
	t.Helper()
	now := e.clock.Now()
	a, err := e.st.UpdatePresence(t.Context(), store.UpdatePresenceParams{AgentID: e.agent.ID, Now: now, SetOverride: true,
		Override: override, OverrideSetAt: &now, OverrideBy: "operator:x",
		Audit: domain.AuditRecord{Actor: "operator:x", Action: "agent.presence", AgentID: e.agent.ID}})
	if err != nil {
		t.Fatal(err)
	}
	e.eval.Upsert(&a, evaluator.ReasonOperator)
}

// TestRingOnceWhileIn: a todo-ready signal rings one session once while
// the agent is in (the dedup refuses the echo), records the ring, and
// holds the doorbell while the agent is out (design: Held doorbells).
func TestRingOnceWhileIn(t *testing.T) {
	e := newEnv(t)
	r := e.push(t, 1)
	if err := bus.Send(t.Context(), e.bus, bus.TodoReady{TodoReady: r}); err != nil {
		t.Fatal(err)
	}
	if e.bell.Ring(r) {
		t.Fatal("the echo of a ring within the dedup TTL was rung again")
	}
	if n := e.hub.notes(); n != 1 {
		t.Fatalf("%d notifications, want 1", n)
	}
	e.bell.DrainRecords()
	td, err := e.st.GetTodo(t.Context(), r.TodoID)
	if err != nil {
		t.Fatal(err)
	}
	if td.RingAttempts != 1 || td.LastRingedAt == nil || !td.LastRingedAt.Equal(t0) {
		t.Fatalf("ring_attempts %d last_ringed_at %v, want 1 at %v", td.RingAttempts, td.LastRingedAt, t0)
	}
	e.setOut(t)
	if e.bell.Ring(e.push(t, 2)) {
		t.Fatal("a doorbell rang while the agent is out")
	}
}

// TestRecorderWritesWhatIsQueued: the recorder writes every ring record
// queued when it looks, at most 64 to a transaction, and waits for
// nothing more (design: Ring budget): the first ring's record is written
// alone; 100 rings queued while that write is under way go as 64 and 36.
func TestRecorderWritesWhatIsQueued(t *testing.T) {
	e := newEnv(t)
	g := &gatedStore{Store: e.st, sizes: make(chan int, 8), release: make(chan struct{})}
	bell := doorbell.New(doorbell.Config{Store: g, Bus: bus.NewLocal(), Presence: e.eval, Clock: e.clock,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	bell.SetSessionHub(e.hub)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { bell.RunRecorder(ctx); close(stopped) }()
	defer func() { g.open(); cancel(); <-stopped }()
	var rings []domain.TodoReady
	for i := range 101 {
		rings = append(rings, e.push(t, i))
	}
	if !bell.Ring(rings[0]) {
		t.Fatal("not rung")
	}
	if n := <-g.sizes; n != 1 {
		t.Fatalf("first batch of %d records, want 1", n)
	}
	for _, r := range rings[1:] {
		if !bell.Ring(r) {
			t.Fatal("not rung")
		}
	}
	g.open()
	for _, want := range []int{64, 36} {
		if n := <-g.sizes; n != want {
			t.Fatalf("batch of %d records, want %d", n, want)
		}
	}
	bell.DrainRecords() // returns once the recorder's batch is written
	for _, r := range rings {
		td, err := e.st.GetTodo(t.Context(), r.TodoID)
		if err != nil {
			t.Fatal(err)
		}
		if td.RingAttempts != 1 {
			t.Fatalf("todo %s: ring_attempts %d, want 1", r.TodoID, td.RingAttempts)
		}
	}
}

// gatedStore tells the size of every MarkRungBatch and holds the first
// until open.
type gatedStore struct {
	*sqlite.Store
	sizes    chan int
	release  chan struct{}
	once     sync.Once
	openOnce sync.Once
}

func (g *gatedStore) open() { g.openOnce.Do(func() { close(g.release) }) }

func (g *gatedStore) MarkRungBatch(ctx context.Context, marks []store.MarkRungParams) (int, error) {
	g.sizes <- len(marks)
	g.once.Do(func() { <-g.release })
	return g.Store.MarkRungBatch(ctx, marks)
}

// TestFailedDigestMarksNothing: a digest whose write fails reports false
// and leaves the counted todos unmarked.
func TestFailedDigestMarksNothing(t *testing.T) {
	e := newEnv(t)
	e.setOut(t)
	r := e.push(t, 1) // held while out
	e.setOverride(t, "in")
	e.hub.fail = true
	if e.bell.Digest(t.Context(), e.agent.ID, evaluator.ReasonShiftStart) {
		t.Fatal("Digest reported success through a failing hub")
	}
	td, err := e.st.GetTodo(t.Context(), r.TodoID)
	if err != nil {
		t.Fatal(err)
	}
	if td.LastRingedAt != nil || td.RingAttempts != 0 {
		t.Fatalf("a failed digest marked the todo: last_ringed_at %v ring_attempts %d", td.LastRingedAt, td.RingAttempts)
	}
	e.hub.fail = false
	if !e.bell.Digest(t.Context(), e.agent.ID, evaluator.ReasonShiftStart) {
		t.Fatal("Digest through a working hub sent nothing")
	}
	if td, _ = e.st.GetTodo(t.Context(), r.TodoID); td.LastRingedAt == nil || td.RingAttempts != 0 {
		t.Fatalf("after the digest: last_ringed_at %v ring_attempts %d, want set and 0", td.LastRingedAt, td.RingAttempts)
	}
}

// TestSweepWithoutReceiversQueriesNothing: no agent with a session here →
// no sweep query and nothing rung.
func TestSweepWithoutReceiversQueriesNothing(t *testing.T) {
	e := newEnv(t)
	e.push(t, 1)
	e.clock.Advance(time.Hour)
	if n, err := e.bell.SweepOnce(t.Context()); n != 0 || err != nil {
		t.Fatalf("SweepOnce = %d, %v; want 0, nil", n, err)
	}
	if n := e.hub.notes(); n != 0 {
		t.Fatalf("%d notifications, want none", n)
	}
}

// twoHub gives every agent two streaming sessions, s1 and s2; a session
// named in full refuses what it is given, as a full outbox does.
type twoHub struct {
	mu       sync.Mutex
	got      map[string][]string // session → todo ids
	full     map[string]bool
	noStream map[string]bool // sessions whose stream is closed (reconnecting)
}

func (h *twoHub) AgentSessions(agentID string) []doorbell.SessionInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	return []doorbell.SessionInfo{{ID: "s1", AgentID: agentID, Streaming: !h.noStream["s1"]}, {ID: "s2", AgentID: agentID, Streaming: !h.noStream["s2"]}}
}

func (h *twoHub) Notify(session string, m domain.ChannelMessage) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full[session] {
		return errors.New("injected: outbox full")
	}
	h.got[session] = append(h.got[session], m.Meta["todo_id"])
	return nil
}
func (h *twoHub) CloseAgentSessions(string, []string) {}
func (h *twoHub) AgentsWithSessions() []string        { return nil }

func (h *twoHub) setFull(session string, full bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.full[session] = full
}

func (h *twoHub) setStreaming(session string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noStream[session] = !on
}

// TestFailoverNobodyCouldTakeIsTriedAgain: a failover that no session can
// queue (the other session's outbox is full) is tried again one
// failover_after later instead of being left to the sweep (design:
// Doorbell failover).
func TestFailoverNobodyCouldTakeIsTriedAgain(t *testing.T) {
	for _, c := range []struct {
		name    string
		blocked func(h *twoHub, session string, blocked bool)
	}{
		{"outbox full", (*twoHub).setFull},
		{"stream reconnecting", func(h *twoHub, s string, blocked bool) { h.setStreaming(s, !blocked) }},
	} {
		t.Run(c.name, func(t *testing.T) { testFailoverTriedAgain(t, c.blocked) })
	}
}

func testFailoverTriedAgain(t *testing.T, blocked func(h *twoHub, session string, blocked bool)) {
	e := newEnv(t)
	h := &twoHub{got: map[string][]string{}, full: map[string]bool{}, noStream: map[string]bool{}}
	e.bell.SetSessionHub(h)
	r := e.push(t, 1)
	if !e.bell.Ring(r) {
		t.Fatal("not rung")
	}
	e.bell.DrainRecords()
	h.mu.Lock()
	first := "s1"
	if len(h.got["s2"]) == 1 {
		first = "s2"
	}
	h.mu.Unlock()
	other := map[string]string{"s1": "s2", "s2": "s1"}[first]
	blocked(h, other, true)
	e.clock.Advance(doorbell.DefaultFailoverAfter)
	if n := e.bell.FailoverOnce(t.Context()); n != 0 {
		t.Fatalf("failover rang %d on a session that could not take it", n)
	}
	blocked(h, other, false)
	e.clock.Advance(doorbell.DefaultFailoverAfter)
	if n := e.bell.FailoverOnce(t.Context()); n != 1 {
		t.Fatalf("the failover no session could take was not tried again: rung %d", n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if got := h.got[other]; len(got) != 1 || got[0] != r.TodoID {
		t.Fatalf("%s got %v, want the todo %s", other, got, r.TodoID)
	}
}
