package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/ssestream"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// Errors of Notify. Neither means the caller should wait: the doorbell
// tries another session, and the sweep re-rings (design: Sweep).
var (
	// ErrNoSession: the session is unknown here, closed, or not yet
	// registered by the transport.
	ErrNoSession = errors.New("mcpserver: no such session on this instance")
	// ErrBufferFull: the session's outbox (maxOutbox messages) is full
	// because its client is not reading; the push is dropped.
	ErrBufferFull = errors.New("mcpserver: session notification buffer is full")
)

// Close implements connhub.Conn: the session is closed at once (closeSession);
// a session already closed is left alone.
func (x *session) Close(reason string) { x.srv.closeSession(x.id, reason) }

// agentSessionsLocked returns this server's sessions of the agent, from
// the hub's index (the gateway's connections left out). Callers hold s.mu,
// under which every session of this server registers and unregisters.
func (s *Server) agentSessionsLocked(agentID string) []*session {
	var out []*session
	for _, c := range s.hub.Conns(agentID) {
		if x, ok := c.(*session); ok && x.srv == s {
			out = append(out, x)
		}
	}
	return out
}

// maxQueued bounds a session's queued doorbells (its outbox holds maxOutbox).
const maxQueued = 256

// takeQueuedLocked empties x.queued and returns its messages. Callers hold
// s.mu.
func (x *session) takeQueuedLocked() []domain.ChannelMessage {
	if len(x.queued) == 0 {
		return nil
	}
	out := make([]domain.ChannelMessage, len(x.queued))
	for i, q := range x.queued {
		out[i] = q.msg
	}
	x.queued = nil
	return out
}

// redeliver hands a session's doorbells that were never written to another
// session of the agent, off the caller's goroutine.
func (s *Server) redeliver(x *session, msgs []domain.ChannelMessage) {
	if len(msgs) == 0 {
		return
	}
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		s.svc.RedeliverDoorbells(x.agentID, x.id, msgs)
	}()
}

func (x *session) streaming() bool {
	return slices.ContainsFunc(x.streams, func(st *stream) bool { return st.open.Load() })
}

