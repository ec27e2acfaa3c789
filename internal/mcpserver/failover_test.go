package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/mcpserver"
	"github.com/rollcall/rollcall/internal/testkit"
)

// rawStreamSession opens a session with plain HTTP (streamSession), then a
// GET stream whose body the test never
// reads (a frozen client) — and returns its id and the open stream.
func (e *env) rawStreamSession(cred string) (string, *http.Response) {
	e.t.Helper()
	id := e.streamSession(cred)
	st := e.raw(http.MethodGet, cred, id, "")
	e.t.Cleanup(func() { st.Body.Close() })
	e.waitEvent(id, mcpserver.StreamOpened)
	return id, st
}

// ringLog records on which session each todo's doorbell was queued.
type ringLog struct {
	mu sync.Mutex
	on map[string][]string // todo id → sessions, in ring order
}

func watchRings(e *env) *ringLog {
	l := &ringLog{on: map[string][]string{}}
	e.onRing(func(session string, m domain.ChannelMessage) {
		l.mu.Lock()
		l.on[m.Meta["todo_id"]] = append(l.on[m.Meta["todo_id"]], session)
		l.mu.Unlock()
	})
	return l
}

func (l *ringLog) sessions(todo string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.on[todo])
}

// pushSplit pushes n todos to ada's queue q1 and returns the ones rung on
// the live session and those rung on the frozen one; a todo rung anywhere
// else, or none rung on the frozen one (the test would prove nothing),
// fails t.
func (l *ringLog) pushSplit(t *testing.T, e *env, n int, live, frozen string) (onLive, onFrozen []string) {
	t.Helper()
	for range n {
		td := e.push("ada", "q1", "work")
		switch s := l.sessions(td.ID); {
		case slices.Equal(s, []string{live}):
			onLive = append(onLive, td.ID)
		case slices.Equal(s, []string{frozen}):
			onFrozen = append(onFrozen, td.ID)
		default:
			t.Fatalf("todo %s rung on %v", td.ID, s)
		}
	}
	if len(onFrozen) == 0 {
		t.Fatal("no doorbell went to the frozen session; the test proves nothing")
	}
	return onLive, onFrozen
}

// todoNotes reads channel notifications of ac until every todo of want has
// had its doorbell, failing on any other todo's.
func todoNotes(t *testing.T, ac *agentClient, want []string) {
	t.Helper()
	left := slices.Clone(want)
	for len(left) > 0 {
		_, meta := channelParams(t, ac.note())
		i := slices.Index(left, meta["todo_id"])
		if i < 0 {
			t.Fatalf("doorbell of %s, want one of %v", meta["todo_id"], left)
		}
		left = slices.Delete(left, i, i+1)
	}
}

