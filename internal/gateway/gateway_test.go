package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/gateway"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/testkit"
)

// The gateway tests dial the real handler with coder/websocket's client over
// httptest, on a real SQLite store and the real use case. Deadlines run on
// a fake clock the tests advance; waits for asynchronous effects (a closed
// connection) are bounded by testkit.Wait, never timed.

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

type env struct {
	t     *testing.T
	clock *clockwork.FakeClock
	svc   *app.Service
	st    *sqlite.Store
	gw    *gateway.Gateway
	srv   *httptest.Server
	admin domain.Person
	cred  string // an agent credential
	agent domain.Agent
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return buildEnv(t, app.LivenessConfig{HeartbeatInterval: 15 * time.Second, PresenceTimeout: 45 * time.Second}, nil)
}

// buildEnv is newEnv with the liveness configuration cfg and the store
// wrapped by wrap (nil = the SQLite store itself): a fresh SQLite store,
// the use case on a fake clock at t0 and a local bus, an admin, an agent
// "runner" and the gateway on a test server, shut down at cleanup.
func buildEnv(t *testing.T, cfg app.LivenessConfig, wrap func(store.Store) store.Store) *env {
	t.Helper()
	// Not closed at cleanup: goroutines the presence evaluator starts per
	// bus signal may still read it, and sqlite.Store.Close is not safe
	// against concurrent reads (it clears its handles). Such a goroutine may
	// also recreate the -shm file while t.TempDir's cleanup runs, hence
	// testkit.LooseTempDir.
	st, err := sqlite.Open(t.Context(), filepath.Join(testkit.LooseTempDir(t), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	var s store.Store = st
	if wrap != nil {
		s = wrap(st)
	}
	clock := clockwork.NewFakeClockAt(t0)
	b := bus.NewLocal()
	log := slog.New(slog.DiscardHandler)
	svc := app.New(app.Options{Store: s, Bus: b, Clock: clock, Log: log, Liveness: cfg})
	admin, _ := testkit.BootstrapAdmin(t, svc)
	res, err := svc.Vend(t.Context(), admin, app.VendInput{Handle: "runner", Queues: []string{"build"}, BillingMode: "subscription"})
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Options{Service: svc, Bus: b, Log: log})
	mux := http.NewServeMux()
	mux.Handle("/v1/gateway", gw)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = gw.Shutdown(context.Background()) })
	return &env{t: t, clock: clock, svc: svc, st: st, gw: gw, srv: srv, admin: admin, cred: res.Credential, agent: res.Agent}
}

type client struct {
	t *testing.T
	c *websocket.Conn
}

type frame struct {
	Op string          `json:"op"`
	D  json.RawMessage `json:"d"`
}

// open opens a WebSocket connection to the gateway, closed at cleanup.
func (e *env) open() *client {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+"/v1/gateway", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	c.SetReadLimit(1 << 20)
	e.t.Cleanup(func() { _ = c.CloseNow() })
	return &client{t: e.t, c: c}
}

func (e *env) dial() *client {
	e.t.Helper()
	cl := e.open()
	if f := cl.read(); f.Op != "hello" || string(f.D) != `{"heartbeat_interval_ms":15000}` {
		e.t.Fatalf("first frame = %s %s, want hello {heartbeat_interval_ms:15000}", f.Op, f.D)
	}
	return cl
}

// ready dials, identifies with the agent's credential and reads ready.
func (e *env) ready() *client {
	e.t.Helper()
	c := e.dial()
	c.send(`{"op":"identify","d":{"token":"` + e.cred + `"}}`)
	f := c.read()
	var d struct {
		AgentID             string `json:"agent_id"`
		Agent               string `json:"agent"`
		HeartbeatIntervalMS int64  `json:"heartbeat_interval_ms"`
	}
	_ = json.Unmarshal(f.D, &d)
	if f.Op != "ready" || d.AgentID != e.agent.ID || d.Agent != "runner" || d.HeartbeatIntervalMS != 15000 {
		e.t.Fatalf("after identify: %s %s, want ready for runner", f.Op, f.D)
	}
	return c
}

func (c *client) send(s string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageText, []byte(s)); err != nil {
		c.t.Fatalf("write %s: %v", s, err)
	}
}

func (c *client) read() frame {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	typ, b, err := c.c.Read(ctx)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("frame type %v", typ)
	}
	var f frame
	if err := json.Unmarshal(b, &f); err != nil {
		c.t.Fatalf("frame %s: %v", b, err)
	}
	return f
}

