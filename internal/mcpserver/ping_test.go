package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/mcpserver"
	"github.com/rollcall/rollcall/internal/testkit"
)

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