func ringAttempts(t *testing.T, e *env, id string) int {
	t.Helper()
	td, err := e.store.GetTodo(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return td.RingAttempts
}

// TestFrozenSessionDoorbellsFailOver checks the failover (design: Doorbell failover): one agent, two MCP
// sessions — a real mcp-go client that reads, and a raw client whose
// stream is open but never read (frozen). Doorbells queued on the frozen
// one are rung on the live one once doorbell.failover_after (30 s on the
// injected clock) has passed with the todo unclaimed, as counted rings;
// afterwards new doorbells prefer the live session, and a todo is not
// failed over twice to sessions already rung.
func TestFrozenSessionDoorbellsFailOver(t *testing.T) {
	e := newEnv(t, withAppClock)
	a := e.vend("ada", allVerbs, "q1")
	live := e.listen(a.Credential)
	frozen, _ := e.rawStreamSession(a.Credential)
	rings := watchRings(e)

	onLive, onFrozen := rings.pushSplit(t, e, 7, live.sessionID(), frozen)
	todoNotes(t, live, onLive)
	for _, id := range onLive { // the live agent works what it hears of
		live.ok("claim", map[string]any{"todo_id": id}, nil)
	}
	e.svc.FlushRingRecords()

	e.clock.Advance(app.DefaultFailoverAfter - 1)
	if n := e.svc.FailoverOnce(e.ctx); n != 0 {
		t.Fatalf("%d failed over before failover_after", n)
	}
	e.clock.Advance(1)
	if n := e.svc.FailoverOnce(e.ctx); n != len(onFrozen) {
		t.Fatalf("FailoverOnce rang %d, want the %d doorbells of the frozen session", n, len(onFrozen))
	}
	todoNotes(t, live, onFrozen)
	for _, id := range onFrozen {
		if got := ringAttempts(t, e, id); got != 2 {
			t.Errorf("todo %s: ring_attempts %d after its failover, want 2", id, got)
		}
		if s := rings.sessions(id); !slices.Equal(s, []string{frozen, live.sessionID()}) {
			t.Errorf("todo %s rung on %v", id, s)
		}
	}
	// The frozen session is not preferred any more.
	for range 3 {
		td := e.push("ada", "q1", "more work")
		if s := rings.sessions(td.ID); !slices.Equal(s, []string{live.sessionID()}) {
			t.Fatalf("after the failover todo %s was rung on %v, want the live session", td.ID, s)
		}
		todoNotes(t, live, []string{td.ID})
	}
	// Every session was rung for those todos: nothing more to fail over.
	e.svc.FlushRingRecords()
	e.clock.Advance(app.DefaultFailoverAfter)
	if n := e.svc.FailoverOnce(e.ctx); n != 0 {
		t.Fatalf("second failover pass rang %d, want 0", n)
	}
	live.noNote()
}

// TestClosingSessionHandsItsDoorbellOn: a doorbell queued on a session that
// closes before writing it goes to the agent's other session at once (no
// clock advances), and is not counted twice.
func TestClosingSessionHandsItsDoorbellOn(t *testing.T) {
	e := newEnv(t, withAppClock)
	a := e.vend("ada", allVerbs, "q1")
	c1 := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125}) // no GET stream: doorbells wait in its buffer
	c2 := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	rings := watchRings(e)
	td := e.push("ada", "q1", "work")
	first := rings.sessions(td.ID)
	if len(first) != 1 {
		t.Fatalf("rung on %v", first)
	}
	gone, other := c1, c2
	if first[0] == c2.sessionID() {
		gone, other = c2, c1
	}
	wantStatus(t, e.raw(http.MethodDelete, a.Credential, gone.sessionID(), ""), http.StatusOK)
	e.waitEvent(gone.sessionID(), mcpserver.SessionClosed)
	testkit.Eventually(t, "the doorbell is handed to the other session", wait, func() bool { return len(rings.sessions(td.ID)) == 2 })
	other.roundTrip() // its buffered notification comes with this response
	todoNotes(t, other, []string{td.ID})
	e.svc.FlushRingRecords()
	if got := ringAttempts(t, e, td.ID); got != 1 {
		t.Errorf("ring_attempts %d, want 1 (the same ring reached another session)", got)
	}
}

