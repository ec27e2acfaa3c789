package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/mcpserver"
	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/testkit"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// wait is the generous bound of every wait on a channel in these tests: an
// upper bound only (nothing waits for it to pass), wide enough for a busy
// 2-core machine under the race detector.
const wait = 30 * time.Second

// env is one real stack: SQLite store, use cases on a fake clock, the MCP
// adapter behind an httptest server at /mcp.
type env struct {
	t     testing.TB
	ctx   context.Context
	clock *clockwork.FakeClock
	svc   *app.Service
	store *sqlite.Store
	work  *workgroup.Group // the service's background work (digests)
	srv   *mcpserver.Server
	ts    *httptest.Server
	url   string
	admin domain.Person
	// adminToken is the admin's person token (REST's credential, refused
	// on /mcp).
	adminToken string

	logs *testkit.SyncBuffer

	mu      sync.Mutex
	creds   []string
	events  map[string]chan mcpserver.Event // session id → its events
	skipped map[string][]mcpserver.Event    // session id → events waitEvent passed over
	onEvent func(mcpserver.Event)
}

type envOption func(*mcpserver.Options)

// appClock, as Options.Clock, makes newEnv give the adapter the use cases'
// fake clock.
var appClock clockwork.Clock = clockwork.NewFakeClock()

func withAppClock(o *mcpserver.Options) { o.Clock = appClock }

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	return newEnvServer(t, nil, opts...)
}

