package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/connhub"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/edge"
)

// ServerName is the initialize result's serverInfo.name (design: MCP sessions).
const ServerName = "rollcall"

// Version is the initialize result's serverInfo.version; release builds set
// it with -ldflags "-X github.com/rollcall/rollcall/internal/mcpserver.Version=v1.2.3".
var Version = "dev"

// ChannelCapability is the experimental capability Claude Code looks for
// before it accepts channel notifications (design: MCP sessions).
const ChannelCapability = "claude/channel"

// ProtocolVersions are the MCP revisions served, newest first: both use
// initialize and session-based Streamable HTTP (design: MCP sessions). A client
// asking initialize for any other version is answered with the newest.
var ProtocolVersions = []string{mcp.ProtocolVersion20251125, mcp.ProtocolVersion20250618}

// Defaults of Options.
const (
	DefaultKeepAlive           = 25 * time.Second
	DefaultIdleTimeout         = 30 * time.Minute
	DefaultInitTimeout         = 60 * time.Second
	DefaultMaxBodyBytes        = 1 << 20 // 1 MiB
	DefaultWriteTimeout        = 10 * time.Second
	DefaultMaxSessionsPerAgent = 32
	// DefaultStreamlessIdleTimeout expires a session that never opened a
	// GET stream once it has been idle this long (design: Session cap: health
	// checks and CLIs that never send DELETE).
	DefaultStreamlessIdleTimeout = 2 * time.Minute
)

// Options configures a Server. The zero value is usable.
type Options struct {
	// Log receives session lifecycle and failures; nil = slog.Default().
	// Credentials are never logged.
	Log *slog.Logger
	// AllowedHosts are extra Host header values (host names, port ignored,
	// case-insensitive) accepted on a loopback listener. Without them a
	// request that arrives over loopback must name a loopback host
	// (localhost, 127.0.0.1, [::1]): DNS rebinding protection. Requests
	// arriving over other interfaces are not checked.
	AllowedHosts []string
	// AllowedOrigins are the Origin header values accepted besides the
	// server's own origin (scheme://host[:port]). A request with any other
	// Origin answers 403. Requests without Origin (non-browser clients) pass.
	AllowedOrigins []string
	// KeepAlive is the interval of the SSE comment written on every open GET
	// stream, so proxies keep it and a dead client is noticed by a failing
	// write. 0 = DefaultKeepAlive; negative disables.
	KeepAlive time.Duration
	// IdleTimeout closes a session that has had no request in flight and no
	// open GET stream for this long. 0 = DefaultIdleTimeout; negative
	// disables.
	IdleTimeout time.Duration
	// InitTimeout closes a session whose client has not sent
	// notifications/initialized this long after its initialize, whatever
	// it is doing meanwhile. 0 = DefaultInitTimeout; negative disables.
	InitTimeout time.Duration
	// StreamlessIdleTimeout closes a session that never opened a GET stream
	// and has had no request in flight for this long. 0 =
	// DefaultStreamlessIdleTimeout; negative disables.
	StreamlessIdleTimeout time.Duration
	// MaxSessionsPerAgent bounds the sessions one agent holds on this
	// instance, initialized or pending (initialize answered or in flight,
	// notifications/initialized not yet sent). An initialize at the bound
	// evicts the agent's least recently used session without an open
	// stream, else its oldest session (design: Session cap); only when every
	// place is an initialize still in flight does it answer 429
	// rate_limited with Retry-After. 0 = DefaultMaxSessionsPerAgent;
	// negative = no limit.
	MaxSessionsPerAgent int
	// MaxBodyBytes bounds a POST body; larger answers 413 invalid_argument.
	// 0 = DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// WriteTimeout bounds one keepalive write on a stream; a client that
	// does not read for that long loses the stream. 0 = DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Hub is the instance's connection hub, shared with the gateway
	// (design: Connection hub): sessions register in it under their agent
	// and credential, and its revocations and re-check close them. nil = a
	// hub of the server's own (no bus subscription: the use cases reach it
	// through CloseAgentSessions), closed by Close.
	Hub *connhub.Hub
	// Recheck is how often the server's own hub (Hub nil) re-checks the
	// credentials of all sessions; 0 = app.RecheckInterval, negative
	// disables.
	Recheck time.Duration
	// ReplayEvents and ReplayWindow bound each session's log of GET-stream
	// events kept for a resume with Last-Event-ID: at most ReplayEvents
	// events, none older than ReplayWindow. 0 = DefaultReplayEvents,
	// DefaultReplayWindow.
	ReplayEvents int
	ReplayWindow time.Duration
	// Clock drives keepalive and idle expiry; nil = real clock.
	Clock clockwork.Clock
	// OnEvent, when set, observes session and stream lifecycle (metrics,
	// tests). It runs on the goroutine that caused the event and must not
	// block.
	OnEvent func(Event)
}

