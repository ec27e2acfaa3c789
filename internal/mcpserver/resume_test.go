package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/mcpserver"
)

// sseEvent is one event of a raw GET stream: its id field and its parsed
// channel notification (method, content, meta).
type sseEvent struct {
	id      string
	method  string
	content string
	meta    map[string]string
}

// rawStream is a GET notification stream read over plain HTTP, the way a
// client that resumes with Last-Event-ID (the TypeScript SDK, Claude Code)
// reads it.
type rawStream struct {
	t      testing.TB
	cancel context.CancelFunc
	events chan sseEvent
	status int
}

// stream opens a GET stream on the session, with Last-Event-ID when
// lastID is not empty.
func (e *env) stream(cred, session, lastID string) *rawStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		cancel()
		e.t.Fatalf("GET: %v", err)
	}
	rs := &rawStream{t: e.t, cancel: cancel, events: make(chan sseEvent, 64), status: resp.StatusCode}
	e.t.Cleanup(cancel)
	go func() {
		defer resp.Body.Close()
		defer close(rs.events)
		br := bufio.NewReader(resp.Body)
		var ev sseEvent
		var data string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if data != "" {
					var n struct {
						Method string `json:"method"`
						Params struct {
							Content string            `json:"content"`
							Meta    map[string]string `json:"meta"`
						} `json:"params"`
					}
					_ = json.Unmarshal([]byte(data), &n)
					ev.method, ev.content, ev.meta = n.Method, n.Params.Content, n.Params.Meta
					rs.events <- ev
				}
				ev, data = sseEvent{}, ""
			case strings.HasPrefix(line, ":"): // keepalive comment
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return rs
}

// next waits for the stream's next event.
func (rs *rawStream) next() sseEvent {
	rs.t.Helper()
	select {
	case ev, ok := <-rs.events:
		if !ok {
			rs.t.Fatal("stream ended")
		}
		return ev
	case <-time.After(wait):
		rs.t.Fatalf("no SSE event within %v", wait)
	}
	return sseEvent{}
}

// doorbellOf waits for the next event and checks it is the todo's
// doorbell, with an event id.
func (rs *rawStream) doorbellOf(td domain.Todo) sseEvent {
	rs.t.Helper()
	ev := rs.next()
	if ev.method != domain.ChannelMethod || ev.meta["todo_id"] != td.ID {
		rs.t.Fatalf("event %+v, want the doorbell of %s", ev, td.ID)
	}
	if ev.id == "" {
		rs.t.Fatalf("doorbell of %s has no SSE event id", td.ID)
	}
	return ev
}

// cut ends the stream from the client side and waits until the server saw
// it end.
func (e *env) cut(rs *rawStream, session string) {
	e.t.Helper()
	rs.cancel()
	e.waitEvent(session, mcpserver.StreamClosed)
}

func longReplay(o *mcpserver.Options) { o.ReplayWindow = time.Hour }

