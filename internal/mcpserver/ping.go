package mcpserver

// Session liveness by ping (design: Session liveness by ping): every
// Options.PingInterval the server writes a JSON-RPC ping request on each
// initialized session's open GET stream; the client answers with a POSTed
// response. A session whose client has answered a ping before and leaves
// one unanswered for Options.PingTimeout is stalled: the doorbells it
// holds unread (queued, or written after its last answered ping) go to
// another session of the agent at once, and it is listed as not streaming
// and stalled, so the doorbell rings it last and never fails over to it.
// Its next answer, request or stream ends the stall. A quiet client that
// answers is never stalled: the ping asks the client process, not its
// model, whether it reads.

import (
	"encoding/json"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/ssestream"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// pingEvery is the period of the ping scan: the smaller of interval and
// timeout, so a ping is sent and found late within one step of its due
// time.
func pingEvery(interval, timeout time.Duration) time.Duration {
	return max(min(interval, timeout), time.Millisecond)
}

// pingLoop runs pingScan every pingEvery, from this one goroutine.
func (s *Server) pingLoop() {
	defer s.loops.Done()
	t := s.opts.Clock.NewTicker(pingEvery(s.opts.PingInterval, s.opts.PingTimeout))
	defer t.Stop()
	workgroup.Every(s.stop, t.Chan(), s.pingScan)
}

type pingOut struct {
	st *stream
	id string
}

// pingScan stalls the sessions whose ping in flight is PingTimeout old
// and whose client has made no request since (only those whose client
// answered one before: a client that never answers pings is not judged by
// them), and sends a ping on every other open stream whose last ping is
// PingInterval old.
func (s *Server) pingScan() {
	now := s.opts.Clock.Now()
	var out []pingOut
	var late []*session
	var readSeq []uint64
	s.mu.Lock()
	for _, x := range s.sessions {
		st := x.openStreamLocked()
		if st == nil || !x.initialized || x.gone || !x.registered {
			continue
		}
		switch id, stalled, seq := x.ping.Scan(now, s.opts.PingInterval, s.opts.PingTimeout, x.lastPost); {
		case stalled:
			late = append(late, x)
			readSeq = append(readSeq, seq)
		case id != "":
			out = append(out, pingOut{st, id})
		}
	}
	var queued [][]domain.ChannelMessage
	for _, x := range late {
		queued = append(queued, x.takeQueuedLocked())
	}
	s.mu.Unlock()
	for i, x := range late {
		msgs := x.unreadSince(readSeq[i], queued[i])
		s.log.Warn("mcp session stalled: its client left a ping unanswered; its unread doorbells go to another session",
			"session", x.id, "agent_id", x.agentID, "timeout", s.opts.PingTimeout, "doorbells", len(msgs))
		s.redeliver(x, msgs)
		s.emit(Event{Kind: PingStalled, SessionID: x.id, AgentID: x.agentID})
	}
	for _, o := range out {
		o.st.writePing(o.id)
	}
}

// openStreamLocked returns x's open GET stream, or nil. Callers hold s.mu.
func (x *session) openStreamLocked() *stream {
	for i := len(x.streams) - 1; i >= 0; i-- {
		if x.streams[i].open.Load() {
			return x.streams[i]
		}
	}
	return nil
}

// unreadSince returns queued followed by the todo doorbells of x's replay
// log written after sequence seq (the client's last answered ping), each
// todo once.
func (x *session) unreadSince(seq uint64, queued []domain.ChannelMessage) []domain.ChannelMessage {
	seen := map[string]bool{}
	out := make([]domain.ChannelMessage, 0, len(queued))
	for _, m := range queued {
		if id := m.Meta["todo_id"]; !seen[id] {
			seen[id] = true
			out = append(out, m)
		}
	}
	l := &x.rp
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.log.Events() {
		if ev.Seq <= seq || ev.Key == "" || seen[ev.Key] {
			continue
		}
		var n struct {
			Params domain.ChannelMessage `json:"params"`
		}
		data, _ := ssestream.MessageData(ev.Frame)
		if json.Unmarshal(data, &n) != nil {
			continue
		}
		seen[ev.Key] = true
		out = append(out, n.Params)
	}
	return out
}

// writePing writes the ping request id on the stream, bounded by
// Options.WriteTimeout like any write (a write past it ends the stream and
// stalls the session), after the write in progress, if any. A stream that
// ended meanwhile is pinged at the next scan instead.
func (st *stream) writePing(id string) {
	s, x := st.s, st.sess
	st.Lock()
	if st.DoneLocked() {
		st.Unlock()
		s.pingUnsent(x, id)
		return
	}
	// Under st's lock no other event is written: the client that answers this
	// ping has read every event up to seq.
	x.rp.mu.Lock()
	seq := x.rp.log.Last()
	x.rp.mu.Unlock()
	s.mu.Lock()
	x.ping.Written(id, seq)
	s.mu.Unlock()
	frame := string(ssestream.MessagePrefix) + `{"jsonrpc":"2.0","id":"` + id + `","method":"ping"}` + "\n\n"
	err := st.WriteLocked([]byte(frame))
	if err != nil {
		st.failedLocked(err)
	}
	st.Unlock()
	if err == nil {
		s.emit(Event{Kind: PingSent, SessionID: x.id, AgentID: x.agentID})
	}
}

// pingUnsent forgets ping id, which was not written: the next scan sends
// a new one.
func (s *Server) pingUnsent(x *session, id string) {
	s.mu.Lock()
	x.ping.Unsent(id)
	s.mu.Unlock()
}

// pingAnswered records the client's answer to ping id: the session is not
// stalled, and when id is the ping in flight every event written before it
// counts as read.
func (s *Server) pingAnswered(x *session, id string) {
	s.mu.Lock()
	ok, first, recovered := x.ping.Answer(id)
	s.mu.Unlock()
	if !ok {
		// Not the ping in flight: it neither ends a stall nor keeps one
		// from coming.
		s.log.Debug("mcp session answered a ping that is not in flight; ignored", "session", x.id, "agent_id", x.agentID)
		return
	}
	if first {
		s.log.Debug("mcp session answered its first ping: it is judged by pings from now on", "session", x.id, "agent_id", x.agentID)
	}
	reason := ""
	if recovered {
		reason = "recovered"
		s.log.Info("mcp session answers pings again", "session", x.id, "agent_id", x.agentID)
	}
	s.emit(Event{Kind: PingAnswered, SessionID: x.id, AgentID: x.agentID, Reason: reason})
}