// EventKind names a lifecycle event of Options.OnEvent.
type EventKind string

// Lifecycle events.
const (
	SessionOpened EventKind = "session_opened" // initialize answered, session registered
	SessionClosed EventKind = "session_closed" // Reason says why
	StreamOpened  EventKind = "stream_opened"  // a GET stream's headers are written and flushed
	StreamClosed  EventKind = "stream_closed"  // that GET request has ended
)

// Event is one lifecycle event of a session.
type Event struct {
	Kind      EventKind
	SessionID string
	AgentID   string
	Reason    string // SessionClosed only
}

func (s *Server) emit(e Event) {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(e)
	}
}

// Server is the MCP endpoint (an http.Handler for /mcp) and this instance's
// app.SessionHub. It is safe for concurrent use.
type Server struct {
	svc  *app.Service
	log  *slog.Logger
	opts Options

	mcp  *server.MCPServer
	http *server.StreamableHTTPServer

	// hub indexes the sessions by agent (with the gateway's connections);
	// a session is registered and unregistered in it under mu.
	hub    *connhub.Hub
	ownHub bool // hub is the server's own: Close closes it

	mu       sync.RWMutex
	sessions map[string]*session // id → session
	reserved map[string]int      // agent id → initializes in flight, not yet bound
	closing  bool

	stop      chan struct{}
	loops     sync.WaitGroup // keepalive and expiry loops
	closeOnce sync.Once
}

var (
	_ http.Handler   = (*Server)(nil)
	_ app.SessionHub = (*Server)(nil)
)

// New builds the MCP endpoint for svc and attaches it as svc's session hub
// (svc.SetSessionHub). Call Close when done: it stops the keepalive and
// expiry loops and closes every session.
func New(svc *app.Service, opts Options) *Server {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.KeepAlive == 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.InitTimeout == 0 {
		opts.InitTimeout = DefaultInitTimeout
	}
	if opts.StreamlessIdleTimeout == 0 {
		opts.StreamlessIdleTimeout = DefaultStreamlessIdleTimeout
	}
	if opts.MaxSessionsPerAgent == 0 {
		opts.MaxSessionsPerAgent = DefaultMaxSessionsPerAgent
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.ReplayEvents <= 0 {
		opts.ReplayEvents = DefaultReplayEvents
	}
	if opts.ReplayWindow <= 0 {
		opts.ReplayWindow = DefaultReplayWindow
	}
	s := &Server{
		svc: svc, log: opts.Log, opts: opts,
		sessions: map[string]*session{}, reserved: map[string]int{},
		stop: make(chan struct{}), hub: opts.Hub,
	}

	hooks := &server.Hooks{}
	hooks.AddOnRegisterSession(func(_ context.Context, cs server.ClientSession) { s.registered(cs.SessionID()) })
	hooks.AddOnUnregisterSession(func(_ context.Context, cs server.ClientSession) { s.forget(cs.SessionID(), "ended by the transport") })
	hooks.AddBeforeInitialize(func(_ context.Context, _ any, req *mcp.InitializeRequest) {
		// Answer an unsupported version with the newest one we serve
		// (MCP lifecycle: the client then decides whether to go on).
		if !slices.Contains(ProtocolVersions, req.Params.ProtocolVersion) {
			req.Params.ProtocolVersion = ProtocolVersions[0]
		}
	})
	s.mcp = server.NewMCPServer(ServerName, Version,
		server.WithToolCapabilities(false),
		server.WithExperimental(map[string]any{ChannelCapability: map[string]any{}}),
		server.WithInstructions(Instructions),
		server.WithHooks(hooks),
		server.WithToolFilter(s.filterTools),
	)
	for _, v := range allVerbs() {
		s.mcp.AddTool(v.mcpTool(), s.toolHandler(v))
	}
	s.http = server.NewStreamableHTTPServer(s.mcp,
		server.WithSessionIdManager(sessionIDs{s}),
		server.WithStreamableHTTPProtocolVersions(ProtocolVersions...),
		// Host checks happen in ServeHTTP (with Options.AllowedHosts).
		server.WithDisableLocalhostProtection(true),
		server.WithStreamableHTTPLogger(opts.Log),
	)
	svc.SetSessionHub(s)

	if opts.KeepAlive > 0 {
		s.loops.Add(1)
		go s.keepAliveLoop()
	}
	if opts.IdleTimeout > 0 || opts.InitTimeout > 0 || opts.StreamlessIdleTimeout > 0 {
		s.loops.Add(1)
		go s.expireLoop()
	}
	if opts.Recheck == 0 {
		opts.Recheck = app.RecheckInterval
		s.opts.Recheck = opts.Recheck
	}
	if s.hub == nil {
		s.hub, s.ownHub = connhub.New(connhub.Options{Clock: opts.Clock, Log: opts.Log, Recheck: opts.Recheck,
			NoLongerValid: func(m map[string][]connhub.Conn) ([]connhub.Conn, error) { return app.NoLongerValid(svc, m) }}), true
	}
	return s
}

// Close stops the background loops and closes every session: their open GET
// streams end, and later requests with their ids answer 404. New requests
// answer 503. Close is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		ids := make([]string, 0, len(s.sessions))
		for id := range s.sessions {
			ids = append(ids, id)
		}
		s.mu.Unlock()
		close(s.stop)
		s.loops.Wait()
		if s.ownHub {
			s.hub.Close()
		}
		for _, id := range ids {
			s.closeSession(id, "server closing")
		}
	})
}