// closed waits for the server to close the connection and returns the code.
func (c *client) closed() websocket.StatusCode {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	for {
		_, b, err := c.c.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				c.t.Fatalf("connection not closed within %s", testkit.Wait)
			}
			return websocket.CloseStatus(err)
		}
		c.t.Logf("frame before close: %s", b)
	}
}

func (c *client) ack() {
	c.t.Helper()
	if f := c.read(); f.Op != "heartbeat_ack" || string(f.D) != `{"interval_ms":15000}` {
		c.t.Fatalf("frame = %s %s, want heartbeat_ack {interval_ms:15000}", f.Op, f.D)
	}
}

// sync waits until the server read every frame sent so far (frames of one
// connection are read in order) and the agent part of the heartbeats among
// them ran: it runs off the read loop, after the ack (design: Liveness first), so
// sync polls (bounded) until the owner's status view of agentID is online
// or degraded.
func (c *client) sync(svc *app.Service, owner domain.Person, agentID string) {
	c.t.Helper()
	c.send(`{"op":"heartbeat","d":{}}`)
	c.ack()
	deadline := time.Now().Add(testkit.Wait)
	for {
		if st, err := svc.AgentStatus(c.t.Context(), owner, agentID); err == nil && (st.State == "online" || st.State == "degraded") {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("the agent part of the heartbeat did not run within %s", testkit.Wait)
		}
		time.Sleep(time.Millisecond)
	}
}

type errFrame struct {
	Op, Code, Detail, Pointer, Reason string
	RetryAfterMS                      int64 `json:"retry_after_ms"`
}

func (c *client) errorFrame() errFrame {
	c.t.Helper()
	f := c.read()
	if f.Op != "error" {
		c.t.Fatalf("frame = %s %s, want error", f.Op, f.D)
	}
	var d errFrame
	if err := json.Unmarshal(f.D, &d); err != nil {
		c.t.Fatal(err)
	}
	return d
}

