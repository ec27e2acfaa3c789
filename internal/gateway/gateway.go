// Package gateway is Rollcall's WebSocket gateway at /v1/gateway
// (design: Gateway protocol): a runtime adapter keeps one connection
// open and sends heartbeats on it. Frames are JSON text messages {op, d}:
//
//	server  hello         {heartbeat_interval_ms}
//	client  identify      {token}              an agent credential
//	server  ready         {agent_id, agent, heartbeat_interval_ms}
//	client  heartbeat     {agent?}             agent = an agent_heartbeat.v1 body
//	server  heartbeat_ack {interval_ms}
//	server  error         {op, code, detail, pointer?, reason?, retry_after_ms?}
//
// A heartbeat is handled liveness first: the server acknowledges it and
// resets the connection's deadline whatever else the frame carries. Then,
// with member agent, the per-principal rate limit and the same use case as
// REST run (app.Service.Heartbeat); their errors answer an error frame with
// op "heartbeat" and keep the connection. A member agent that does not
// decode is answered on the read loop, before any later frame is handled,
// and counts as a malformed frame. A heartbeat without agent keeps
// the connection alive but changes no presence. Pointers in error frames
// are relative to d (e.g. /agent/state).
//
// Close codes: 4009 when no heartbeat arrived within the deadline
// (Options.Deadline, default 2 × sync.heartbeat_interval: one interval of
// slack for a late sender; before identify the same deadline applies),
// 4004 when identify fails or the agent's credential is revoked or rotated
// or the agent deactivated (through the instance's connection hub,
// internal/connhub), 4013 when the server shuts down (reconnect),
// 1008 after Options.MaxBadFrames malformed frames in a row (default 8: a
// confused client gets answers to debug with, a hostile one is cut off),
// 1009 for a frame over ReadLimit bytes.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/connhub"
	"github.com/rollcall/rollcall/internal/dbclock"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/edge"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/strictjson"
)

// Close codes of the gateway (design: Gateway protocol).
const (
	CloseAuthFailed        websocket.StatusCode = 4004 // identify failed; credential revoked
	CloseHeartbeatDeadline websocket.StatusCode = 4009 // no heartbeat within the deadline
	CloseGoingAway         websocket.StatusCode = 4013 // the server shuts down: reconnect
)

// ReadLimit bounds one frame: a maximal heartbeat body plus the envelope.
const ReadLimit = liveness.MaxBodyBytes + 1024

// DefaultMaxBadFrames is how many malformed frames in a row close the
// connection with 1008.
const DefaultMaxBadFrames = 8

// Options configures a Gateway.
type Options struct {
	Service *app.Service
	// Hub is the instance's connection hub, shared with the MCP sessions
	// (design: Connection hub): identified connections register in it, and
	// its revocations and re-check close them with 4004. nil = a hub of the
	// gateway's own, built from Bus and Recheck and closed by Shutdown.
	Hub *connhub.Hub
	// Bus delivers bus.ChannelAgentSessions (revoke, rotate, deactivate) to
	// the gateway's own hub (Hub nil): the agent's connections close with
	// 4004. nil = not subscribed.
	Bus bus.Bus
	Log *slog.Logger // nil = slog.Default()
	// Clock drives the deadlines; nil = the process clock under the
	// Service's database clock (dbclock.Clock.Base).
	Clock clockwork.Clock
	// HeartbeatInterval is announced in hello (sync.heartbeat_interval);
	// 0 = the tracker's configuration.
	HeartbeatInterval time.Duration
	// Deadline closes a connection with 4009 when no heartbeat (or, before
	// it, identify) arrived for this long; 0 = 2 × HeartbeatInterval.
	Deadline time.Duration
	// MaxBadFrames closes with 1008 after this many malformed frames in a
	// row; 0 = DefaultMaxBadFrames.
	MaxBadFrames int
	// Recheck is how often the gateway's own hub (Hub nil) re-checks the
	// credentials of open connections; 0 = app.RecheckInterval, negative
	// disables.
	Recheck time.Duration
}

// Gateway serves /v1/gateway. Safe for concurrent use.
type Gateway struct {
	o        Options
	svc      *app.Service
	log      *slog.Logger
	clock    clockwork.Clock
	hello    []byte
	ack      []byte
	shutdown atomic.Bool
	hub      *connhub.Hub
	ownHub   bool // hub is the gateway's own: Shutdown closes it

	mu    sync.Mutex
	conns map[*conn]struct{} // every open connection, identified or not
	wg    sync.WaitGroup
}