type principalKey struct{}

// principalFrom returns the authenticated principal ServeHTTP put on the
// request context, or nil.
func principalFrom(ctx context.Context) *domain.Principal {
	p, _ := ctx.Value(principalKey{}).(*domain.Principal)
	return p
}

// ServeHTTP serves the MCP endpoint: POST (JSON-RPC messages), GET (the
// session's notification stream) and DELETE (end the session). See the
// package documentation for the checks it applies before mcp-go sees a
// request. HTTP-level refusals are RFC 9457 problem documents.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		writeProblem(w, http.StatusMethodNotAllowed, domain.CodeMethodNotAllowed, "the MCP endpoint accepts POST, GET and DELETE")
		return
	}
	if detail := s.checkHostOrigin(r); detail != "" {
		writeProblem(w, http.StatusForbidden, domain.CodeForbidden, detail)
		return
	}
	s.mu.RLock()
	closing := s.closing
	s.mu.RUnlock()
	if closing {
		writeProblem(w, http.StatusServiceUnavailable, domain.CodeInternal, "the server is shutting down; reconnect")
		return
	}
	if r.Method == http.MethodDelete && r.Header.Get("Authorization") == "" && r.Header.Get(server.HeaderKeySessionID) != "" {
		s.deleteByID(w, r)
		return
	}
	p, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	var body []byte
	var msg jsonrpcPeek
	if r.Method == http.MethodPost {
		if body, ok = s.readBody(w, r); !ok {
			return
		}
		if err := json.Unmarshal(body, &msg); err != nil {
			// Answered here, before any session check: malformed JSON is
			// not a missing Mcp-Session-Id.
			writeJSONRPCInvalid(w, body)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		// Tools find the agent here. (Only POSTs run tools: a GET stream
		// would keep the agent row for its whole life.)
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, &p))
	}

	version := r.Header.Get(mcp.HeaderProtocolVersion)
	if mcp.IsModernProtocol(version) || mcp.IsModernProtocol(msg.Params.Meta.ProtocolVersion()) {
		// The stateless revision: mcp-go refuses it (it is not among
		// ProtocolVersions) with an error naming the versions we serve.
		s.http.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodPost && msg.Method == string(mcp.MethodInitialize) {
		s.serveInitialize(w, r, &p)
		return
	}
	if version != "" && !slices.Contains(ProtocolVersions, version) {
		writeProblem(w, http.StatusBadRequest, domain.CodeInvalidArgument,
			"unsupported "+mcp.HeaderProtocolVersion+" "+quote(version)+"; this server speaks "+strings.Join(ProtocolVersions, " and "))
		return
	}
	id := r.Header.Get(server.HeaderKeySessionID)
	if id == "" {
		writeProblem(w, http.StatusBadRequest, domain.CodeInvalidArgument,
			"the "+server.HeaderKeySessionID+" header is required: send initialize first and repeat the id it returned")
		return
	}
	sess, ok := s.enter(w, r, id, &p)
	if !ok {
		return
	}
	defer s.leave(sess)
	switch {
	case r.Method == http.MethodGet:
		s.serveStream(w, r, sess)
	default:
		if msg.Method == string(mcp.MethodNotificationInitialized) {
			s.markInitialized(sess)
		}
		s.http.ServeHTTP(noteWriter{ResponseWriter: w, s: s, x: sess}, r)
		s.acted(sess)
	}
}

// deleteByID ends the session a credential-less DELETE names. The id is a
// 192-bit secret bound to its credential at initialize, so knowing it is
// proof enough to end that one session and nothing else (design:
// MCP sessions): clients such as mcp-go send their DELETE without the
// headers of the rest of the session, and a 401 would be counted as a
// failed authentication against the whole host. An id that names no live
// session answers 404, not 401: it is not a failed authentication either.
func (s *Server) deleteByID(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.enter(w, r, r.Header.Get(server.HeaderKeySessionID), nil)
	if !ok {
		return
	}
	defer s.leave(sess)
	s.http.ServeHTTP(w, r)
}

