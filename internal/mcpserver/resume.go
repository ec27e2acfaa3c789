package mcpserver

// Resumable notification streams (design: Stream resumption): every
// message event written on a session's GET stream carries an SSE event id
// and is kept in the session's ssestream.Log; a GET with Last-Event-ID
// replays what the session's client missed after that id, before anything
// else is written on the new stream. This file adds the doorbells: which
// todo an event carries, those queued but not yet written, and what a
// reconnect digest must not count.

import (
	"encoding/json"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/ssestream"
)

// trimLocked drops events and held doorbells beyond the bounds: more than
// max, or older than window at now.
func (l *replayLog) trimLocked(now time.Time, max int, window time.Duration) {
	l.log.Trim(now, max, window)
	for id, h := range l.held {
		if now.Sub(h.at) > window {
			delete(l.held, id)
		}
	}
}

// todoOf returns the todo_id of a todo doorbell notification, else "".
func todoOf(data []byte) string {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta map[string]any `json:"meta"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &m) != nil || m.Method != domain.ChannelMethod {
		return ""
	}
	if k, _ := m.Params.Meta["kind"].(string); k == "digest" {
		return ""
	}
	id, _ := m.Params.Meta["todo_id"].(string)
	return id
}

// stamp is called with every message event about to be written on a GET
// stream, under st's lock. It gets the next id of the session's log, is
// recorded, and is written with its id line in the same write (a keepalive
// can never split it). Anything else is written as is. A stream superseded
// by a newer one writes no event (superseded): the event stays in the
// session's outbox, for the newer stream.
func (st *stream) stamp(b []byte) (out []byte, superseded bool) {
	data, ok := ssestream.MessageData(b)
	if !ok {
		return b, false
	}
	s, l := st.s, &st.sess.rp
	todo := todoOf(data)
	now := s.opts.Clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.current != nil && l.current != st {
		return nil, true
	}
	out = l.log.Append(b, todo, now)
	if h, ok := l.held[todo]; ok && todo != "" {
		if h.n--; h.n <= 0 {
			delete(l.held, todo)
		} else {
			l.held[todo] = h
		}
	}
	l.trimLocked(now, s.opts.ReplayEvents, s.opts.ReplayWindow)
	return out, false
}

// openStream runs once the head of a GET stream's SSE response is written,
// under st's lock, before any event is written on it: the stream becomes the
// session's current one (older streams stop writing events), and when the
// GET carries a Last-Event-ID this session issued, every logged event after
// it is written now, with its id. Any other Last-Event-ID (forged, another
// session's, malformed) is ignored: the GET answers as one without it. It
// also fixes what a reconnect digest sent while the stream opens must not
// count (ToldOnOpen).
func (st *stream) openStream() {
	s, l := st.s, &st.sess.rp
	now := s.opts.Clock.Now()
	var frames [][]byte
	missed := uint64(0)
	l.mu.Lock()
	l.current = st
	l.trimLocked(now, s.opts.ReplayEvents, s.opts.ReplayWindow)
	l.told = l.told[:0]
	for id := range l.held {
		l.told = append(l.told, id)
	}
	resume, ok := uint64(0), false
	if st.lastEventID != "" {
		resume, ok = l.log.Parse(st.lastEventID)
	}
	if ok {
		// On a resume the client has every event up to its id and gets
		// every later one now: all doorbells in the log reach it once.
		for _, ev := range l.log.Events() {
			if ev.Key != "" {
				l.told = append(l.told, ev.Key)
			}
		}
		frames, missed = l.log.After(resume)
	}
	l.mu.Unlock()
	switch {
	case st.lastEventID == "":
		return
	case !ok:
		s.log.Info("mcp stream resume with an unknown Last-Event-ID ignored", "session", st.sess.id)
		return
	case missed > 0:
		s.log.Warn("mcp stream resume: events beyond the replay bounds are lost", "session", st.sess.id,
			"missed", missed, "max_events", s.opts.ReplayEvents, "window", s.opts.ReplayWindow.String())
	}
	// Written outside l.mu (Notify must never wait on a slow client), still
	// under st's lock: no live event can reach this stream first, and older
	// streams requeue what they are handed now that st is current.
	replayed := 0
	if len(frames) > 0 {
		if err := st.WriteLocked(frames...); err != nil {
			st.EndLocked()
		} else {
			replayed = len(frames)
		}
	}
	s.log.Info("mcp stream resumed", "session", st.sess.id, "replayed", replayed, "of", len(frames))
}

// streamSettled runs after the stream's opening (and the reconnect digest
// it may send) is done: the told set is dropped so a later digest counts
// normally.
func (st *stream) streamSettled() {
	l := &st.sess.rp
	l.mu.Lock()
	l.told = l.told[:0]
	l.mu.Unlock()
}

// streamEnded runs when the stream's GET has returned: the log lets go of it.
func (st *stream) streamEnded() {
	l := &st.sess.rp
	l.mu.Lock()
	if l.current == st {
		l.current = nil
	}
	l.mu.Unlock()
}

// hold records a todo doorbell about to be queued on x (Notify), until a
// GET stream writes it; unhold undoes it when the queueing failed.
func (x *session) hold(m domain.ChannelMessage, now time.Time) string {
	id := m.Meta["todo_id"]
	if id == "" || m.Meta["kind"] == "digest" {
		return ""
	}
	l := &x.rp
	l.mu.Lock()
	if l.held == nil {
		l.held = map[string]heldDoorbell{}
	}
	h := l.held[id]
	h.n++
	h.at = now
	l.held[id] = h
	l.mu.Unlock()
	return id
}

func (x *session) unhold(id string) {
	if id == "" {
		return
	}
	l := &x.rp
	l.mu.Lock()
	if h, ok := l.held[id]; ok {
		if h.n--; h.n <= 0 {
			delete(l.held, id)
		} else {
			l.held[id] = h
		}
	}
	l.mu.Unlock()
}

// ToldOnOpen lists the todos whose doorbell the session's stream that is
// opening right now delivers without a digest's help: doorbells queued on
// the session and not yet written (they are written next, on this stream)
// and, when the GET resumed a known Last-Event-ID, every doorbell in the
// session's replay log (the client had them up to its id and gets the rest
// by replay). A reconnect digest does not count them again (design: Connect and reconnect digests, Stream resumption).
// Outside a stream's opening it is empty. Implements the
// optional app.ToldReporter of the session hub.
func (s *Server) ToldOnOpen(sessionID string) []string {
	s.mu.RLock()
	x := s.sessions[sessionID]
	s.mu.RUnlock()
	if x == nil {
		return nil
	}
	x.rp.mu.Lock()
	defer x.rp.mu.Unlock()
	return append([]string(nil), x.rp.told...)
}
