package mcpserver_test

import (
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

// rawStreamSession opens a session with plain HTTP — initialize,
// notifications/initialized, then a GET stream whose body the test never
// reads (a frozen client) — and returns its id and the open stream.
func (e *env) rawStreamSession(cred string) (string, *http.Response) {
	e.t.Helper()
	resp, body := e.bareInit(cred)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	wantStatus(e.t, e.raw(http.MethodPost, cred, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`), http.StatusAccepted)
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
	got := map[string]bool{}
	failedOver := false
	deadline := time.After(wait)
	for len(got) < len(pushed) {
		select {
		case n := <-live.notes:
			_, meta := channelParams(t, n)
			got[meta["todo_id"]] = true
		case <-time.After(200 * time.Millisecond):
			if !failedOver {
				failedOver = true
				e.svc.FlushRingRecords()
				e.clock.Advance(app.DefaultFailoverAfter)
				e.svc.FailoverOnce(e.ctx)
			}
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