// AgentSessions lists this instance's initialized sessions of the agent
// (the client sent notifications/initialized), oldest first. Streaming is
// true while a GET stream of the session is open and the session is not
// stalled by ping; Stalled is true after a stream write ran past
// Options.WriteTimeout or while a ping goes unanswered past
// Options.PingTimeout (design: Stream writes, Session liveness by ping): the
// doorbell rings such a session after every other and never fails over to
// it. Implements app.SessionHub.
func (s *Server) AgentSessions(agentID string) []app.SessionInfo {
	now := s.opts.Clock.Now()
	s.mu.RLock()
	xs := s.agentSessionsLocked(agentID)
	out := make([]app.SessionInfo, 0, len(xs))
	for _, x := range xs {
		if x.registered && x.initialized && !x.gone {
			active := x.lastSeen
			if x.inflight > 0 {
				active = now
			}
			out = append(out, app.SessionInfo{ID: x.id, AgentID: x.agentID, CredentialID: x.credID, Streaming: x.streaming() && !x.ping.Late(), OpenedAt: x.openedAt,
				LastActive: active, LastRequestAt: x.lastPost, Stalled: x.stalled || x.ping.Late()})
		}
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].OpenedAt.Equal(out[j].OpenedAt) {
			return out[i].OpenedAt.Before(out[j].OpenedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Notify queues a notifications/claude/channel with params {content, meta}
// on the session (design: Doorbell message). It never blocks: the message
// joins the session's outbox, which a drain goroutine writes on the open
// GET stream (stream.go); without a stream it waits there for the next
// one. Errors: ErrNoSession, ErrBufferFull (maxOutbox messages wait).
// Implements app.SessionHub.
func (s *Server) Notify(sessionID string, m domain.ChannelMessage) error {
	s.mu.RLock()
	x := s.sessions[sessionID]
	ok := x != nil && x.registered && !x.gone
	s.mu.RUnlock()
	if !ok {
		return ErrNoSession
	}
	var err error
	held := x.hold(m, s.opts.Clock.Now()) // replay accounting (resume.go)
	id := m.Meta["todo_id"]
	s.mu.Lock()
	switch {
	case x.gone:
		err = ErrNoSession
	case len(x.outbox) >= maxOutbox:
		err = ErrBufferFull
	default:
		// Queued with the message: the stream may write it at once.
		if id != "" {
			if len(x.queued) >= maxQueued {
				x.queued = slices.Delete(x.queued, 0, 1)
			}
			x.queued = append(x.queued, queuedNote{todoID: id, msg: m})
		}
		x.outbox = append(x.outbox, channelNote(m))
	}
	s.mu.Unlock()
	if err != nil {
		x.unhold(held)
		if errors.Is(err, ErrBufferFull) {
			s.log.Warn("doorbell dropped: session buffer full", "session", sessionID)
		}
		return err
	}
	s.kick(x)
	return nil
}

// CloseAgentSessions closes this instance's connections of the agent
// through the connection hub (connhub.Hub.Revoke), MCP sessions and gateway
// connections alike: all when creds is nil, otherwise those opened with one
// of the credential ids (after a revoke, a deactivation or a rotation).
// Their GET streams end at once, later requests with their ids answer 404,
// and they leave AgentSessions before it returns. Implements
// app.SessionHub: the use cases call it after clearing their credential
// cache, for a bus signal and when the signal could not be sent.
func (s *Server) CloseAgentSessions(agentID string, creds []string) {
	s.hub.Revoke(agentID, creds)
}

// serveInitialize passes an initialize request to mcp-go and binds the
// session id it mints to the request's credential before the response (and
// so the id) reaches the client. At Options.MaxSessionsPerAgent it evicts
// one of the agent's sessions (reserve); when none can be evicted it
// answers 429 instead, and mcp-go never sees the request.
func (s *Server) serveInitialize(w http.ResponseWriter, r *http.Request, p *domain.Principal) {
	if retry, ok := s.reserve(p.Agent.ID); !ok {
		s.log.Warn("mcp initialize refused: session limit", "agent", p.Agent.Handle, "agent_id", p.Agent.ID, "limit", s.opts.MaxSessionsPerAgent)
		writeRateLimited(w, retry, fmt.Sprintf(
			"agent %s already has %d MCP sessions on this server, the limit per agent, all of them initializes still in flight: retry after Retry-After seconds",
			p.Agent.Handle, s.opts.MaxSessionsPerAgent))
		return
	}
	iw := &initWriter{ResponseWriter: w}
	iw.bind = func() {
		if id := w.Header().Get(server.HeaderKeySessionID); id != "" {
			iw.sess = s.bind(id, p)
		}
	}
	defer func() {
		// Requests of the session wait for this, even if mcp-go panicked.
		if iw.sess != nil {
			close(iw.sess.ready)
		} else {
			s.unreserve(p.Agent.ID) // no session was minted
		}
	}()
	s.http.ServeHTTP(iw, r)
	x := iw.sess
	if x == nil {
		return
	}
	s.mu.RLock()
	registered := x.registered
	s.mu.RUnlock()
	if !registered {
		s.closeSession(x.id, "not registered by the transport")
		return
	}
	s.leave(x)
	s.log.Info("mcp session opened", "session", x.id, "agent", p.Agent.Handle, "agent_id", x.agentID, "credential_id", x.credID)
	s.emit(Event{Kind: SessionOpened, SessionID: x.id, AgentID: x.agentID})
}

// reserve takes one of the agent's Options.MaxSessionsPerAgent places for
// an initialize about to run; bind turns it into the session, unreserve
// gives it back. At the bound it evicts one of the agent's sessions (see
// evictableLocked) and takes its place. Only when none can be evicted
// (every place is an initialize in flight) does it return false, with how
// long until the first of the agent's sessions could expire.
func (s *Server) reserve(agentID string) (time.Duration, bool) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	limit := s.opts.MaxSessionsPerAgent
	if limit <= 0 || len(s.agentSessionsLocked(agentID))+s.reserved[agentID] < limit {
		s.reserved[agentID]++
		s.mu.Unlock()
		return 0, true
	}
	victim := s.evictableLocked(agentID)
	if victim == nil {
		d := s.firstExpiryLocked(agentID, now)
		s.mu.Unlock()
		return d, false
	}
	streams := s.detachLocked(victim)
	s.reserved[agentID]++
	s.mu.Unlock()
	s.log.Warn("mcp session evicted: the agent reached its session limit", "session", victim.id, "agent_id", agentID, "limit", limit)
	s.finishClose(victim, streams, "evicted: the agent opened a session beyond the limit")
	return 0, true
}

// evictableLocked picks the session a new initialize of the agent evicts
// at the session limit (design: Session cap): the least recently used one (by
// the end of its last request) among those without an open GET stream and
// no request in flight, else among those without an open stream, else the
// oldest session. Sessions whose initialize is still running are never
// picked. nil = none. Callers hold s.mu.
func (s *Server) evictableLocked(agentID string) *session {
	var idle, streamless, oldest *session
	for _, x := range s.agentSessionsLocked(agentID) {
		if x.gone || !isClosed(x.ready) {
			continue
		}
		if oldest == nil || x.openedAt.Before(oldest.openedAt) || (x.openedAt.Equal(oldest.openedAt) && x.id < oldest.id) {
			oldest = x
		}
		if x.streaming() {
			continue
		}
		if streamless == nil || lru(x, streamless) {
			streamless = x
		}
		if x.inflight == 0 && (idle == nil || lru(x, idle)) {
			idle = x
		}
	}
	switch {
	case idle != nil:
		return idle
	case streamless != nil:
		return streamless
	}
	return oldest
}

// lru reports whether x was used less recently than y.
func lru(x, y *session) bool {
	if !x.lastSeen.Equal(y.lastSeen) {
		return x.lastSeen.Before(y.lastSeen)
	}
	return x.id < y.id
}

// unreserveLocked gives back a place taken by reserve. Callers hold s.mu.
func (s *Server) unreserveLocked(agentID string) {
	if s.reserved[agentID]--; s.reserved[agentID] <= 0 {
		delete(s.reserved, agentID)
	}
}

func (s *Server) unreserve(agentID string) {
	s.mu.Lock()
	s.unreserveLocked(agentID)
	s.mu.Unlock()
}

// firstExpiryLocked is the time until the first of the agent's sessions
// could be closed by expireLoop (an uninitialized one at openedAt +
// InitTimeout, an idle one at lastSeen + IdleTimeout); IdleTimeout (or a
// minute) when none can. Callers hold s.mu.
func (s *Server) firstExpiryLocked(agentID string, now time.Time) time.Duration {
	first := time.Duration(-1)
	for _, x := range s.agentSessionsLocked(agentID) {
		var d time.Duration
		switch {
		case !x.initialized && s.opts.InitTimeout > 0:
			d = x.openedAt.Add(s.opts.InitTimeout).Sub(now)
		case x.inflight == 0 && s.opts.IdleTimeout > 0:
			d = x.lastSeen.Add(s.opts.IdleTimeout).Sub(now)
		default:
			continue
		}
		if first < 0 || d < first {
			first = d
		}
	}
	switch {
	case first >= 0:
		return first
	case s.opts.IdleTimeout > 0:
		return s.opts.IdleTimeout
	}
	return time.Minute
}

func (s *Server) bind(id string, p *domain.Principal) *session {
	now := s.opts.Clock.Now()
	x := &session{srv: s, id: id, agentID: p.Agent.ID, credID: p.CredentialID, openedAt: now, lastSeen: now, ready: make(chan struct{}), inflight: 1}
	s.mu.Lock()
	s.unreserveLocked(x.agentID) // the place reserve took is now the session's
	s.sessions[id] = x
	s.hub.Register(x)
	s.mu.Unlock()
	// Registered before mcp-go would register its own session object for
	// the id (after the initialize response): mcp-go then keeps nothing of
	// the session between requests (see transportSession).
	if err := s.mcp.RegisterSession(context.Background(), transportSession(id)); err != nil {
		s.log.Error("mcp session not registered with the transport", "session", id, "err", err)
	}
	return x
}

// transportSession is what mcp-go holds of a session between its requests:
// its id. mcp-go's own session object for Streamable HTTP carries four
// buffered channels (about 9 KiB) for the session's life; with this one
// registered under the id, each POST gets a short-lived one of mcp-go's
// that is dropped with the request, and the session's notifications are
// this package's (Notify, postContext). It sends no notification itself.
type transportSession string

func (t transportSession) SessionID() string { return string(t) }

func (transportSession) Initialize() {}

func (transportSession) Initialized() bool { return true }

// NotificationChannel is nil: a send from mcp-go finds it blocked and
// fails (ErrNotificationChannelBlocked) instead of queueing.
func (transportSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }

// initWriter calls bind before the first byte of the response.
type initWriter struct {
	http.ResponseWriter
	bind func()
	once sync.Once
	sess *session
}

func (w *initWriter) before() { w.once.Do(w.bind) }

func (w *initWriter) WriteHeader(code int) { w.before(); w.ResponseWriter.WriteHeader(code) }

func (w *initWriter) Write(b []byte) (int, error) { w.before(); return w.ResponseWriter.Write(b) }

func (w *initWriter) Flush() { w.before(); _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *initWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// enter admits a request to an existing session: 404 when the id is
// unknown or closed, 403 when the request's credential is not the one that
// opened the session (nothing about the session changes); p == nil admits
// by the id alone (a credential-less DELETE, deleteByID). It waits until
// the session's initialize has finished.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, id string, p *domain.Principal) (*session, bool) {
	s.mu.Lock()
	x := s.sessions[id]
	if x == nil {
		s.mu.Unlock()
		writeProblem(w, http.StatusNotFound, domain.CodeNotFound,
			"session not found: it ended, expired or never existed here; send initialize to open a new one")
		return nil, false
	}
	if p != nil && (x.credID != p.CredentialID || x.agentID != p.Agent.ID) {
		s.mu.Unlock()
		s.log.Warn("mcp session used with another credential refused", "session", id, "agent_id", p.Agent.ID, "credential_id", p.CredentialID)
		writeProblem(w, http.StatusForbidden, domain.CodeForbidden,
			"this session was opened with another credential; initialize a session of your own")
		return nil, false
	}
	x.inflight++
	s.mu.Unlock()
	select {
	case <-x.ready:
	case <-r.Context().Done():
		s.leave(x)
		return nil, false
	}
	s.mu.RLock()
	ok := x.registered && !x.gone
	s.mu.RUnlock()
	if !ok {
		s.leave(x)
		writeProblem(w, http.StatusNotFound, domain.CodeNotFound, "session not found: it has ended; send initialize to open a new one")
		return nil, false
	}
	return x, true
}

// leave ends a request admitted by enter.
func (s *Server) leave(x *session) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	x.inflight--
	x.lastSeen = now
	s.mu.Unlock()
}

func (s *Server) registered(id string) {
	s.mu.Lock()
	if x := s.sessions[id]; x != nil {
		x.registered = true
	}
	s.mu.Unlock()
}

func (s *Server) markInitialized(x *session) {
	s.mu.Lock()
	first := !x.initialized && !x.gone && x.streaming() && !s.otherStreamingLocked(x)
	x.initialized = true
	s.mu.Unlock()
	if first {
		s.streamOpened(x.agentID)
	}
}

// otherStreamingLocked reports whether another initialized session of x's
// agent has an open stream here. Callers hold s.mu.
func (s *Server) otherStreamingLocked(x *session) bool {
	for _, y := range s.agentSessionsLocked(x.agentID) {
		if y != x && y.initialized && y.streaming() {
			return true
		}
	}
	return false
}

// streamOpened tells the use cases that the agent gained its first open
// notification stream on this instance (initialized session, stream open),
// which may queue a reconnect digest on it (design: Connect and reconnect digests). It runs on the
// request goroutine, before the stream's first flush and before
// StreamOpened is emitted, so a todo pushed after the event is not counted
// in that digest. It costs a cache lookup, and at most once per agent per
// doorbell.ReconnectDigestGate one store query.
func (s *Server) streamOpened(agentID string) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("stream-opened handling panicked", "agent_id", agentID, "panic", r)
		}
	}()
	s.svc.StreamOpened(agentID)
}