// TestKilledClientDoorbellStillRung: a todo pushed the moment a client is
// killed is still rung on the agent's other session: at once when it had
// not been written, else by the failover ("in the
// millisecond a client is killed"; design: Doorbell failover).
func TestKilledClientDoorbellStillRung(t *testing.T) {
	e := newEnv(t, withAppClock)
	a := e.vend("ada", allVerbs, "q1")
	live := e.listen(a.Credential)
	var earlier []string // a late second ring of an earlier run's todo is fine
	for i := range 6 {
		victim, stream := e.rawStreamSession(a.Credential)
		var wg sync.WaitGroup
		wg.Go(func() { stream.Body.Close() }) // the client dies…
		td := e.push("ada", "q1", "pushed as the client dies")
		wg.Wait()
		e.waitEvent(victim, mcpserver.StreamClosed)
		e.svc.FlushRingRecords()
		failedOver := false
		deadline := time.After(wait)
	read:
		for {
			select {
			case n := <-live.notes:
				_, meta := channelParams(t, n)
				if slices.Contains(earlier, meta["todo_id"]) {
					continue
				}
				if meta["todo_id"] != td.ID {
					t.Fatalf("run %d: doorbell of %s, want %s", i, meta["todo_id"], td.ID)
				}
				break read
			case <-time.After(50 * time.Millisecond):
				if !failedOver { // not handed on at once: written before the death
					failedOver = true
					e.clock.Advance(app.DefaultFailoverAfter)
					e.svc.FailoverOnce(e.ctx)
				}
			case <-deadline:
				t.Fatalf("run %d: the todo pushed as the client died was never rung on the live session", i)
			}
		}
		earlier = append(earlier, td.ID)
		live.ok("claim", map[string]any{"todo_id": td.ID}, nil)
		wantStatus(t, e.raw(http.MethodDelete, a.Credential, victim, ""), http.StatusOK)
		e.waitEvent(victim, mcpserver.SessionClosed)
	}
}

// stalledStream opens the GET stream of session id over a raw TCP
// connection with a tiny receive buffer, reads the response head and then
// never reads again: the server's writes stall once the socket buffers are
// full.
func (e *env) stalledStream(cred, id string) net.Conn {
	e.t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048) }); err != nil {
			return err
		}
		return serr
	}}
	host := strings.TrimPrefix(e.ts.URL, "http://")
	conn, err := d.Dial("tcp", host)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\nAccept: text/event-stream\r\n\r\n",
		host, cred, id, mcp.ProtocolVersion20251125)
	head := make([]byte, 64)
	if _, err := io.ReadAtLeast(conn, head, 12); err != nil || !strings.HasPrefix(string(head), "HTTP/1.1 200") {
		e.t.Fatalf("stream head %q: %v", head, err)
	}
	e.waitEvent(id, mcpserver.StreamOpened)
	return conn
}

// TestStalledStreamLosesNoDoorbell: a client whose stream stops being read
// (its socket buffers full) has its stream closed once a write runs past
// Options.WriteTimeout; the doorbells it had not been written go to the
// agent's other session at once, and later ones prefer that session: every
// todo reaches the reading client (design: Stream writes).
func TestStalledStreamLosesNoDoorbell(t *testing.T) {
	// Small server send buffers, so a client that stops reading stalls the
	// server's writes after a few KB instead of megabytes.
	smallSendBuffers := func(ts *httptest.Server) {
		ts.Config.ConnState = func(c net.Conn, st http.ConnState) {
			if tc, ok := c.(*net.TCPConn); ok && st == http.StateNew {
				_ = tc.SetWriteBuffer(8192)
			}
		}
	}
	e := newEnvServer(t, smallSendBuffers, withAppClock, func(o *mcpserver.Options) { o.WriteTimeout = 300 * time.Millisecond; o.KeepAlive = -1 })
	a := e.vend("ada", allVerbs, "q1")
	live := e.listen(a.Credential)
	resp, body := e.bareInit(a.Credential)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	stalled := resp.Header.Get("Mcp-Session-Id")
	wantStatus(t, e.raw(http.MethodPost, a.Credential, stalled, `{"jsonrpc":"2.0","method":"notifications/initialized"}`), http.StatusAccepted)
	e.stalledStream(a.Credential, stalled)
	rings := watchRings(e)

	title := strings.Repeat("x", 480)
	var pushed []string
	closed := false
	for i := 0; !closed; i++ {
		if i == 2000 {
			t.Fatal("the stalled stream was never closed after 2000 doorbells")
		}
		pushed = append(pushed, e.push("ada", "q1", title).ID)
		e.mu.Lock()
		for _, ev := range e.skipped[stalled] {
			closed = closed || ev.Kind == mcpserver.StreamClosed
		}
		e.mu.Unlock()
		if !closed {
			select {
			case ev := <-e.eventsOf(stalled):
				e.mu.Lock()
				e.skipped[stalled] = append(e.skipped[stalled], ev)
				e.mu.Unlock()
				closed = ev.Kind == mcpserver.StreamClosed
			default:
			}
		}
	}
	// Later doorbells go to the live session.
	for range 5 {
		td := e.push("ada", "q1", "after the stall")
		if s := rings.sessions(td.ID); !slices.Equal(s, []string{live.sessionID()}) {
			t.Fatalf("after the stall todo %s was rung on %v", td.ID, s)
		}
		pushed = append(pushed, td.ID)
	}
	// Every todo reaches the live client: directly, handed on at once, or
	// (the ones written into the dead socket's buffers) by the failover.
	// The failover runs at every quiet gap, as its periodic loop would: on
	// a busy machine a ring into the dead socket can still be finishing its
	// write (up to WriteTimeout) when the first gap comes.
	got := map[string]bool{}
	failedOver := false
	deadline := time.After(wait)
	for len(got) < len(pushed) {
		select {
		case n := <-live.notes:
			_, meta := channelParams(t, n)
			got[meta["todo_id"]] = true
		case <-time.After(200 * time.Millisecond):
			failedOver = true
			e.svc.FlushRingRecords()
			e.clock.Advance(app.DefaultFailoverAfter)
			e.svc.FailoverOnce(e.ctx)
		case <-deadline:
			var missing []string
			for _, id := range pushed {
				if !got[id] {
					missing = append(missing, id)
				}
			}
			t.Fatalf("%d of %d todos never reached the reading session (failover ran: %v): %v", len(missing), len(pushed), failedOver, missing[:min(5, len(missing))])
		}
	}
	if testing.Verbose() {
		t.Logf("server log:\n%s", e.logs.String())
	}
	for _, si := range e.sessions(a.Agent.ID) {
		if si.ID == stalled && si.Streaming {
			t.Errorf("the stalled session still streams: %+v", si)
		}
	}
}

