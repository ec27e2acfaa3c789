// Package ssestream holds one lean GET stream of server-sent events
// (design: Idle streams, Stream writes): a stream that is idle nearly all
// its life costs one small goroutine and its connection, not a handler
// goroutine and net/http's buffers. An HTTP/1.1 GET is hijacked: the SSE
// response head is written on the connection by hand (chunked,
// Connection: close, so the connection is never reused after the stream),
// the handler returns, and one goroutine reads the connection only to
// learn that the client went away. Other requests (HTTP/1.0, HTTP/2, a
// ResponseWriter that cannot be hijacked) are held by their handler. Every
// write is bounded by a deadline and written as one chunk, so a keepalive
// never splits an event. It also holds the SSE event ids a stream's
// owner stamps on its events for resumption (ids.go).
//
// What is written, when, and what a session does when its stream ends is
// the owner's (internal/mcpserver): this package knows frames, not
// sessions.
package ssestream

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/workgroup"
)

// Stream is one GET response of server-sent events. Its lock (Lock,
// Unlock) orders the writes: whoever writes holds it.
type Stream struct {
	writeTimeout time.Duration
	ended        chan struct{} // closed by Cancel: the stream is to end
	endOnce      sync.Once

	mu   sync.Mutex
	conn net.Conn            // the hijacked connection; nil in ResponseWriter mode
	w    http.ResponseWriter // ResponseWriter mode only
	rc   *http.ResponseController
	done bool // ended or a write failed: nothing more is written
}

// New returns a stream whose every write is bounded by writeTimeout.
func New(writeTimeout time.Duration) *Stream {
	return &Stream{writeTimeout: writeTimeout, ended: make(chan struct{})}
}

// Hooks are what the stream's owner does at the stream's turns.
type Hooks struct {
	// OpenedLocked runs once the head is written, with the stream locked,
	// before anything else can be written on it (a replay goes here).
	OpenedLocked func()
	// Opened runs after OpenedLocked, unlocked.
	Opened func()
	// Released runs once, when the stream has ended and let go of its
	// connection, possibly after Serve returned; also when the head could
	// not be written.
	Released func()
}

// Serve writes the response head, runs h's hooks and holds the stream: a
// hijacked connection by its reader goroutine (Serve returns at once),
// else until r's context ends or Cancel.
func (st *Stream) Serve(w http.ResponseWriter, r *http.Request, h Hooks) {
	if err := st.start(w, r); err != nil {
		st.mu.Lock()
		st.done = true
		st.mu.Unlock()
		st.Cancel()
		h.Released()
		return
	}
	st.mu.Lock()
	h.OpenedLocked()
	st.mu.Unlock()
	h.Opened()

	if st.conn != nil {
		go st.hold(h.Released)
		return
	}
	select {
	case <-r.Context().Done():
	case <-st.ended:
	}
	st.Cancel()
	st.mu.Lock()
	st.done = true // net/http ends the body when the handler returns
	st.mu.Unlock()
	h.Released()
}

// start writes the response head: on a hijackable HTTP/1.1 connection by
// hand (chunked body, Connection: close, so the connection is never reused
// after the stream), else through w.
func (st *Stream) start(w http.ResponseWriter, r *http.Request) error {
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
			_ = conn.SetWriteDeadline(time.Now().Add(st.writeTimeout))
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
	_ = rc.SetWriteDeadline(time.Now().Add(st.writeTimeout))
	err := rc.Flush()
	_ = rc.SetWriteDeadline(time.Time{})
	return err
}

// hold is the one goroutine of an idle hijacked stream: it reads (and
// drops) what the client sends until the connection fails or closes, or
// Cancel wakes it, then ends the body, closes the connection and runs
// released.
func (st *Stream) hold(released func()) {
	buf := make([]byte, 64)
	for {
		if _, err := st.conn.Read(buf); err != nil {
			break
		}
	}
	st.Cancel()
	st.mu.Lock()
	if !st.done {
		// The terminating chunk: the client sees the body end, not a reset.
		_ = st.conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(st.conn, "0\r\n\r\n")
	}
	st.done = true
	_ = st.conn.Close()
	st.mu.Unlock()
	released()
}

// Cancel asks the stream to end: its holder (the reader goroutine of a
// hijacked connection, else the handler) wakes, writes the end of the
// body when it can and lets go of the connection. It never blocks and may
// be called with the stream locked, any number of times.
func (st *Stream) Cancel() {
	st.endOnce.Do(func() {
		close(st.ended)
		if st.conn != nil {
			_ = st.conn.SetReadDeadline(time.Now()) // wakes the reader
		}
	})
}

// Ending reports whether Cancel was called.
func (st *Stream) Ending() bool {
	select {
	case <-st.ended:
		return true
	default:
		return false
	}
}

// Lock locks the stream for writing.
func (st *Stream) Lock() { st.mu.Lock() }

// Unlock unlocks the stream.
func (st *Stream) Unlock() { st.mu.Unlock() }

// DoneLocked reports whether nothing more is written: the stream ended or
// a write failed. Callers hold the lock.
func (st *Stream) DoneLocked() bool { return st.done }

// EndLocked ends the stream after a failed write: nothing more is
// written, and it is cancelled. Callers hold the lock.
func (st *Stream) EndLocked() {
	st.done = true
	st.Cancel()
}

// WriteLocked writes frames and flushes them, as one chunk on a hijacked
// connection (a keepalive can never split an event), bounded by the write
// timeout. Callers hold the lock and decide what a failure means.
func (st *Stream) WriteLocked(frames ...[]byte) error {
	if st.done {
		return os.ErrClosed
	}
	deadline := time.Now().Add(st.writeTimeout)
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

// Keepalive writes one SSE comment, bounded by the write timeout. A
// stream busy writing is skipped (it is alive); a failed write ends the
// stream.
func (st *Stream) Keepalive() {
	if !st.mu.TryLock() {
		return
	}
	defer st.mu.Unlock()
	if st.done {
		return
	}
	if err := st.WriteLocked([]byte(": keepalive\n\n")); err != nil {
		st.EndLocked()
	}
}

// KeepAlive writes a keepalive on every stream open returns, at every
// tick until stop, from this one goroutine (no per-stream timer or
// goroutine). open appends the streams open now to what it is given.
func KeepAlive(stop <-chan struct{}, tick <-chan time.Time, open func([]*Stream) []*Stream) {
	var batch []*Stream
	workgroup.Every(stop, tick, func() {
		batch = open(batch[:0])
		for _, st := range batch {
			st.Keepalive()
		}
		clear(batch)
	})
}