// New returns a Gateway; mount it at /v1/gateway.
func New(o Options) *Gateway {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Clock == nil {
		// A connection's heartbeat deadline is this process's own wait,
		// judged with the stall detector that runs on this process's clock:
		// the database clock's base, not its shifted time.
		o.Clock = dbclock.Of(o.Service.Clock()).Base()
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = o.Service.HeartbeatInterval()
	}
	if o.Deadline <= 0 {
		o.Deadline = 2 * o.HeartbeatInterval
	}
	if o.MaxBadFrames <= 0 {
		o.MaxBadFrames = DefaultMaxBadFrames
	}
	if o.Recheck == 0 {
		o.Recheck = app.RecheckInterval
	}
	ms := strconv.FormatInt(o.HeartbeatInterval.Milliseconds(), 10)
	g := &Gateway{o: o, svc: o.Service, log: o.Log, clock: o.Clock, hub: o.Hub,
		hello: []byte(`{"op":"hello","d":{"heartbeat_interval_ms":` + ms + `}}`),
		ack:   []byte(`{"op":"heartbeat_ack","d":{"interval_ms":` + ms + `}}`),
		conns: map[*conn]struct{}{}}
	if g.hub == nil {
		svc := o.Service
		g.hub, g.ownHub = connhub.New(connhub.Options{Bus: o.Bus, Clock: o.Clock, Log: o.Log, Recheck: o.Recheck,
			NoLongerValid: connhub.CheckLive(svc.LiveCredentials)}), true
	}
	return g
}

// Connections returns how many connections are open.
func (g *Gateway) Connections() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// Shutdown closes every connection with 4013 (going away: reconnect) and
// refuses new ones the same way, then waits for the connections' handlers
// within ctx. It is the gateway's step of the server's shutdown, before the
// tracker stops (design: Shutdown flush).
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.shutdown.Store(true)
	if g.ownHub {
		g.hub.Close()
	}
	g.mu.Lock()
	cs := make([]*conn, 0, len(g.conns))
	for c := range g.conns {
		cs = append(cs, c)
	}
	g.mu.Unlock()
	for _, c := range cs {
		go c.close(CloseGoingAway, "server going away; reconnect")
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, c := range cs {
			_ = c.ws.CloseNow()
		}
		return ctx.Err()
	}
}

// ServeHTTP upgrades the request and runs the connection until it closes.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept wrote the HTTP error
	}
	ws.SetReadLimit(ReadLimit)
	c := &conn{g: g, ws: ws, authFailed: edge.FailureFunc(r)}
	g.wg.Add(1)
	defer g.wg.Done()
	if !g.register(c) {
		_ = ws.Close(CloseGoingAway, "server going away; reconnect")
		return
	}
	defer g.unregister(c)
	c.mu.Lock()
	c.seen.Store(g.clock.Now().UnixNano())
	c.timer = g.clock.AfterFunc(g.o.Deadline, c.onDeadline)
	c.mu.Unlock()
	if err := c.write(g.hello); err != nil {
		_ = ws.CloseNow()
		return
	}
	c.run()
	if !c.closing.Swap(true) {
		// The read failed without a close of ours (a protocol error such
		// as an unmasked frame, or a broken connection): the library would
		// wait for a close handshake the client may never send, and no
		// deadline runs any more, so free the connection now.
		_ = ws.CloseNow()
	}
}

func (g *Gateway) register(c *conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shutdown.Load() {
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *Gateway) unregister(c *conn) {
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Stop()
	}
	identified := c.principal != nil
	c.mu.Unlock()
	if identified {
		g.hub.Unregister(c)
	}
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
}

// conn is one gateway connection.
type conn struct {
	g  *Gateway
	ws *websocket.Conn
	// authFailed counts a refused identify towards the edge's limit of
	// failed authentications (edge.FailureFunc).
	authFailed func(reason, token string)
	closing    atomic.Bool
	revoked    atomic.Bool  // Close ran (a revocation or the re-check)
	seen       atomic.Int64 // clock time (unix ns) of the last heartbeat or identify
	bad        int          // malformed frames in a row (reader goroutine only)
	buf        bytes.Buffer // the frame being read (reader goroutine only)
	valid      []byte       // the last member agent that decoded (reader goroutine only)

	mu        sync.Mutex
	timer     clockwork.Timer
	principal *domain.Principal
	// agentID and credID are set by identify before the connection is
	// registered in the hub, and never change after.
	agentID, credID string

	// The agent part of heartbeats runs off the read loop (agentPart): the
	// newest body waiting, when it arrived, and whether a worker runs.
	apMu      sync.Mutex
	apBody    []byte
	apAt      app.Arrival
	apRunning bool
}