const (
	pingInterval = 10 * time.Second
	pingTimeout  = 5 * time.Second
)

// withPings turns the pings on: every pingInterval, answered within
// pingTimeout (design: Session liveness by ping).
func withPings(o *mcpserver.Options) { o.PingInterval, o.PingTimeout = pingInterval, pingTimeout }

// pingPeer is a session opened with plain HTTP whose client reads its
// stream all the time and answers the server's pings by POST — unless it is
// frozen: then the pings it reads wait, unanswered, until it thaws, as
// with a SIGSTOPped process whose socket buffers fill. It records the todo
// doorbells its stream carries.
type pingPeer struct {
	e        *env
	cred, id string

	mu      sync.Mutex
	frozen  bool
	pending []string // ping ids read while frozen
	todos   []string
}

func (e *env) pingPeer(cred string) *pingPeer {
	e.t.Helper()
	id, st := e.rawStreamSession(cred)
	p := &pingPeer{e: e, cred: cred, id: id}
	go p.read(st.Body)
	return p
}

func (p *pingPeer) read(body io.Reader) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m struct {
			ID     string `json:"id"`
			Method string `json:"method"`
			Params struct {
				Meta map[string]string `json:"meta"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(data), &m) != nil {
			continue
		}
		p.mu.Lock()
		switch {
		case m.Method == "ping" && p.frozen:
			p.pending = append(p.pending, m.ID)
			m.Method = ""
		case m.Method == domain.ChannelMethod && m.Params.Meta["todo_id"] != "":
			p.todos = append(p.todos, m.Params.Meta["todo_id"])
		}
		p.mu.Unlock()
		if m.Method == "ping" {
			p.answer(m.ID)
		}
	}
}

// answer POSTs the empty result of ping id. Failures are not reported
// here (the test may be over): the tests wait for PingAnswered.
func (p *pingPeer) answer(id string) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": map[string]any{}})
	req, err := http.NewRequest(http.MethodPost, p.e.url, strings.NewReader(string(body)))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.cred)
	req.Header.Set("Mcp-Session-Id", p.id)
	req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	if resp, err := p.e.ts.Client().Do(req); err == nil {
		resp.Body.Close()
	}
}

func (p *pingPeer) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// thaw answers the pings read while frozen.
func (p *pingPeer) thaw() {
	p.mu.Lock()
	p.frozen = false
	ids := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, id := range ids {
		p.answer(id)
	}
}

func (p *pingPeer) saw(todo string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.todos, todo)
}

// pingRound advances the clock by d, runs a ping scan and waits until every
// session of sent had its ping and every one of answering answered it.
func (e *env) pingRound(d time.Duration, sent, answering []string) {
	e.t.Helper()
	e.clock.Advance(d)
	e.srv.PingScan()
	for _, id := range sent {
		e.waitEvent(id, mcpserver.PingSent)
	}
	for _, id := range answering {
		e.waitEvent(id, mcpserver.PingAnswered)
	}
}

func sessionInfo(t testing.TB, e *env, agentID, id string) app.SessionInfo {
	t.Helper()
	for _, si := range e.sessions(agentID) {
		if si.ID == id {
			return si
		}
	}
	t.Fatalf("session %s not listed", id)
	return app.SessionInfo{}
}

// stall freezes p, a session of agent, and runs the two ping scans after
// which it is stalled: one pingInterval later a ping it leaves unanswered
// (live answer theirs), pingTimeout after that the stall. It returns when
// PingStalled was emitted.
func (e *env) stall(agent string, p *pingPeer, live []string) {
	e.t.Helper()
	p.freeze()
	e.pingRound(pingInterval, append([]string{p.id}, live...), live)
	if si := sessionInfo(e.t, e, agent, p.id); si.Stalled {
		e.t.Fatal("stalled before its ping timed out")
	}
	e.clock.Advance(pingTimeout)
	e.srv.PingScan()
	e.waitEvent(p.id, mcpserver.PingStalled)
}

// listenerAndPeer starts an env with the app clock and pings, vends ada
// (every verb, queue q1), opens a listening mcp-go client and a ping peer
// for ada and runs one ping round that both answer.
func listenerAndPeer(t *testing.T) (*env, app.VendResult, *agentClient, *pingPeer) {
	t.Helper()
	e := newEnv(t, withAppClock, withPings)
	a := e.vend("ada", allVerbs, "q1")
	live := e.listen(a.Credential)
	peer := e.pingPeer(a.Credential)
	both := []string{live.sessionID(), peer.id}
	e.pingRound(pingInterval, both, both)
	return e, a, live, peer
}

// TestFrozenSessionLosesItsDoorbellsByPing: one agent, a live mcp-go
// client and a peer that answered a ping and then froze. The doorbells the
// frozen one holds (written to its stream after its last answer, or still
// queued) reach the live one once a ping has gone unanswered — within
// ping_interval + ping_timeout of the freeze, long before
// doorbell.failover_after — and new ones go to the live one only.
func TestFrozenSessionLosesItsDoorbellsByPing(t *testing.T) {
	e, a, live, frozen := listenerAndPeer(t)
	frozen.freeze()
	rings := watchRings(e)

	onLive, onFrozen := rings.pushSplit(t, e, 6, live.sessionID(), frozen.id)
	todoNotes(t, live, onLive)
	testkit.Eventually(t, "the frozen session's stream carries its doorbells", wait, func() bool {
		return !slices.ContainsFunc(onFrozen, func(id string) bool { return !frozen.saw(id) })
	})
	// Written, never read: no ping answer came after them.
	e.pingRound(pingInterval, []string{live.sessionID(), frozen.id}, []string{live.sessionID()})
	e.clock.Advance(pingTimeout - 1)
	e.srv.PingScan()
	if sessionInfo(t, e, a.Agent.ID, frozen.id).Stalled {
		t.Fatal("stalled before ping_timeout")
	}
	e.clock.Advance(1) // interval + timeout after the freeze
	e.srv.PingScan()
	e.waitEvent(frozen.id, mcpserver.PingStalled)
	todoNotes(t, live, onFrozen)
	si := sessionInfo(t, e, a.Agent.ID, frozen.id)
	if !si.Stalled || si.Streaming {
		t.Errorf("frozen session listed %+v, want stalled and not streaming", si)
	}
	for range 4 {
		td := e.push("ada", "q1", "more")
		if s := rings.sessions(td.ID); !slices.Equal(s, []string{live.sessionID()}) {
			t.Errorf("todo %s rung on %v while the other session is stalled, want the live one", td.ID, s)
		}
	}
	live.noNoteOf(onFrozen)
}

// noNoteOf fails if a doorbell of one of todos arrives now (each was told
// once already).
func (ac *agentClient) noNoteOf(todos []string) {
	ac.t.Helper()
	for {
		select {
		case n := <-ac.notes:
			_, meta := channelParams(ac.t, n)
			if slices.Contains(todos, meta["todo_id"]) {
				ac.t.Errorf("doorbell of %s told twice", meta["todo_id"])
			}
		default:
			return
		}
	}
}

// TestPassiveSessionsNeverFailOverToAFrozenOne: two sessions whose
// clients answer pings but never claim, and a third that froze. Neither
// the first rings, the failovers between the passive two nor the sweep
// ring the frozen one.
func TestPassiveSessionsNeverFailOverToAFrozenOne(t *testing.T) {
	e := newEnv(t, withAppClock, withPings)
	a := e.vend("ada", allVerbs, "q1")
	p1 := e.listen(a.Credential)
	p2 := e.listen(a.Credential)
	frozen := e.pingPeer(a.Credential)
	passive := []string{p1.sessionID(), p2.sessionID()}
	all := append(slices.Clone(passive), frozen.id)
	e.pingRound(pingInterval, all, all)
	e.stall(a.Agent.ID, frozen, passive)
	rings := watchRings(e)

	var todos []string
	for range 6 {
		todos = append(todos, e.push("ada", "q1", "work").ID)
	}
	e.svc.FlushRingRecords()
	failedOver := 0
	for range 3 { // three failover_after periods: the pings go on meanwhile
		e.pingRound(app.DefaultFailoverAfter, passive, passive)
		failedOver += e.svc.FailoverOnce(e.ctx)
		if _, err := e.svc.SweepOnce(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	if failedOver == 0 {
		t.Fatal("no failover between the passive sessions; the test proves nothing")
	}
	for _, id := range todos {
		s := rings.sessions(id)
		if slices.Contains(s, frozen.id) {
			t.Errorf("todo %s rung on %v: the frozen session %s among them", id, s, frozen.id)
		}
	}
	for _, id := range passive {
		if si := sessionInfo(t, e, a.Agent.ID, id); si.Stalled || !si.Streaming {
			t.Errorf("passive session listed %+v, want streaming and not stalled", si)
		}
	}
}

// TestStalledSessionRungAgainOnceItAnswers: a session stalled by an
// unanswered ping is passed over; once its client answers (the ping it
// left waiting) it is listed streaming again and takes its share of the
// doorbells.
func TestStalledSessionRungAgainOnceItAnswers(t *testing.T) {
	e, a, live, peer := listenerAndPeer(t)
	e.stall(a.Agent.ID, peer, []string{live.sessionID()})
	rings := watchRings(e)
	for range 3 {
		td := e.push("ada", "q1", "while stalled")
		if s := rings.sessions(td.ID); !slices.Equal(s, []string{live.sessionID()}) {
			t.Fatalf("todo %s rung on %v while %s is stalled", td.ID, s, peer.id)
		}
	}

	// An answer that names another ping than the one in flight ends no
	// stall (nor does it make the next scan hand the doorbells on again).
	peer.answer("rollcall-ping-made-up")
	if si := sessionInfo(t, e, a.Agent.ID, peer.id); !si.Stalled {
		t.Fatalf("an answer to a ping not in flight ended the stall: %+v", si)
	}
	peer.thaw()
	if ev := e.waitEvent(peer.id, mcpserver.PingAnswered); ev.Reason != "recovered" {
		t.Errorf("answer after the stall: reason %q, want recovered", ev.Reason)
	}
	if si := sessionInfo(t, e, a.Agent.ID, peer.id); si.Stalled || !si.Streaming {
		t.Errorf("recovered session listed %+v, want streaming and not stalled", si)
	}
	var onPeer []string
	for range 4 {
		td := e.push("ada", "q1", "after")
		if s := rings.sessions(td.ID); slices.Equal(s, []string{peer.id}) {
			onPeer = append(onPeer, td.ID)
		}
	}
	if len(onPeer) == 0 {
		t.Fatal("the recovered session was not rung")
	}
	testkit.Eventually(t, "the recovered session reads its doorbells", wait, func() bool {
		return !slices.ContainsFunc(onPeer, func(id string) bool { return !peer.saw(id) })
	})
}

// TestGoClientAnswersPingsAndIsNeverDemoted: a real mcp-go client that
// never calls a tool answers every ping; round after round it stays
// streaming and not stalled, and the answers do not count as its client
// acting (LastRequestAt unchanged). A client that never answered a ping is
// not judged by pings at all.
func TestGoClientAnswersPingsAndIsNeverDemoted(t *testing.T) {
	e := newEnv(t, withAppClock, withPings)
	a := e.vend("ada", allVerbs, "q1")
	quiet := e.listen(a.Credential)
	mute, _ := e.rawStreamSession(a.Credential) // never answers a ping
	before := sessionInfo(t, e, a.Agent.ID, quiet.sessionID()).LastRequestAt
	e.pingRound(pingInterval, []string{quiet.sessionID(), mute}, []string{quiet.sessionID()})
	for round := range 4 {
		e.clock.Advance(pingTimeout)
		e.srv.PingScan()
		for _, id := range []string{quiet.sessionID(), mute} {
			if si := sessionInfo(t, e, a.Agent.ID, id); si.Stalled || !si.Streaming {
				t.Fatalf("round %d: session %s listed %+v, want streaming and not stalled", round, id, si)
			}
		}
		// The mute one's first ping is still in flight: it gets no other.
		e.pingRound(pingInterval-pingTimeout, []string{quiet.sessionID()}, []string{quiet.sessionID()})
	}
	if got := sessionInfo(t, e, a.Agent.ID, quiet.sessionID()).LastRequestAt; !got.Equal(before) {
		t.Errorf("LastRequestAt moved from %v to %v by ping answers", before, got)
	}
}

// TestRequestAfterAPingKeepsTheSessionUnstalled: a client that makes a
// request after a ping it leaves unanswered is not stalled (it acts); the
// ping counts as lost and the next one, also unanswered with no request
// since, stalls the session.
func TestRequestAfterAPingKeepsTheSessionUnstalled(t *testing.T) {
	e := newEnv(t, withAppClock, withPings)
	a := e.vend("ada", allVerbs, "q1")
	peer := e.pingPeer(a.Credential)
	e.pingRound(pingInterval, []string{peer.id}, []string{peer.id})
	peer.freeze()
	e.pingRound(pingInterval, []string{peer.id}, nil)
	e.clock.Advance(time.Second)
	wantStatus(t, e.raw(http.MethodPost, a.Credential, peer.id, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`), http.StatusOK)
	e.clock.Advance(pingTimeout)
	e.srv.PingScan()
	if si := sessionInfo(t, e, a.Agent.ID, peer.id); si.Stalled || !si.Streaming {
		t.Fatalf("session that made a request after the ping listed %+v, want streaming and not stalled", si)
	}
	e.pingRound(pingInterval-pingTimeout-time.Second, []string{peer.id}, nil) // a new ping
	e.clock.Advance(pingTimeout)
	e.srv.PingScan()
	e.waitEvent(peer.id, mcpserver.PingStalled)
}
