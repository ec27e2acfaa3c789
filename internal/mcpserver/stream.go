package mcpserver

// GET notification streams (design: Idle streams, Stream writes). This
// package writes them itself, not mcp-go: mcp-go holds each GET with its
// handler goroutine, a forwarder goroutine and net/http's buffers, about
// 40 KiB a stream, for a stream that is idle nearly all its life. Here an
// HTTP/1.1 GET is hijacked: the SSE response head is written on the
// connection, the handler returns (net/http lets go of its buffers and its
// goroutine), and one small goroutine reads the connection only to learn
// that the client went away. Notifications are written by a drain
// goroutine that exists only while the session's outbox has something to
// write.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/domain"
)

// maxOutbox bounds a session's notifications not yet written (Notify
// answers ErrBufferFull beyond it).
const maxOutbox = 100

// errSuperseded: a newer stream of the session took over; the event goes
// back to the outbox for it.
var errSuperseded = errors.New("mcpserver: stream superseded")

// channelNote is a notifications/claude/channel of m (design: Doorbell
// message).
func channelNote(m domain.ChannelMessage) mcp.JSONRPCNotification {
	meta := m.Meta
	if meta == nil {
		meta = map[string]string{}
	}
	return mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: domain.ChannelMethod,
		Params: mcp.NotificationParams{AdditionalFields: map[string]any{"content": m.Content, "meta": meta}}}}
}

// eventFrame is n as an SSE message event, "event: message\ndata: <json>\n\n".
func eventFrame(n mcp.JSONRPCNotification) ([]byte, error) {
	data, err := json.Marshal(n)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(sseMessagePrefix)+len(data)+2)
	out = append(out, sseMessagePrefix...)
	out = append(out, data...)
	return append(out, '\n', '\n'), nil
}

// serveStream serves a GET: it replaces any older stream of the session,
// writes the SSE response head, replays after Last-Event-ID (resume.go)
// and hands the stream its holder. It ends the request admitted by enter
// (s.leave) when the stream ends, which may be after it returns.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, x *session) {
	st := &stream{s: s, sess: x, lastEventID: r.Header.Get("Last-Event-ID"), ended: make(chan struct{})}
	s.mu.Lock()
	if x.gone {
		s.mu.Unlock()
		s.leave(x)
		writeProblem(w, http.StatusNotFound, domain.CodeNotFound, "session not found: it has ended; send initialize to open a new one")
		return
	}
	older := x.streams
	x.streams = []*stream{st}
	s.mu.Unlock()
	for _, o := range older {
		o.cancel()
	}

	if err := st.start(w, r); err != nil {
		st.mu.Lock()
		st.done = true
		st.mu.Unlock()
		st.cancel()
		st.release()
		return
	}
	st.mu.Lock()
	st.openStream() // replay after Last-Event-ID, before any live event
	st.mu.Unlock()
	st.opened()
	st.streamSettled()
	s.kick(x)

	if st.conn != nil {
		go st.hold()
		return
	}
	select {
	case <-r.Context().Done():
	case <-st.ended:
	}
	st.cancel()
	st.mu.Lock()
	st.done = true // net/http ends the body when the handler returns
	st.mu.Unlock()
	st.release()
}

// start writes the response head: on a hijackable HTTP/1.1 connection by
// hand (chunked body, Connection: close, so the connection is never reused
// after the stream), else through w.
func (st *stream) start(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	if r.ProtoMajor == 1 && r.ProtoMinor >= 1 {
		conn, brw, err := rc.Hijack()
		if err == nil {
			// brw's buffers are dropped with it: the client sends nothing
			// more on a GET stream that matters (hold discards it).
			_ = brw
			h.Set("Transfer-Encoding", "chunked")
			h.Set("Connection", "close")
			h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
			var head bytes.Buffer
			head.WriteString("HTTP/1.1 200 OK\r\n")
			_ = h.Write(&head)
			head.WriteString("\r\n")
			st.mu.Lock()
			st.conn = conn
			_ = conn.SetWriteDeadline(time.Now().Add(st.s.opts.WriteTimeout))
			_, err = conn.Write(head.Bytes())
			_ = conn.SetWriteDeadline(time.Time{})
			st.mu.Unlock()
			if err != nil {
				_ = conn.Close()
			}
			return err
		}
	}
	st.w, st.rc = w, rc
	st.mu.Lock()
	defer st.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	_ = rc.SetWriteDeadline(time.Now().Add(st.s.opts.WriteTimeout))
	err := rc.Flush()
	_ = rc.SetWriteDeadline(time.Time{})
	return err
}

// hold is the one goroutine of an idle hijacked stream: it reads (and
// drops) what the client sends until the connection fails or closes, or
// cancel wakes it, then ends the body and closes the connection.
func (st *stream) hold() {
	buf := make([]byte, 64)
	for {
		if _, err := st.conn.Read(buf); err != nil {
			break
		}
	}
	st.cancel()
	st.mu.Lock()
	if !st.done {
		// The terminating chunk: the client sees the body end, not a reset.
		_ = st.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(st.conn, "0\r\n\r\n")
	}
	st.done = true
	_ = st.conn.Close()
	st.mu.Unlock()
	st.release()
}