// frame is the envelope of every message.
type frame struct {
	Op string          `json:"op"`
	D  json.RawMessage `json:"d"`
}

type identifyData struct {
	Token string `json:"token"`
}

type heartbeatData struct {
	Agent json.RawMessage `json:"agent"`
}

// errorData is the d of an error frame.
type errorData struct {
	Op           string `json:"op"`
	Code         string `json:"code"`
	Detail       string `json:"detail"`
	Pointer      string `json:"pointer,omitempty"`
	Reason       string `json:"reason,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
}

type readyData struct {
	AgentID             string `json:"agent_id"`
	Agent               string `json:"agent"`
	HeartbeatIntervalMS int64  `json:"heartbeat_interval_ms"`
}

// bg is the context of reads and writes: a context without Done avoids a
// timer per frame; closing the connection ends a blocked call instead.
var bg = context.Background()

func (c *conn) write(b []byte) error { return c.ws.Write(bg, websocket.MessageText, b) }

func (c *conn) writeJSON(op string, d any) error {
	b, err := json.Marshal(struct {
		Op string `json:"op"`
		D  any    `json:"d"`
	}{op, d})
	if err != nil {
		return err
	}
	return c.write(b)
}

// AgentID implements connhub.Conn.
func (c *conn) AgentID() string { return c.agentID }

// CredentialID implements connhub.Conn.
func (c *conn) CredentialID() string { return c.credID }

// Close implements connhub.Conn: the agent's credential was revoked or
// rotated, or the agent deactivated; the connection closes with 4004, the
// close handshake off the caller's goroutine. A second call (the signal
// reaches the hub from the bus and from the use cases) does nothing.
func (c *conn) Close(reason string) {
	if c.closing.Load() || c.revoked.Swap(true) {
		return
	}
	c.g.log.Info("gateway: connection closed", "reason", reason, "agent_id", c.agentID, "credential_id", c.credID)
	go c.close(CloseAuthFailed, "credential revoked")
}

// close closes the connection once with code.
func (c *conn) close(code websocket.StatusCode, reason string) {
	if c.closing.Swap(true) {
		return
	}
	_ = c.ws.Close(code, reason)
}

// onDeadline runs when the deadline timer fires. Heartbeats only record
// when they arrived (resetDeadline), so the timer fires at the deadline the
// previous firing computed: it closes with 4009 when no heartbeat came for
// Options.Deadline, and otherwise re-arms for the rest.
//
// A stall of the server (stall.Detector) restarts the deadline when the
// process runs again: frames queued on the socket meanwhile are not the
// agent's fault (design: Stall extension).
func (c *conn) onDeadline() {
	st := c.g.svc.Stalls()
	st.Check() // a stall that ended just now is recorded before judging
	seen := time.Unix(0, c.seen.Load())
	due := st.Extend(seen, c.g.o.Deadline)
	if now := c.g.clock.Now(); now.Before(due) {
		c.mu.Lock()
		c.timer.Reset(due.Sub(now))
		if !c.g.clock.Now().Before(due) { // a fake clock moved meanwhile
			c.timer.Reset(0)
		}
		c.mu.Unlock()
		return
	}
	c.close(CloseHeartbeatDeadline, "heartbeat deadline missed")
}

// resetDeadline gives the connection a fresh deadline: Options.Deadline
// from now. It only records the time; the timer is not touched.
func (c *conn) resetDeadline() {
	c.seen.Store(c.g.clock.Now().UnixNano())
}

func (c *conn) run() {
	for {
		typ, r, err := c.ws.Reader(bg)
		if err != nil {
			return
		}
		c.buf.Reset()
		if _, err := c.buf.ReadFrom(r); err != nil {
			return // over the read limit (closed with 1009) or a broken connection
		}
		if typ != websocket.MessageText {
			c.malformed("", "frames are JSON text messages {op, d}")
		} else {
			c.handle(c.buf.Bytes())
		}
		if c.bad >= c.g.o.MaxBadFrames {
			c.close(websocket.StatusPolicyViolation, "too many malformed frames")
			return
		}
	}
}

// malformed answers an error frame for a frame that could not be handled and
// counts it toward MaxBadFrames.
func (c *conn) malformed(op, detail string) {
	c.bad++
	c.sendError(op, &domain.Error{Code: domain.CodeInvalidArgument, Detail: detail}, "")
}

func (c *conn) sendError(op string, err error, pointerBase string) {
	d := errorData{Op: op, Code: string(domain.CodeOf(err))}
	var de *domain.Error
	if errors.As(err, &de) && de.Code != domain.CodeInternal {
		d.Detail, d.Reason = de.Detail, de.Reason
		if de.Pointer != "" || (pointerBase != "" && (de.Code == domain.CodeInvalidArgument || de.Code == domain.CodeUnknownMember)) {
			d.Pointer = pointerBase + de.Pointer // "" from the decoder = the body itself
		}
	} else {
		c.g.log.Error("gateway: heartbeat failed", "err", err)
		d.Code, d.Detail = string(domain.CodeInternal), "internal error; the server log has the cause"
	}
	var rl *app.RateLimitedError
	if errors.As(err, &rl) {
		d.RetryAfterMS = max(1, rl.RetryAfter.Milliseconds())
	}
	_ = c.writeJSON("error", d)
}

func (c *conn) handle(b []byte) {
	if op, d, ok := fastFrame(b); ok && op == "heartbeat" {
		if len(d) == 0 || string(d) == "null" {
			c.heartbeat(nil)
			return
		}
		if agent, ok := fastHeartbeatData(d); ok {
			c.heartbeatAgent(agent)
			return
		}
	}
	f, err := decodeFrame(b)
	if err != nil {
		c.bad++
		c.sendError("", err, "")
		return
	}
	switch f.Op {
	case "identify":
		c.identify(f.D)
	case "heartbeat":
		c.heartbeat(f.D)
	case "":
		c.malformed("", "the frame has no op")
	default:
		c.malformed(f.Op, "unknown op "+strconv.Quote(f.Op)+"; client ops are identify and heartbeat")
	}
}

func (c *conn) identify(d json.RawMessage) {
	c.mu.Lock()
	identified := c.principal != nil
	c.mu.Unlock()
	if identified {
		c.malformed("identify", "already identified")
		return
	}
	var in identifyData
	if err := strictjson.Object(d, strictjson.Gateway, "", []string{"token"}, func(_ string, raw []byte) error {
		return stringMember(raw, "/token", &in.Token)
	}); err != nil || in.Token == "" {
		reason := "authentication failed: identify needs d = {\"token\": \"<agent credential>\"}"
		if err != nil {
			reason = "authentication failed: " + err.Error()
		}
		if len(reason) > 120 { // close reasons are limited to 123 bytes
			reason = reason[:120]
		}
		c.authFailed("missing_credential", "")
		c.close(CloseAuthFailed, reason)
		return
	}
	p, err := c.g.svc.AuthenticateAgent(context.Background(), in.Token)
	if err != nil {
		if domain.CodeOf(err) == domain.CodeInternal {
			c.g.log.Error("gateway: identify failed", "err", err)
		} else if domain.CodeOf(err) == domain.CodeUnauthenticated {
			c.authFailed("invalid_token", in.Token)
		}
		c.close(CloseAuthFailed, "authentication failed")
		return
	}
	c.agentID, c.credID = p.Agent.ID, p.CredentialID
	c.mu.Lock()
	c.principal = &p
	c.mu.Unlock()
	c.g.hub.Register(c)
	c.bad = 0
	c.resetDeadline()
	_ = c.writeJSON("ready", readyData{AgentID: p.Agent.ID, Agent: p.Agent.Handle, HeartbeatIntervalMS: c.g.o.HeartbeatInterval.Milliseconds()})
}

func (c *conn) heartbeat(d json.RawMessage) {
	var in heartbeatData
	if len(d) > 0 && !bytes.Equal(d, []byte("null")) {
		var err error
		if in, err = decodeHeartbeatData(d); err != nil {
			if c.identified() == nil {
				c.unidentified()
				return
			}
			// Liveness first: the connection is alive even if d is wrong.
			c.resetDeadline()
			_ = c.write(c.g.ack)
			c.bad++
			c.sendError("heartbeat", err, "")
			return
		}
	}
	c.heartbeatAgent(in.Agent)
}

func (c *conn) identified() *domain.Principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.principal
}

func (c *conn) unidentified() {
	c.bad++
	c.sendError("heartbeat", &domain.Error{Code: domain.CodeUnauthenticated, Detail: "identify first"}, "")
}

// heartbeatAgent is a well-formed heartbeat: liveness first (ack, deadline),
// then, with member agent (nil = none), the use case.
func (c *conn) heartbeatAgent(agent []byte) {
	p := c.identified()
	if p == nil {
		c.unidentified()
		return
	}
	c.resetDeadline()
	if err := c.write(c.g.ack); err != nil {
		return
	}
	if agent == nil {
		c.bad = 0
		return
	}
	c.agentPart(p, agent)
}

// agentPart runs the read-loop part of a heartbeat's member agent and
// hands the rest to the connection's worker, returning at once: the read
// loop keeps reading and acking while an audited first report or billing
// change waits for the store (design: Liveness first). On the read loop,
// in order: the rate limit; the tracker is told that a heartbeat arrived,
// so the agent's deadline runs from its arrival; and the body is decoded
// (liveness.DecodeHeartbeat; the last body that decoded is not decoded
// again). A body that does not decode is answered here with error
// {op: "heartbeat"} at its pointer under /agent and counted toward
// Options.MaxBadFrames, so every bad frame is answered and counted. At
// most one worker runs per connection and at most one body waits: a newer
// heartbeat replaces a waiting one (each heartbeat is the whole reported
// state, so the newest is all that matters).
func (c *conn) agentPart(p *domain.Principal, agent []byte) {
	at, err := c.g.svc.ArriveHeartbeat(*p, p.Agent.ID)
	if err != nil { // the rate limit, answered in order on the read loop
		c.bad = 0 // a well-formed frame
		c.sendError("heartbeat", err, "/agent")
		return
	}
	if !bytes.Equal(agent, c.valid) {
		if _, err := liveness.DecodeHeartbeat(agent); err != nil {
			c.bad++
			c.sendError("heartbeat", err, "/agent")
			return
		}
		c.valid = append(c.valid[:0], agent...)
	}
	c.bad = 0
	c.apMu.Lock()
	c.apBody = append(c.apBody[:0], agent...)
	c.apAt = at
	start := !c.apRunning
	c.apRunning = true
	c.apMu.Unlock()
	if start {
		c.g.wg.Add(1)
		go c.runAgentParts(p)
	}
}

func (c *conn) runAgentParts(p *domain.Principal) {
	defer c.g.wg.Done()
	var body []byte
	for {
		c.apMu.Lock()
		if len(c.apBody) == 0 {
			c.apRunning = false
			c.apMu.Unlock()
			return
		}
		body, c.apBody = c.apBody, body[:0] // swap buffers: no copy, no allocation
		at := c.apAt
		c.apMu.Unlock()
		if _, err := c.g.svc.Heartbeat(context.Background(), *p, p.Agent.ID, body, at); err != nil && !c.closing.Load() {
			c.sendError("heartbeat", err, "/agent")
		}
	}
}

// decodeFrame decodes a client frame {op, d} strictly (pointers relative
// to the frame; strictjson.Gateway words the errors).
func decodeFrame(b []byte) (frame, error) {
	var f frame
	err := strictjson.Object(b, strictjson.Gateway, "", []string{"op", "d"}, func(name string, raw []byte) error {
		if name == "op" {
			return stringMember(raw, "/op", &f.Op)
		}
		f.D = raw
		return nil
	})
	return f, err
}

// decodeHeartbeatData decodes the d of a heartbeat frame, {agent?}
// (pointers relative to d).
func decodeHeartbeatData(d []byte) (heartbeatData, error) {
	var in heartbeatData
	err := strictjson.Object(d, strictjson.Gateway, "", []string{"agent"}, func(_ string, raw []byte) error {
		return objectMember(raw, "/agent", &in.Agent)
	})
	return in, err
}

// stringMember decodes a JSON string member.
func stringMember(raw json.RawMessage, ptr string, into *string) error {
	if err := json.Unmarshal(raw, into); err != nil {
		return domain.Errorf(domain.CodeInvalidArgument, "must be a string").At(ptr)
	}
	return nil
}

// objectMember checks that a member is a JSON object (or null = absent).
func objectMember(raw json.RawMessage, ptr string, into *json.RawMessage) error {
	t := bytes.TrimSpace(raw)
	if bytes.Equal(t, []byte("null")) {
		return nil
	}
	if len(t) == 0 || t[0] != '{' {
		return domain.Errorf(domain.CodeInvalidArgument, "must be a JSON object").At(ptr)
	}
	*into = raw
	return nil
}