func TestHelloIdentifyReadyAck(t *testing.T) {
	e := newEnv(t)
	c := e.ready()
	c.send(`{"op":"heartbeat","d":{}}`)
	c.ack()
	if st, err := e.svc.AgentStatus(t.Context(), e.admin, e.agent.ID); err != nil || st.State != "unknown" {
		t.Errorf("a heartbeat without member agent changed presence: %+v, %v", st.State, err)
	}
	c.send(`{"op":"heartbeat"}`) // d may be absent
	c.ack()
	c.send(`{"op":"heartbeat","d":{"agent":{"state":"online","billing_mode":"api"}}}`)
	c.ack()
	c.sync(e.svc, e.admin, e.agent.ID)
	if st, _ := e.svc.AgentStatus(t.Context(), e.admin, e.agent.ID); st.State != "online" {
		t.Errorf("state after a heartbeat with agent = %s, want online", st.State)
	}
	st, err := e.svc.AgentStatus(t.Context(), e.admin, "runner")
	if err != nil {
		t.Fatal(err)
	}
	// The server's clock decides freshness, whatever the sender's says.
	if st.LastHeartbeatAt == nil || !st.LastHeartbeatAt.Equal(t0) || deref(st.ReportedBillingMode) != "api" {
		t.Errorf("status = %+v", st)
	}
	if e.gw.Connections() != 1 {
		t.Errorf("connections = %d", e.gw.Connections())
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestDeadline4009: a connection without heartbeats for the deadline (2 ×
// the interval) is closed with 4009; each heartbeat resets it; a client
// that reconnects after 4009 gets a fresh deadline.
func TestDeadline4009(t *testing.T) {
	e := newEnv(t)
	c := e.ready()
	for range 5 { // heartbeats every 29 s keep it open for 2.5 min
		e.clock.Advance(29 * time.Second)
		c.send(`{"op":"heartbeat","d":{}}`)
		c.ack()
	}
	e.clock.Advance(30*time.Second - time.Microsecond)
	c.send(`{"op":"heartbeat","d":{}}`)
	c.ack() // still open 1 µs before the deadline; this resets it
	e.clock.Advance(30 * time.Second)
	if code := c.closed(); code != gateway.CloseHeartbeatDeadline {
		t.Fatalf("close code = %d, want 4009", code)
	}
	// Reconnect: a fresh deadline, not the old one.
	c2 := e.ready()
	e.clock.Advance(29 * time.Second)
	c2.send(`{"op":"heartbeat","d":{}}`)
	c2.ack()
	e.clock.Advance(29 * time.Second)
	c2.send(`{"op":"heartbeat","d":{}}`)
	c2.ack()
}

// TestDeadlineBeforeIdentify: a client that never identifies is closed
// with 4009 too.
func TestDeadlineBeforeIdentify(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	e.clock.Advance(30 * time.Second)
	if code := c.closed(); code != gateway.CloseHeartbeatDeadline {
		t.Fatalf("close code = %d, want 4009", code)
	}
}

func TestIdentifyFails4004(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{
		`{"op":"identify","d":{"token":"rca_wrongwrongwrongwrongwrongwrongwrongwrongwro"}}`,
		`{"op":"identify","d":{"token":"rcp_a-person-token-is-not-an-agent"}}`,
		`{"op":"identify","d":{}}`,
		`{"op":"identify","d":{"token":"x","extra":1}}`,
	} {
		c := e.dial()
		c.send(id)
		if code := c.closed(); code != gateway.CloseAuthFailed {
			t.Errorf("%s: close code = %d, want 4004", id, code)
		}
	}
}

// TestShutdown4013: Shutdown closes every connection with 4013 and refuses
// new ones the same way.
func TestShutdown4013(t *testing.T) {
	e := newEnv(t)
	a, b := e.ready(), e.dial()
	done := make(chan error, 1)
	go func() { done <- e.gw.Shutdown(context.Background()) }()
	for _, c := range []*client{a, b} {
		if code := c.closed(); code != gateway.CloseGoingAway {
			t.Errorf("close code = %d, want 4013", code)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(testkit.Wait):
		t.Fatal("Shutdown did not return")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(e.srv.URL, "http")+"/v1/gateway", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	_, _, err = c.Read(ctx)
	if websocket.CloseStatus(err) != gateway.CloseGoingAway {
		t.Errorf("after shutdown: %v, want close 4013", err)
	}
}

// TestErrorFramesKeepConnection: malformed frames and errors of the agent
// part answer error frames and keep the connection; too many malformed
// frames in a row close it with 1008.
func TestErrorFramesKeepConnection(t *testing.T) {
	e := newEnv(t)
	c := e.dial()
	c.send(`{"op":"heartbeat","d":{}}`) // before identify
	if d := c.errorFrame(); d.Op != "heartbeat" || d.Code != "unauthenticated" {
		t.Errorf("heartbeat before identify: %+v", d)
	}
	c.send(`{"op":"identify","d":{"token":"` + e.cred + `"}}`)
	if f := c.read(); f.Op != "ready" {
		t.Fatalf("%s", f.Op)
	}
	cases := []struct{ frame, op, code, ptr string }{
		{`not json`, "", "invalid_argument", ""},
		{`{"op":"dance","d":{}}`, "dance", "invalid_argument", ""},
		{`{"d":{}}`, "", "invalid_argument", ""},
		{`{"op":"heartbeat","d":{},"x":1}`, "", "unknown_member", "/x"},
		{`{"Op":"heartbeat","d":{}}`, "", "unknown_member", "/Op"},
		{`{"op":"heartbeat","d":{"agent":{"state":"online"}},"d":{}}`, "", "invalid_argument", "/d"},
		{`{"op":1,"d":{}}`, "", "invalid_argument", "/op"},
		{`{"op":"identify","d":{"token":"` + e.cred + `"}}`, "identify", "invalid_argument", ""},
	}
	for _, tc := range cases {
		c.send(tc.frame)
		if d := c.errorFrame(); d.Op != tc.op || d.Code != tc.code || d.Pointer != tc.ptr {
			t.Errorf("%s: error frame %+v, want op %q code %s", tc.frame, d, tc.op, tc.code)
		}
		c.send(`{"op":"heartbeat","d":{}}`)
		c.ack()
	}
	// Errors of the agent part: the ack comes first (liveness first).
	agentErrs := []struct{ agent, code, ptr string }{
		{`{"state":"online","nope":true}`, "unknown_member", "/agent/nope"},
		{`{"state":"degraded"}`, "invalid_argument", "/agent/state"},
		{`"online"`, "invalid_argument", "/agent"},
	}
	for _, tc := range agentErrs {
		c.send(`{"op":"heartbeat","d":{"agent":` + tc.agent + `}}`)
		c.ack()
		if d := c.errorFrame(); d.Op != "heartbeat" || d.Code != tc.code || d.Pointer != tc.ptr {
			t.Errorf("agent %s: error frame %+v, want %s at %s", tc.agent, d, tc.code, tc.ptr)
		}
	}
	c.send(`{"op":"heartbeat","d":{"other":1}}`) // heartbeat d is closed too
	c.ack()
	if d := c.errorFrame(); d.Op != "heartbeat" || d.Code != "unknown_member" || d.Pointer != "/other" {
		t.Errorf("unknown member of d: %+v", d)
	}
	// Binary frames are malformed.
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	if err := c.c.Write(ctx, websocket.MessageBinary, []byte(`{"op":"heartbeat"}`)); err != nil {
		t.Fatal(err)
	}
	if d := c.errorFrame(); d.Code != "invalid_argument" {
		t.Errorf("binary frame: %+v", d)
	}
	c.send(`{"op":"heartbeat","d":{}}`)
	c.ack()
	// Eight malformed frames in a row: 1008.
	for range gateway.DefaultMaxBadFrames - 1 {
		c.send(`{`)
		c.errorFrame()
	}
	c.send(`{`)
	c.errorFrame()
	if code := c.closed(); code != websocket.StatusPolicyViolation {
		t.Errorf("close code = %d, want 1008", code)
	}
}

// TestGatewayRateLimit: over the principal's rate the agent part answers
// rate_limited with retry_after_ms, after the ack; the connection stays.
func TestGatewayRateLimit(t *testing.T) {
	e := newEnv(t)
	c := e.ready()
	limited := 0
	for range app.DefaultHeartbeatBurst + 3 {
		c.send(`{"op":"heartbeat","d":{"agent":{"state":"online"}}}`)
		c.ack()
		// Ask for a cheap answer to learn whether an error frame came first.
		c.send(`{"op":"nop"}`)
		d := c.errorFrame()
		if d.Op == "heartbeat" {
			if d.Code != "rate_limited" || d.RetryAfterMS <= 0 {
				t.Errorf("rate limited frame = %+v", d)
			}
			limited++
			c.errorFrame() // the nop's
		}
	}
	if limited != 3 {
		t.Errorf("limited = %d, want 3", limited)
	}
}

// TestRevokeClosesConnection: revoking the agent closes its gateway
// connections with 4004.
func TestRevokeClosesConnection(t *testing.T) {
	e := newEnv(t)
	c := e.ready()
	if _, err := e.svc.RevokeAgent(t.Context(), e.admin, "runner"); err != nil {
		t.Fatal(err)
	}
	if code := c.closed(); code != gateway.CloseAuthFailed {
		t.Errorf("close code = %d, want 4004", code)
	}
}

// TestReadLimit: a frame over gateway.ReadLimit closes the connection with
// 1009 (message too big).
func TestReadLimit(t *testing.T) {
	e := newEnv(t)
	c := e.ready()
	big := `{"op":"heartbeat","d":{"agent":{"state":"online","billing_mode":"` + strings.Repeat("a", gateway.ReadLimit) + `"}}}`
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	_ = c.c.Write(ctx, websocket.MessageText, []byte(big))
	if code := c.closed(); code != websocket.StatusMessageTooBig {
		t.Errorf("close code = %d, want 1009", code)
	}
}

// TestRecheckClosesWithoutBusSignal: a credential revoked behind the
// gateway's back (no bus signal: another instance revoked it and the
// NOTIFY was lost) closes the connection with 4004 within one re-check
// period (design: Revocation within 5 s).
func TestRecheckClosesWithoutBusSignal(t *testing.T) {
	e := newEnv(t)
	c := e.ready()
	_, err := e.st.RevokeAgent(t.Context(), store.RevokeAgentParams{ID: e.agent.ID, Now: e.clock.Now(),
		Audit: domain.AuditRecord{Actor: "system", Action: "agent.revoke", AgentID: e.agent.ID}})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(app.RecheckInterval)
	if code := c.closed(); code != gateway.CloseAuthFailed {
		t.Errorf("close code = %d, want 4004", code)
	}
}

// An unmasked client frame is a protocol error (RFC 6455 §5.1): the
// connection is closed, not left open without a deadline (a client could
// otherwise hold server connections forever without a credential).
func TestUnmaskedFrameClosesConnection(t *testing.T) {
	e := newEnv(t)
	nc, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "GET /v1/gateway HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", strings.TrimPrefix(e.srv.URL, "http://"))
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	payload := []byte(`{"op":"identify","d":{"token":"x"}}`)
	if _, err := nc.Write(append([]byte{0x81, byte(len(payload))}, payload...)); err != nil { // FIN text, no mask bit
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(testkit.Wait))
	if _, err := io.Copy(io.Discard, br); err != nil { // hello, maybe a close frame, then EOF
		t.Fatalf("connection not closed after an unmasked frame: %v", err)
	}
}