// AgentsWithSessions lists, sorted, the agents with at least one
// initialized session on this instance, streaming or momentarily
// streamless: the sweep's candidate receivers (design: Sweep). Implements
// app.SessionHub.
func (s *Server) AgentsWithSessions() []string {
	s.mu.RLock()
	out := make([]string, 0, len(s.sessions))
	for _, x := range s.sessions {
		if x.registered && x.initialized && !x.gone {
			out = append(out, x.agentID)
		}
	}
	s.mu.RUnlock()
	slices.Sort(out)
	return slices.Compact(out)
}

// forget removes the session from this instance's records and ends its GET
// streams. It reports whether the session was there.
func (s *Server) forget(id, reason string) bool {
	s.mu.Lock()
	x := s.sessions[id]
	if x == nil {
		s.mu.Unlock()
		return false
	}
	streams := s.detachLocked(x)
	s.mu.Unlock()
	s.forgotten(x, streams, reason)
	return true
}

// detachLocked removes x from the records and marks it gone; it returns
// the streams to cancel. Callers hold s.mu.
func (s *Server) detachLocked(x *session) []*stream {
	if msgs := x.takeQueuedLocked(); len(msgs) > 0 && !s.closing {
		s.redeliver(x, msgs)
	}
	delete(s.sessions, x.id)
	s.hub.Unregister(x)
	x.gone = true
	x.outbox = nil
	streams := x.streams
	x.streams = nil
	return streams
}