// newEnvServer is newEnv with hook applied to the test HTTP server before
// it starts.
func newEnvServer(t testing.TB, hook func(*httptest.Server), opts ...envOption) *env {
	t.Helper()
	ctx := context.Background()
	st := testkit.OpenSQLite(t)
	e := &env{t: t, ctx: ctx, clock: clockwork.NewFakeClockAt(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)),
		logs: &testkit.SyncBuffer{}, events: map[string]chan mcpserver.Event{}, skipped: map[string][]mcpserver.Event{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.store = st
	e.work = &workgroup.Group{}
	e.svc = app.New(app.Options{Store: st, Clock: e.clock, Log: log, Background: e.work})
	t.Cleanup(e.svc.Close) // background digests end before the store closes
	e.admin, e.adminToken = testkit.BootstrapAdmin(t, e.svc)
	// Pings are off unless a test asks for them (withPings): tests that
	// advance the fake clock by minutes would otherwise race the answers.
	o := mcpserver.Options{Log: log, OnEvent: e.record, PingInterval: -1}
	for _, f := range opts {
		f(&o)
	}
	if o.Clock == appClock {
		o.Clock = e.clock
	}
	e.srv = mcpserver.New(e.svc, o)
	mux := http.NewServeMux()
	mux.Handle("/mcp", e.srv)
	e.ts = httptest.NewUnstartedServer(mux)
	if hook != nil {
		hook(e.ts)
	}
	e.ts.Start()
	e.url = e.ts.URL + "/mcp"
	e.svc.SetPublicURL(e.ts.URL)
	t.Cleanup(func() {
		e.ts.CloseClientConnections()
		e.ts.Close()
	})
	t.Cleanup(e.srv.Close)
	t.Cleanup(func() {
		// A credential is never logged.
		out := e.logs.String()
		if t.Failed() {
			t.Logf("server log:\n%s", out)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, c := range e.creds {
			if strings.Contains(out, c) {
				t.Errorf("a credential appears in the logs")
			}
		}
	})
	return e
}

// settle waits for the service's background work running now (the digests
// of transitions) to finish.
func (e *env) settle() { e.work.Wait() }

// ringHub is the real session hub with every todo doorbell it queued
// observed (a digest carries no todo_id and is not one).
type ringHub struct {
	*mcpserver.Server
	on func(sessionID string, m domain.ChannelMessage)
}

func (h ringHub) Notify(id string, m domain.ChannelMessage) error {
	if err := h.Server.Notify(id, m); err != nil {
		return err
	}
	if m.Meta["todo_id"] != "" {
		h.on(id, m)
	}
	return nil
}

// onRing makes f observe, on the ringing goroutine, every todo doorbell
// queued from now on.
func (e *env) onRing(f func(sessionID string, m domain.ChannelMessage)) {
	e.svc.SetSessionHub(ringHub{e.srv, f})
}

func (e *env) record(ev mcpserver.Event) {
	e.mu.Lock()
	f := e.onEvent
	e.mu.Unlock()
	if f != nil {
		f(ev)
	}
	select {
	case e.eventsOf(ev.SessionID) <- ev:
	default:
		e.t.Errorf("event buffer of session %s full", ev.SessionID)
	}
}

func (e *env) eventsOf(id string) chan mcpserver.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	ch := e.events[id]
	if ch == nil {
		ch = make(chan mcpserver.Event, 1024)
		e.events[id] = ch
	}
	return ch
}

// waitEvent waits for the session's next event of kind that no earlier
// waitEvent returned; events of other kinds stay for later calls.
func (e *env) waitEvent(id string, kind mcpserver.EventKind) mcpserver.Event {
	e.t.Helper()
	ch := e.eventsOf(id)
	e.mu.Lock()
	for i, ev := range e.skipped[id] {
		if ev.Kind == kind {
			e.skipped[id] = append(e.skipped[id][:i:i], e.skipped[id][i+1:]...)
			e.mu.Unlock()
			return ev
		}
	}
	e.mu.Unlock()
	deadline := time.After(wait)
	for {
		select {
		case ev := <-ch:
			if ev.Kind == kind {
				return ev
			}
			e.mu.Lock()
			e.skipped[id] = append(e.skipped[id], ev)
			e.mu.Unlock()
		case <-deadline:
			e.t.Fatalf("session %s: no %s event within %v", id, kind, wait)
			return mcpserver.Event{}
		}
	}
}

func (e *env) vend(handle string, verbs []string, queues ...string) app.VendResult {
	e.t.Helper()
	res, err := e.svc.Vend(e.ctx, e.admin, app.VendInput{Handle: handle, Queues: queues, Verbs: verbs})
	if err != nil {
		e.t.Fatalf("Vend %s: %v", handle, err)
	}
	e.mu.Lock()
	e.creds = append(e.creds, res.Credential)
	e.mu.Unlock()
	return res
}

func (e *env) push(handle, queue, title string, mod ...func(*app.PushInput)) domain.Todo {
	e.t.Helper()
	in := app.PushInput{Queue: queue, Title: title}
	for _, f := range mod {
		f(&in)
	}
	td, created, err := e.svc.PushTodo(e.ctx, e.admin, handle, in)
	if err != nil || !created {
		e.t.Fatalf("PushTodo: created=%v err=%v", created, err)
	}
	return td
}

func (e *env) sessions(agentID string) []app.SessionInfo { return e.srv.AgentSessions(agentID) }

// agentClient is a real mcp-go client on a session of its own.
type agentClient struct {
	t     testing.TB
	c     *client.Client
	id    string
	init  *mcp.InitializeResult
	notes chan mcp.JSONRPCNotification
}

type clientConfig struct {
	listen   bool
	version  string // "" = unpinned (mcp-go's default negotiation)
	session  string // reuse this session id (skip initialize)
	noCreds  bool
	initSkip bool
}

// adaSession is a fresh env with agent "ada" granted every verb in queue
// "q1" and one initialized session of it (protocol 2025-11-25, no stream).
func adaSession(t *testing.T) (*env, app.VendResult, *agentClient) {
	t.Helper()
	e := newEnv(t)
	a := e.vend("ada", allVerbs, "q1")
	return e, a, e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
}

func (e *env) connect(cred string, cfg clientConfig) *agentClient {
	e.t.Helper()
	ac, err := e.dial(cred, cfg)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	return ac
}

// listen connects a 2025-11-25 session of cred with its GET stream open
// and waits until the server has seen the stream open.
func (e *env) listen(cred string) *agentClient {
	e.t.Helper()
	ac := e.connect(cred, clientConfig{version: mcp.ProtocolVersion20251125, listen: true})
	e.waitEvent(ac.sessionID(), mcpserver.StreamOpened)
	return ac
}

func (e *env) dial(cred string, cfg clientConfig) (*agentClient, error) {
	quiet := slog.New(slog.DiscardHandler)
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPLogger(quiet)}
	if !cfg.noCreds {
		// The bearer goes on in the round tripper: mcp-go's client sends
		// the DELETE of Close without its configured headers.
		topts = append(topts, transport.WithHTTPBasicClient(&http.Client{Transport: bearer{cred, e.ts.Client().Transport}}))
	}
	if cfg.listen {
		//lint:ignore SA1019 the GET stream is exactly what sessions of 2025-06-18/2025-11-25 use (design: MCP sessions)
		topts = append(topts, transport.WithContinuousListening())
	}
	if cfg.session != "" {
		topts = append(topts, transport.WithSession(cfg.session))
	}
	tr, err := transport.NewStreamableHTTP(e.url, topts...)
	if err != nil {
		return nil, err
	}
	var copts []client.ClientOption
	if cfg.version != "" {
		copts = append(copts, client.WithProtocolVersion(cfg.version))
	}
	if cfg.session != "" {
		copts = append(copts, client.WithSession())
	}
	ac := &agentClient{t: e.t, c: client.NewClient(tr, copts...), id: cfg.session, notes: make(chan mcp.JSONRPCNotification, 1024)}
	ac.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == domain.ChannelMethod {
			ac.notes <- n
		}
	})
	if err := ac.c.Start(context.Background()); err != nil {
		return nil, err
	}
	e.t.Cleanup(func() { ac.c.Close() })
	if cfg.session != "" || cfg.initSkip {
		return ac, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = cfg.version
	req.Params.ClientInfo = mcp.Implementation{Name: "rollcall-test", Version: "1"}
	ac.init, err = ac.c.Initialize(ctx, req)
	if err != nil {
		return nil, err
	}
	ac.id = ac.c.GetSessionId()
	return ac, nil
}

// sessionID is the id of the session the client opened (it stays known
// after the client forgot it, on Close or a 404).
func (ac *agentClient) sessionID() string { return ac.id }