// release does the session's bookkeeping of an ended stream: the log lets
// go of it, doorbells it did not write go to another session when the
// session has no stream left (design: Redelivery on session loss), and
// the request ends.
func (st *stream) release() {
	s, x := st.s, st.sess
	st.streamEnded()
	s.mu.Lock()
	x.streams = slices.DeleteFunc(x.streams, func(o *stream) bool { return o == st })
	var lost []domain.ChannelMessage
	if len(x.streams) == 0 && !x.gone && !s.closing {
		// What is still in the outbox waits for a stream that may never
		// come (a killed client). Hand the doorbells to another session
		// now; a client that comes back may see a few twice.
		lost = x.takeQueuedLocked()
	}
	s.mu.Unlock()
	s.redeliver(x, lost)
	s.leave(x)
	if st.open.Load() {
		s.emit(Event{Kind: StreamClosed, SessionID: x.id, AgentID: x.agentID})
	}
}

// opened runs once, after the head is written and the replay is done.
func (st *stream) opened() {
	s, x := st.s, st.sess
	s.mu.Lock()
	st.open.Store(true)
	x.streamed = true
	x.stalled = false
	x.pingResetLocked()
	first := x.initialized && !x.gone && !s.otherStreamingLocked(x)
	s.mu.Unlock()
	if first {
		s.streamOpened(x.agentID)
	}
	s.emit(Event{Kind: StreamOpened, SessionID: x.id, AgentID: x.agentID})
}

// writeLocked writes frames and flushes them, as one chunk on a hijacked
// connection (a keepalive can never split an event), bounded by
// Options.WriteTimeout. Callers hold st.mu and decide what a failure means.
func (st *stream) writeLocked(frames ...[]byte) error {
	if st.done {
		return os.ErrClosed
	}
	deadline := time.Now().Add(st.s.opts.WriteTimeout)
	if st.conn != nil {
		n := 0
		for _, f := range frames {
			n += len(f)
		}
		if n == 0 {
			return nil // an empty chunk would end the body
		}
		buf := make([]byte, 0, n+20)
		buf = strconv.AppendUint(buf, uint64(n), 16)
		buf = append(buf, '\r', '\n')
		for _, f := range frames {
			buf = append(buf, f...)
		}
		buf = append(buf, '\r', '\n')
		_ = st.conn.SetWriteDeadline(deadline)
		_, err := st.conn.Write(buf)
		_ = st.conn.SetWriteDeadline(time.Time{})
		return err
	}
	_ = st.rc.SetWriteDeadline(deadline)
	defer func() { _ = st.rc.SetWriteDeadline(time.Time{}) }()
	for _, f := range frames {
		if _, err := st.w.Write(f); err != nil {
			return err
		}
	}
	return st.rc.Flush()
}

// failedLocked ends the stream after a failed write; a write past its
// deadline marks the session stalled (not preferred for doorbells).
// Callers hold st.mu.
func (st *stream) failedLocked(err error) {
	st.done = true
	st.cancel()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		s, x := st.s, st.sess
		s.mu.Lock()
		x.stalled = true
		s.mu.Unlock()
		s.log.Warn("mcp stream write stalled; the stream is closed and the session not preferred for doorbells", "session", x.id, "timeout", s.opts.WriteTimeout)
	}
}

// writeEvent writes one message event of the outbox with its SSE id
// (resume.go). A doorbell of the session's queue that it carried is no
// longer queued.
func (st *stream) writeEvent(b []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return os.ErrClosed
	}
	out, superseded := st.stamp(b)
	if superseded {
		return errSuperseded
	}
	if err := st.writeLocked(out); err != nil {
		st.failedLocked(err)
		return err
	}
	st.s.markWritten(st.sess, b)
	return nil
}

// ping writes one SSE comment, bounded by Options.WriteTimeout. A stream
// busy writing is skipped (it is alive); a failed write ends the stream.
func (st *stream) ping() {
	if !st.mu.TryLock() {
		return
	}
	defer st.mu.Unlock()
	if st.done {
		return
	}
	if err := st.writeLocked([]byte(": keepalive\n\n")); err != nil {
		st.done = true
		st.cancel()
	}
}

// liveStreamLocked returns x's open stream that is not ending, or nil.
// Callers hold s.mu.
func (x *session) liveStreamLocked() *stream {
	st := x.openStreamLocked()
	if st == nil || st.isEnding() {
		return nil
	}
	return st
}

// isEnding reports whether cancel was called.
func (st *stream) isEnding() bool {
	select {
	case <-st.ended:
		return true
	default:
		return false
	}
}

// kick starts the drain goroutine of x when its outbox holds something, a
// stream is open and none is draining.
func (s *Server) kick(x *session) {
	s.mu.Lock()
	start := !x.writing && len(x.outbox) > 0 && !x.gone && x.liveStreamLocked() != nil
	if start {
		x.writing = true
	}
	s.mu.Unlock()
	if start {
		go s.drain(x)
	}
}

// drain writes x's outbox on its open stream, oldest first, and ends when
// the outbox is empty or no stream is open. An event the stream could not
// write stays in the outbox, in order, for the next stream.
func (s *Server) drain(x *session) {
	for {
		s.mu.Lock()
		st := x.liveStreamLocked()
		if st == nil || len(x.outbox) == 0 || x.gone {
			x.writing = false
			s.mu.Unlock()
			return
		}
		batch := x.outbox
		x.outbox = nil
		s.mu.Unlock()
		for i, n := range batch {
			f, err := eventFrame(n)
			if err != nil {
				s.log.Error("notification dropped: it does not encode", "session", x.id, "method", n.Method, "err", err)
				continue
			}
			if err := st.writeEvent(f); err != nil {
				s.mu.Lock()
				x.outbox = append(slices.Clip(batch[i:]), x.outbox...)
				if len(x.outbox) > maxOutbox {
					x.outbox = x.outbox[len(x.outbox)-maxOutbox:]
				}
				s.mu.Unlock()
				break
			}
			batch[i] = mcp.JSONRPCNotification{}
		}
	}
}