// forgotten ends the streams of a detached session, logs and emits.
func (s *Server) forgotten(x *session, streams []*stream, reason string) {
	for _, st := range streams {
		st.Cancel()
	}
	s.log.Info("mcp session closed", "session", x.id, "agent_id", x.agentID, "reason", reason)
	s.emit(Event{Kind: SessionClosed, SessionID: x.id, AgentID: x.agentID, Reason: reason})
}

// finishClose completes closeSession for a session detached by the caller.
func (s *Server) finishClose(x *session, streams []*stream, reason string) {
	s.forgotten(x, streams, reason)
	s.dropTransport(x.id)
}

// closeSession forgets the session and has mcp-go drop its state for it
// (the registered transportSession, its per-session stores) through
// mcp-go's DELETE path, the public way to terminate one session.
func (s *Server) closeSession(id, reason string) {
	if !s.forget(id, reason) {
		return
	}
	s.dropTransport(id)
}

// dropTransport has mcp-go drop its state for the session.
func (s *Server) dropTransport(id string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	req.Header.Set(server.HeaderKeySessionID, id)
	req.Header.Set(mcp.HeaderProtocolVersion, ProtocolVersions[0])
	s.http.ServeHTTP(discard{h: http.Header{}}, req)
}

type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

// sessionIDs is mcp-go's SessionIdManager: ids are 192 random bits, and
// only sessions this instance holds are valid.
type sessionIDs struct{ s *Server }