// acted records that the session's client made a request (not a GET):
// proof it still acts, which clears a stall (design: Stream writes).
func (s *Server) acted(x *session) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	x.lastPost, x.stalled = now, false
	s.mu.Unlock()
}

// jsonrpcPeek is what ServeHTTP reads of a POSTed message.
type jsonrpcPeek struct {
	Method string `json:"method"`
	Params struct {
		Meta *mcp.Meta `json:"_meta"`
	} `json:"params"`
}

// jsonrpcError is a JSON-RPC 2.0 error response with a null id.
type jsonrpcError struct {
	JSONRPC string `json:"jsonrpc"`
	ID      any    `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeJSONRPCInvalid answers a POST body that is not one JSON-RPC message
// object the way mcp-go answers one on a session: HTTP 400 with a JSON-RPC
// error, -32700 (parse error) for malformed JSON, -32600 (invalid request)
// for valid JSON of the wrong shape.
func writeJSONRPCInvalid(w http.ResponseWriter, body []byte) {
	var e jsonrpcError
	e.JSONRPC = "2.0"
	if json.Valid(body) {
		e.Error.Code, e.Error.Message = mcp.INVALID_REQUEST, "Invalid Request: the body must be one JSON-RPC 2.0 message object"
	} else {
		e.Error.Code, e.Error.Message = mcp.PARSE_ERROR, "Parse error: the request body is malformed JSON"
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(e)
}

// authenticate resolves the bearer credential. It writes the refusal and
// returns false on failure: 401 (missing or wrong, with WWW-Authenticate),
// 403 (inactive agent; a person's token, reason subject_kind_not_allowed,
// like an agent credential on a REST operator route), 500.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (domain.Principal, bool) {
	// A refusal comes before the body is read: it closes the connection
	// instead of letting net/http drain a body the client may never send
	// (an unauthenticated client held the connection until the read
	// timeout). Set before the refusal is written, dropped on success.
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
	}
	p, ok := s.authenticateHeader(w, r)
	if ok {
		w.Header().Del("Connection")
	}
	return p, ok
}

func (s *Server) authenticateHeader(w http.ResponseWriter, r *http.Request) (domain.Principal, bool) {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rollcall"`)
		writeProblem(w, http.StatusUnauthorized, domain.CodeUnauthenticated,
			"an agent credential is required: Authorization: Bearer <credential>")
		return domain.Principal{}, false
	}
	var p domain.Principal
	var err error
	if strings.HasPrefix(token, app.AgentTokenPrefix) {
		// Tool calls do not look the credential up every time: a cache of
		// app.CredentialCacheTTL, invalidated by revoke (design: Credential cache).
		p, err = s.svc.AuthenticateAgentCached(r.Context(), token)
	} else {
		p, err = s.svc.Authenticate(r.Context(), token)
	}
	if err == nil && p.Agent == nil { // a valid person token
		writeProblemErr(w, http.StatusForbidden, &domain.Error{Code: domain.CodeForbidden, Reason: "subject_kind_not_allowed",
			Detail: "/mcp is for agents; a person's token was presented (persons use the REST API under /v1)"})
		return domain.Principal{}, false
	}
	if err == nil {
		return p, true
	}
	de, known := asDomainError(err)
	switch {
	case !known:
		s.log.Error("mcp authentication failed", "err", err, "remote", r.RemoteAddr)
		writeProblemErr(w, statusOf(de.Code), de)
	case de.Code == domain.CodeUnauthenticated:
		s.log.Debug("mcp request with an invalid credential refused", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="rollcall", error="invalid_token"`)
		writeProblemErr(w, http.StatusUnauthorized, de)
	default:
		writeProblemErr(w, statusOf(de.Code), de)
	}
	return domain.Principal{}, false
}

// readBody reads a POST body of at most Options.MaxBodyBytes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	max := s.opts.MaxBodyBytes
	tooLarge := func() ([]byte, bool) {
		writeProblem(w, http.StatusRequestEntityTooLarge, domain.CodeInvalidArgument,
			"the request body exceeds the limit of "+itoa(max)+" bytes")
		return nil, false
	}
	if r.ContentLength > max {
		return tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge()
		}
		writeProblem(w, http.StatusBadRequest, domain.CodeInvalidArgument, "reading the request body failed")
		return nil, false
	}
	return body, true
}

// checkHostOrigin returns why the request is refused, or "": the edge's
// rule (edge.Policy) with AllowedHosts and AllowedOrigins. On a loopback
// listener the Host must be a loopback name or one of AllowedHosts (DNS
// rebinding); an Origin, when sent, must be the server's own or one of
// AllowedOrigins.
func (s *Server) checkHostOrigin(r *http.Request) string {
	return edge.Policy{AllowedHosts: s.opts.AllowedHosts, AllowedOrigins: s.opts.AllowedOrigins}.Check(r)
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