// bearer adds the agent credential to every request of a client.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

func (ac *agentClient) call(name string, args any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return ac.c.CallTool(ctx, req)
}

// ok calls a tool that must succeed and decodes its structuredContent
// into out (when non-nil). The text content must be the same JSON.
func (ac *agentClient) ok(name string, args any, out any) {
	ac.t.Helper()
	res, err := ac.call(name, args)
	if err != nil {
		ac.t.Fatalf("%s(%v): %v", name, args, err)
	}
	text := resultText(ac.t, res)
	if res.IsError {
		ac.t.Fatalf("%s(%v): tool error %s", name, args, text)
	}
	sc, err := json.Marshal(res.StructuredContent)
	if err != nil {
		ac.t.Fatalf("structuredContent: %v", err)
	}
	if !jsonEqual(sc, []byte(text)) {
		ac.t.Fatalf("%s: structuredContent %s differs from text %s", name, sc, text)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			ac.t.Fatalf("%s: decoding %s: %v", name, text, err)
		}
	}
}

type toolErr struct {
	Code    domain.Code `json:"code"`
	Detail  string      `json:"detail"`
	Pointer string      `json:"pointer"`
	Reason  string      `json:"reason"`
}

// fails calls a tool that must answer a tool error (isError) and returns it.
func (ac *agentClient) fails(name string, args any) toolErr {
	ac.t.Helper()
	res, err := ac.call(name, args)
	if err != nil {
		ac.t.Fatalf("%s(%v): want a tool error result, got a protocol error %v", name, args, err)
	}
	text := resultText(ac.t, res)
	if !res.IsError {
		ac.t.Fatalf("%s(%v): want isError, got %s", name, args, text)
	}
	var te toolErr
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&te); err != nil || te.Code == "" || te.Detail == "" {
		ac.t.Fatalf("%s: error text %s is not {code, detail, pointer}: %v", name, text, err)
	}
	return te
}

func (ac *agentClient) listTools() []mcp.Tool {
	ac.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := ac.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		ac.t.Fatalf("tools/list: %v", err)
	}
	return res.Tools
}

// note waits for the next channel notification.
func (ac *agentClient) note() mcp.JSONRPCNotification {
	ac.t.Helper()
	select {
	case n := <-ac.notes:
		return n
	case <-time.After(wait):
		ac.t.Fatalf("no %s within %v", domain.ChannelMethod, wait)
		return mcp.JSONRPCNotification{}
	}
}

// noNote asserts that no channel notification has arrived (call it after a
// fence: a round trip on the same session, or a later notification).
func (ac *agentClient) noNote() {
	ac.t.Helper()
	select {
	case n := <-ac.notes:
		ac.t.Fatalf("unexpected notification %+v", n.Params.AdditionalFields)
	default:
	}
}

// roundTrip makes a request on the session: a notification queued for a
// session without a GET stream is written into this response first.
func (ac *agentClient) roundTrip() {
	ac.t.Helper()
	ac.listTools()
}

func resultText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content item, got %d", len(res.Content))
	}
	tc, ok := mcp.AsTextContent(res.Content[0])
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// channelParams reads content and meta of a channel notification.
func channelParams(t testing.TB, n mcp.JSONRPCNotification) (string, map[string]string) {
	t.Helper()
	content, ok := n.Params.AdditionalFields["content"].(string)
	if !ok {
		t.Fatalf("content missing in %+v", n.Params.AdditionalFields)
	}
	raw, ok := n.Params.AdditionalFields["meta"].(map[string]any)
	if !ok {
		t.Fatalf("meta missing in %+v", n.Params.AdditionalFields)
	}
	meta := map[string]string{}
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("meta %s is %T, want a string", k, v)
		}
		meta[k] = s
	}
	return content, meta
}

// raw sends a plain HTTP request to the endpoint (for HTTP-level checks).
func (e *env) raw(method, cred, session string, body string, hdr ...string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, e.url, err)
	}
	return resp
}

type problemDoc struct {
	Type   string      `json:"type"`
	Title  string      `json:"title"`
	Status int         `json:"status"`
	Detail string      `json:"detail"`
	Code   domain.Code `json:"code"`
	Reason string      `json:"reason"`
}

// wantProblem checks an RFC 9457 problem response and closes its body.
func wantProblem(t testing.TB, resp *http.Response, status int, code domain.Code) problemDoc {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d (%s)", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json", ct)
	}
	var p problemDoc
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem %s: %v", body, err)
	}
	if p.Status != status || p.Code != code || p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Fatalf("problem %+v, want status %d code %s and every member set", p, status, code)
	}
	// The REST API's convention (httpapi.ProblemTypePrefix).
	if p.Type != "urn:rollcall:problem:"+string(code) {
		t.Fatalf("problem type %q, want urn:rollcall:problem:%s", p.Type, code)
	}
	return p
}

// within runs f in a goroutine and fails unless it returns within wait: a
// bound on "never blocks" without sleeping.
func within(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatalf("%s did not return within %v", what, wait)
	}
}