func (m sessionIDs) Generate() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "rcs_" + base64.RawURLEncoding.EncodeToString(b[:])
}

func (m sessionIDs) Validate(id string) (bool, error) {
	m.s.mu.RLock()
	x := m.s.sessions[id]
	m.s.mu.RUnlock()
	if x == nil || x.gone {
		return false, ErrNoSession
	}
	return false, nil
}

func (m sessionIDs) Terminate(id string) (bool, error) {
	m.s.forget(id, "deleted by the client")
	return false, nil
}

// markWritten drops from x's queue the doorbells that b, written to the
// client, carries.
func (s *Server) markWritten(x *session, b []byte) {
	s.mu.Lock()
	if len(x.queued) > 0 {
		x.queued = slices.DeleteFunc(x.queued, func(q queuedNote) bool { return bytes.Contains(b, []byte(q.todoID)) })
	}
	s.mu.Unlock()
}

// noteWriter is the ResponseWriter of a POST on a session: mcp-go may
// write queued notifications into its response; those count as written.
type noteWriter struct {
	http.ResponseWriter
	s *Server
	x *session
}

func (w noteWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if err == nil {
		w.s.markWritten(w.x, b)
	}
	return n, err
}

func (w noteWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w noteWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// keepAliveLoop writes a keepalive on every open stream each
// Options.KeepAlive (ssestream.KeepAlive).
func (s *Server) keepAliveLoop() {
	defer s.loops.Done()
	t := s.opts.Clock.NewTicker(s.opts.KeepAlive)
	defer t.Stop()
	ssestream.KeepAlive(s.stop, t.Chan(), func(open []*ssestream.Stream) []*ssestream.Stream {
		s.mu.RLock()
		defer s.mu.RUnlock()
		for _, x := range s.sessions {
			for _, st := range x.streams {
				if st.open.Load() {
					open = append(open, st.Stream)
				}
			}
		}
		return open
	})
}

// expireLoop closes sessions idle for Options.IdleTimeout (no request in
// flight, GET streams included, since then), sessions that never opened a
// GET stream idle for Options.StreamlessIdleTimeout, and sessions still not
// initialized Options.InitTimeout after their initialize, busy or not.
func (s *Server) expireLoop() {
	defer s.loops.Done()
	t := s.opts.Clock.NewTicker(expiryScanEvery(s.opts.IdleTimeout, s.opts.InitTimeout, s.opts.StreamlessIdleTimeout))
	defer t.Stop()
	workgroup.Every(s.stop, t.Chan(), func() {
		now := s.opts.Clock.Now()
		var idle, streamless, uninit []string
		s.mu.RLock()
		for id, x := range s.sessions {
			switch {
			case !x.initialized && s.opts.InitTimeout > 0 && now.Sub(x.openedAt) >= s.opts.InitTimeout && isClosed(x.ready):
				uninit = append(uninit, id)
			case s.opts.IdleTimeout > 0 && x.inflight == 0 && now.Sub(x.lastSeen) >= s.opts.IdleTimeout:
				idle = append(idle, id)
			case s.opts.StreamlessIdleTimeout > 0 && !x.streamed && x.inflight == 0 && isClosed(x.ready) &&
				now.Sub(x.lastSeen) >= s.opts.StreamlessIdleTimeout:
				streamless = append(streamless, id)
			}
		}
		s.mu.RUnlock()
		for _, id := range uninit {
			s.closeSession(id, "not initialized in time")
		}
		for _, id := range idle {
			s.closeSession(id, "idle")
		}
		for _, id := range streamless {
			s.closeSession(id, "idle without a stream")
		}
	})
}

// expiryScanEvery is the period of the expiry scan. A session expires at
// the first scan after its deadline: scanning every InitTimeout/15 (4 s of
// the default 60 s) closes an unfinished handshake within 5 s of the
// documented timeout; idle sessions are scanned at least every minute.
func expiryScanEvery(idle, init, streamless time.Duration) time.Duration {
	every := time.Minute
	for _, d := range []time.Duration{idle, streamless} {
		if d > 0 {
			every = min(every, d/2)
		}
	}
	if init > 0 {
		every = min(every, init/15)
	}
	return max(every, time.Millisecond)
}

// isClosed reports whether ch is closed (here: the session's initialize
// request has finished).
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
