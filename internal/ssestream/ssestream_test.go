package ssestream_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/ssestream"
)

// An id parses only in the series that issued it and never beyond its
// last number; After replays with ids and counts what was trimmed.
func TestLogIDsAndReplay(t *testing.T) {
	var a, b ssestream.Log
	now := time.Unix(0, 0)
	for i := range 3 {
		a.Append(ssestream.MessageFrame(fmt.Appendf(nil, `{"n":%d}`, i)), "", now)
	}
	b.Append(ssestream.MessageFrame([]byte(`{}`)), "", now)
	first := string(a.Append(ssestream.MessageFrame([]byte(`{"n":3}`)), "k", now))
	id := strings.TrimPrefix(strings.SplitN(first, "\n", 2)[0], "id: ")
	if seq, ok := a.Parse(id); !ok || seq != 4 {
		t.Fatalf("Parse(%q) = %d %v, want 4", id, seq, ok)
	}
	if _, ok := b.Parse(id); ok {
		t.Fatal("another series parsed the id")
	}
	a.Trim(now, 2, time.Hour)
	frames, missed := a.After(1)
	if len(frames) != 2 || missed != 1 {
		t.Fatalf("After(1) = %d frames, missed %d; want 2, 1", len(frames), missed)
	}
	if !strings.HasPrefix(string(frames[1]), "id: "+id+"\nevent: message\ndata: ") {
		t.Fatalf("replayed frame %q lacks its id", frames[1])
	}
}

// A ping unanswered for the timeout makes the stream late only once the
// client answered one before; the answer ends the stall.
func TestPing(t *testing.T) {
	var p ssestream.Ping
	t0 := time.Unix(100, 0)
	id, _, _ := p.Scan(t0, time.Second, time.Second, time.Time{})
	if id == "" {
		t.Fatal("no ping due")
	}
	if _, late, _ := p.Scan(t0.Add(2*time.Second), time.Second, time.Second, time.Time{}); late {
		t.Fatal("late before any answer")
	}
	if ok, first, _ := p.Answer(id); !ok || !first {
		t.Fatalf("Answer = %v %v", ok, first)
	}
	id, _, _ = p.Scan(t0.Add(3*time.Second), time.Second, time.Second, time.Time{})
	if _, late, _ := p.Scan(t0.Add(5*time.Second), time.Second, time.Second, time.Time{}); !late || !p.Late() {
		t.Fatal("not late after an unanswered ping")
	}
	if ok, _, recovered := p.Answer(id); !ok || !recovered || p.Late() {
		t.Fatal("the answer did not end the stall")
	}
}

// On HTTP/1.1 the stream is hijacked: a chunked head, each write one
// chunk, and the terminating chunk when it is cancelled.
func TestHijackedStream(t *testing.T) {
	released := make(chan struct{})
	var st *ssestream.Stream
	opened := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st = ssestream.New(time.Second)
		st.Serve(w, r, ssestream.Hooks{OpenedLocked: func() {}, Opened: func() { close(opened) }, Released: func() { close(released) }})
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.TransferEncoding == nil || resp.Header.Get("Content-Type") != "text/event-stream" || !resp.Close {
		t.Fatalf("head %v %v close=%v", resp.TransferEncoding, resp.Header, resp.Close)
	}
	<-opened
	st.Lock()
	err = st.WriteLocked(ssestream.MessageFrame([]byte(`{"a":1}`)))
	st.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event: message\n" {
		t.Fatalf("read %q %v", line, err)
	}
	st.Cancel()
	<-released
}
