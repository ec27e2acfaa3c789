package mcpserver

// GET notification streams (design: Idle streams, Stream writes). This
// package serves them itself, not mcp-go: mcp-go holds each GET with its
// handler goroutine, a forwarder goroutine and net/http's buffers, about
// 40 KiB a stream, for a stream that is idle nearly all its life. The
// stream is an ssestream.Stream (a hijacked HTTP/1.1 connection held by one
// small reader goroutine); this file does a session's part: one stream at
// a time, the replay on open, and the drain goroutine that writes the
// session's outbox, which exists only while there is something to write.

import (
	"errors"
	"net/http"
	"os"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/ssestream"
)

// maxOutbox bounds a session's notifications not yet written (Notify
// answers ErrBufferFull beyond it). It is twice maxQueued so that the
// doorbells handed on from another session of the agent at once (at most
// maxQueued, design: Redelivery on session loss) fit in a reading
// session's outbox beside new ones; the outbox is allocated by need, so an
// idle session pays nothing for the bound.
const maxOutbox = 2 * maxQueued

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

// serveStream serves a GET: it replaces any older stream of the session,
// writes the SSE response head, replays after Last-Event-ID (resume.go)
// and hands the stream its holder. It ends the request admitted by enter
// (s.leave) when the stream ends, which may be after it returns.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, x *session) {
	st := &stream{Stream: ssestream.New(s.opts.WriteTimeout), s: s, sess: x, lastEventID: r.Header.Get("Last-Event-ID")}
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
		o.Cancel()
	}
	st.Serve(w, r, ssestream.Hooks{
		OpenedLocked: st.openStream, // replay after Last-Event-ID, before any live event
		Opened: func() {
			st.opened()
			st.streamSettled()
			s.kick(x)
		},
		Released: st.release,
	})
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
	x.ping.Reset() // a stall ends with a new stream
	first := x.initialized && !x.gone && !s.otherStreamingLocked(x)
	s.mu.Unlock()
	if first {
		s.streamOpened(x.agentID)
	}
	s.emit(Event{Kind: StreamOpened, SessionID: x.id, AgentID: x.agentID})
}

// failedLocked ends the stream after a failed write; a write past its
// deadline marks the session stalled (not preferred for doorbells).
// Callers hold st.mu.
func (st *stream) failedLocked(err error) {
	st.EndLocked()
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
	st.Lock()
	defer st.Unlock()
	if st.DoneLocked() {
		return os.ErrClosed
	}
	out, superseded := st.stamp(b)
	if superseded {
		return errSuperseded
	}
	if err := st.WriteLocked(out); err != nil {
		st.failedLocked(err)
		return err
	}
	st.s.markWritten(st.sess, b)
	return nil
}

// liveStreamLocked returns x's open stream that is not ending, or nil.
// Callers hold s.mu.
func (x *session) liveStreamLocked() *stream {
	st := x.openStreamLocked()
	if st == nil || st.Ending() {
		return nil
	}
	return st
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
			f, err := ssestream.MessageJSON(n)
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
