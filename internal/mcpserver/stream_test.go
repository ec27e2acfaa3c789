package mcpserver_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/mcpserver"
)

// rawGet initializes a session (streamSession) and opens its GET stream
// over a raw TCP connection speaking proto ("HTTP/1.1" or "HTTP/1.0"); once
// the server has opened the stream it returns the session id, the
// connection, the reader positioned after the response head, and the head's
// lines.
func (e *env) rawGet(cred, proto string) (string, net.Conn, *bufio.Reader, []string) {
	e.t.Helper()
	id := e.streamSession(cred)
	host := strings.TrimPrefix(e.ts.URL, "http://")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(wait))
	fmt.Fprintf(conn, "GET /mcp %s\r\nHost: %s\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: %s\r\nAccept: text/event-stream\r\n\r\n",
		proto, host, cred, id, mcp.ProtocolVersion20251125)
	br := bufio.NewReader(conn)
	var head []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			e.t.Fatalf("stream head %q: %v", head, err)
		}
		if line == "\r\n" {
			e.waitEvent(id, mcpserver.StreamOpened)
			return id, conn, br, head
		}
		head = append(head, strings.TrimRight(line, "\r\n"))
	}
}

// streamSession initializes a session with plain HTTP and returns its id.
func (e *env) streamSession(cred string) string {
	e.t.Helper()
	resp, body := e.bareInit(cred)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	wantStatus(e.t, e.raw(http.MethodPost, cred, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`), http.StatusAccepted)
	return id
}

// readUntil reads the stream until a line containing want, returning what
// it read.
func readUntil(t *testing.T, br *bufio.Reader, want string) string {
	t.Helper()
	var got strings.Builder
	for {
		line, err := br.ReadString('\n')
		got.WriteString(line)
		if strings.Contains(line, want) {
			return got.String()
		}
		if err != nil {
			t.Fatalf("no %q on the stream: %v; read %q", want, err, got.String())
		}
	}
}

// TestHijackedStreamSpeaksHTTP11: an HTTP/1.1 GET stream is answered 200
// text/event-stream with a chunked body and Connection: close (design:
// Idle streams); a doorbell comes as one chunk holding an SSE event with
// its id, and closing the session ends the body with the last chunk.
func TestHijackedStreamSpeaksHTTP11(t *testing.T) {
	e := newEnv(t)
	a := e.vend("ada", allVerbs, "q1")
	id, _, br, head := e.rawGet(a.Credential, "HTTP/1.1")
	joined := strings.ToLower(strings.Join(head, "\n"))
	for _, want := range []string{"http/1.1 200 ok", "content-type: text/event-stream", "transfer-encoding: chunked", "connection: close", "cache-control: no-cache"} {
		if !strings.Contains(joined, want) {
			t.Fatalf("head %q lacks %q", head, want)
		}
	}
	td := e.push("ada", "q1", "over a hijacked stream")
	got := readUntil(t, br, td.ID)
	if !strings.Contains(got, "id: ") || !strings.Contains(got, "event: message\n") || !strings.Contains(got, `"method":"notifications/claude/channel"`) {
		t.Fatalf("doorbell frame %q", got)
	}
	e.srv.CloseAgentSessions(a.Agent.ID, nil)
	for { // the terminating chunk, then the connection closes
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("no last chunk: %v", err)
		}
		if line == "0\r\n" {
			break
		}
	}
	if line, err := br.ReadString('\n'); err != nil || line != "\r\n" {
		t.Fatalf("after the last chunk: %q %v", line, err)
	}
	if b, err := br.ReadByte(); err == nil {
		t.Fatalf("byte %q after the end of the body", b)
	}
	e.waitEvent(id, mcpserver.StreamClosed)
}

// TestStreamOverHTTP10: a GET that cannot be hijacked as HTTP/1.1 is served
// through net/http's ResponseWriter (design: Idle streams): doorbells reach
// it the same way, and closing the session ends it.
func TestStreamOverHTTP10(t *testing.T) {
	e := newEnv(t)
	a := e.vend("ada", allVerbs, "q1")
	id, conn, br, head := e.rawGet(a.Credential, "HTTP/1.0")
	if len(head) == 0 || !strings.Contains(head[0], " 200 ") || strings.Contains(strings.ToLower(strings.Join(head, "\n")), "chunked") {
		t.Fatalf("head %q", head)
	}
	td := e.push("ada", "q1", "over HTTP/1.0")
	if got := readUntil(t, br, td.ID); !strings.Contains(got, "id: ") {
		t.Fatalf("doorbell frame %q", got)
	}
	if s := e.sessions(a.Agent.ID); len(s) != 1 || !s[0].Streaming {
		t.Fatalf("sessions: %+v", s)
	}
	conn.Close() // the client leaves: the stream ends
	e.waitEvent(id, mcpserver.StreamClosed)
	if s := e.sessions(a.Agent.ID); len(s) != 1 || s[0].Streaming {
		t.Fatalf("sessions after the client left: %+v", s)
	}
}