// A GET with the Last-Event-ID the client last saw replays, with their
// original ids, the events written after it that it missed; doorbells
// queued while it was away follow; the reconnect digest counts neither —
// nor the doorbells the client had — only what it was never told.
func TestResumeReplaysWhatTheSessionMissed(t *testing.T) {
	e := newEnv(t, longReplay)
	v := e.vend("ada", allScope, "q")
	d := e.push("ada", "q", "waiting before any session")
	ac := e.connect(v.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	id := ac.sessionID()

	s1 := e.stream(v.Credential, id, "")
	dig := s1.next()
	if dig.meta["kind"] != "digest" || dig.meta["pending"] != "1" || dig.meta["reason"] != app.ReasonConnect || dig.id == "" {
		t.Fatalf("first event %+v, want a connect digest (the first stream ever) of 1 with an id", dig)
	}
	a := e.push("ada", "q", "seen")
	evA := s1.doorbellOf(a)
	b := e.push("ada", "q", "written, then lost with the connection")
	evB := s1.doorbellOf(b)
	if evA.id == dig.id || evB.id == evA.id {
		t.Fatalf("event ids repeat: %s %s %s", dig.id, evA.id, evB.id)
	}
	e.cut(s1, id)
	c := e.push("ada", "q", "queued while the stream was cut")

	e.at(e.clock.Now().Add(doorbell.ReconnectDigestGate + time.Minute)) // the reconnect gate is open again
	s2 := e.stream(v.Credential, id, evA.id)
	if s2.status != http.StatusOK {
		t.Fatalf("resume status %d", s2.status)
	}
	if ev := s2.doorbellOf(b); ev.id != evB.id {
		t.Fatalf("replayed doorbell id %s, want the original %s", ev.id, evB.id)
	}
	evC := s2.doorbellOf(c)
	if evC.id == evB.id || evC.id == evA.id {
		t.Fatalf("queued doorbell reuses id %s", evC.id)
	}
	// The reconnect digest counts d only: a and b reached the client (up to
	// its Last-Event-ID, then by replay), c was written on this stream.
	dig2 := s2.next()
	if dig2.meta["kind"] != "digest" || dig2.meta["pending"] != "1" || dig2.meta["reason"] != app.ReasonReconnect || dig2.id == "" {
		t.Fatalf("after the resume: %+v, want a reconnect digest of 1 (todo %s only)", dig2, d.ID)
	}
	f := e.push("ada", "q", "fence")
	s2.doorbellOf(f) // nothing else came in between
}

// A todo whose doorbell was held across a stream cut is delivered on the
// new stream and not counted again in the reconnect digest: told once.
func TestHeldDoorbellIsNotCountedAgainOnReconnect(t *testing.T) {
	e := newEnv(t)
	v := e.vend("ada", allScope, "q")
	ac := e.connect(v.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	id := ac.sessionID()
	s1 := e.stream(v.Credential, id, "")
	e.waitEvent(id, mcpserver.StreamOpened)
	e.cut(s1, id)
	held := e.push("ada", "q", "rung while no stream was open")

	s2 := e.stream(v.Credential, id, "") // no Last-Event-ID
	s2.doorbellOf(held)
	f := e.push("ada", "q", "fence")
	// A reconnect digest, had one been sent, would come before the fence.
	s2.doorbellOf(f)
}

// A Last-Event-ID this session never issued — another session's, a forged
// one, garbage — replays nothing and the GET answers as without it: the
// reconnect digest tells what the client was not given.
func TestResumeWithForeignOrForgedIDAnswersNormally(t *testing.T) {
	e := newEnv(t, longReplay)
	v := e.vend("ada", allScope, "q")
	one := e.connect(v.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	two := e.connect(v.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	s1 := e.stream(v.Credential, one.sessionID(), "")
	e.waitEvent(one.sessionID(), mcpserver.StreamOpened)
	a := e.push("ada", "q", "on session one")
	evA := s1.doorbellOf(a)
	e.cut(s1, one.sessionID())

	// Session one's id on session two: no replay of a; the reconnect digest
	// counts it instead.
	s2 := e.stream(v.Credential, two.sessionID(), evA.id)
	if s2.status != http.StatusOK {
		t.Fatalf("foreign id: status %d, want 200", s2.status)
	}
	if ev := s2.next(); ev.meta["kind"] != "digest" || ev.meta["pending"] != "1" {
		t.Fatalf("foreign id: first event %+v, want the reconnect digest of 1, no replay", ev)
	}
	b := e.push("ada", "q", "live on session two")
	s2.doorbellOf(b)
	e.cut(s2, two.sessionID())

	tag, _, _ := strings.Cut(evA.id, ".")
	for _, forged := range []string{tag + ".999999", tag + ".0x1", "garbage", "1", tag + "." + strings.Repeat("9", 30)} {
		s := e.stream(v.Credential, one.sessionID(), forged)
		if s.status != http.StatusOK {
			t.Fatalf("forged %q: status %d, want 200", forged, s.status)
		}
		e.waitEvent(one.sessionID(), mcpserver.StreamOpened)
		f := e.push("ada", "q", "fence "+forged)
		s.doorbellOf(f) // the first event: nothing replayed (the gate holds the digest back)
		e.cut(s, one.sessionID())
	}
}

// The replay log is bounded per session: at most ReplayEvents events, none
// older than ReplayWindow.
func TestReplayLogIsBounded(t *testing.T) {
	e := newEnv(t, func(o *mcpserver.Options) { o.ReplayEvents = 3; o.ReplayWindow = 5 * time.Minute; o.Clock = appClock })
	v := e.vend("ada", allScope, "q", "fence")
	ac := e.connect(v.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	id := ac.sessionID()
	s1 := e.stream(v.Credential, id, "")
	e.waitEvent(id, mcpserver.StreamOpened)
	var tds []domain.Todo
	var evs []sseEvent
	for i := range 5 {
		td := e.push("ada", "q", "t"+string(rune('a'+i)))
		tds = append(tds, td)
		evs = append(evs, s1.doorbellOf(td))
	}
	e.cut(s1, id)

	// By count: the last three are kept and replayed.
	s2 := e.stream(v.Credential, id, evs[0].id)
	for i := 2; i < 5; i++ {
		if ev := s2.doorbellOf(tds[i]); ev.id != evs[i].id {
			t.Fatalf("replayed id %s, want %s", ev.id, evs[i].id)
		}
	}
	// The reconnect digest counts the two that fell out of the log.
	if ev := s2.next(); ev.meta["kind"] != "digest" || ev.meta["pending"] != "2" {
		t.Fatalf("after the replay: %+v, want a reconnect digest of 2", ev)
	}
	e.cut(s2, id)

	// By age: six minutes later nothing is left to replay.
	e.at(e.clock.Now().Add(6 * time.Minute))
	s3 := e.stream(v.Credential, id, evs[3].id)
	e.waitEvent(id, mcpserver.StreamOpened)
	f := e.push("ada", "fence", "fence")
	s3.doorbellOf(f)
}
