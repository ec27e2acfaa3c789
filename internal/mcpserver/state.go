package mcpserver

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/connhub"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/ssestream"
)

// The records of the MCP endpoint: its configuration and lifecycle events,
// the Server, and what it holds per session (the session, its GET streams,
// its replay log). The operations on them are in sessions.go (sessions and
// streams), resume.go (replay), ping.go (liveness by ping) and server.go
// (requests).

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
	// DefaultPingInterval and DefaultPingTimeout are mcp.ping_interval and
	// mcp.ping_timeout's defaults (design: Session liveness by ping).
	DefaultPingInterval = 10 * time.Second
	DefaultPingTimeout  = 5 * time.Second
)

// SignIns is what /mcp needs of the authorization server's use cases
// (internal/oauth.Grants): a bearer token that is an access token resolves
// into its agent's principal; false when the token is not one.
type SignIns interface {
	Authenticate(ctx context.Context, token string) (domain.Principal, bool, error)
}

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
	// ResourceMetadata is the URL of /mcp's protected resource metadata
	// (RFC 9728), named in every 401's WWW-Authenticate so an MCP client
	// finds the authorization server by itself (design: Sign-in for MCP
	// clients); "" names none.
	ResourceMetadata string
	// SignIns authenticates the access tokens of signing in (design: OAuth
	// tokens); nil = such a token authenticates nobody.
	SignIns SignIns
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
	// PingInterval is how often a JSON-RPC ping request is written on each
	// initialized session's open GET stream; PingTimeout is how long it may
	// go unanswered before the session is stalled (design: Session liveness
	// by ping). 0 = DefaultPingInterval, DefaultPingTimeout; a negative
	// PingInterval disables the pings.
	PingInterval time.Duration
	PingTimeout  time.Duration
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

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	// 0 takes the default; a negative value stays (it disables, or means
	// no limit, as the field says).
	o.Log = cmp.Or(o.Log, slog.Default())
	o.KeepAlive = cmp.Or(o.KeepAlive, DefaultKeepAlive)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, DefaultIdleTimeout)
	o.InitTimeout = cmp.Or(o.InitTimeout, DefaultInitTimeout)
	o.StreamlessIdleTimeout = cmp.Or(o.StreamlessIdleTimeout, DefaultStreamlessIdleTimeout)
	o.MaxSessionsPerAgent = cmp.Or(o.MaxSessionsPerAgent, DefaultMaxSessionsPerAgent)
	o.PingInterval = cmp.Or(o.PingInterval, DefaultPingInterval)
	o.Recheck = cmp.Or(o.Recheck, app.RecheckInterval)
	// These take the default for any value below 1.
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = DefaultPingTimeout
	}
	if o.ReplayEvents <= 0 {
		o.ReplayEvents = DefaultReplayEvents
	}
	if o.ReplayWindow <= 0 {
		o.ReplayWindow = DefaultReplayWindow
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	return o
}

// ownHub is the connection hub of a Server built without Options.Hub: not
// on the bus (the use cases reach it through CloseAgentSessions), with the
// re-check every Options.Recheck.
func ownHub(svc *app.Service, o Options) *connhub.Hub {
	return connhub.New(connhub.Options{Clock: o.Clock, Log: o.Log, Recheck: o.Recheck,
		NoLongerValid: connhub.CheckLive(svc.LiveCredentials)})
}

// EventKind names a lifecycle event of Options.OnEvent.
type EventKind string

// Lifecycle events.
const (
	SessionOpened EventKind = "session_opened" // initialize answered, session registered
	SessionClosed EventKind = "session_closed" // Reason says why
	StreamOpened  EventKind = "stream_opened"  // a GET stream's headers are written and flushed
	StreamClosed  EventKind = "stream_closed"  // that GET request has ended
	// PingSent: a ping request was written on the session's stream;
	// PingAnswered: its client answered it (Reason "recovered" when that
	// ended a stall); PingStalled: it went unanswered for PingTimeout and
	// the session is stalled (design: Session liveness by ping).
	PingSent     EventKind = "ping_sent"
	PingAnswered EventKind = "ping_answered"
	PingStalled  EventKind = "ping_stalled"
)

// Event is one lifecycle event of a session.
type Event struct {
	Kind      EventKind
	SessionID string
	AgentID   string
	Reason    string // SessionClosed and PingAnswered only
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

type principalKey struct{}

// principalFrom returns the authenticated principal ServeHTTP put on the
// request context, or nil.
func principalFrom(ctx context.Context) *domain.Principal {
	p, _ := ctx.Value(principalKey{}).(*domain.Principal)
	return p
}

// Defaults of Options.ReplayEvents and Options.ReplayWindow.
const (
	DefaultReplayEvents = 200
	DefaultReplayWindow = 10 * time.Minute
)

// replayLog is one session's stamped events and the doorbells queued on it
// but not yet written. Its zero value is ready; mu guards every field.
type replayLog struct {
	mu      sync.Mutex
	log     ssestream.Log // the stamped events; ids random per session
	current *stream       // the stream that opened last; older ones are superseded
	// held counts, per todo id, doorbells Notify queued on the session and
	// no GET stream has written yet (the outbox, or a POST took it).
	held map[string]heldDoorbell
	// told is what a reconnect digest must not count while the stream in
	// current is opening (ToldOnOpen).
	told []string
}

type heldDoorbell struct {
	n  int
	at time.Time
}

// session is this instance's record of one MCP session: who opened it and
// what is happening on it. Fields below ready are guarded by Server.mu.
type session struct {
	srv                 *Server
	id, agentID, credID string
	openedAt            time.Time
	// ready is closed once the initialize request that created the session
	// has finished (mcp-go registers the session after writing the
	// response); later requests of the session wait for it.
	ready chan struct{}

	registered  bool      // mcp-go registered it (notifications can be queued)
	initialized bool      // the client sent notifications/initialized
	gone        bool      // closed; its id answers 404
	inflight    int       // requests in flight, GET streams included
	lastSeen    time.Time // end of the last request
	streams     []*stream // open GET streams; a newer GET replaces the older
	streamed    bool      // a GET stream of the session was open at least once
	lastPost    time.Time // end of the last POST
	stalled     bool      // a stream write ran past Options.WriteTimeout; cleared when the client acts
	// outbox holds the notifications Notify queued and no stream has
	// written yet, oldest first, at most maxOutbox; nil when empty (its
	// array is dropped once written). writing is true while a drain
	// goroutine writes it out (drain).
	outbox  []mcp.JSONRPCNotification
	writing bool
	// queued are the todo doorbells queued by Notify and not yet written
	// on a GET stream (oldest first, at most maxQueued): when the session
	// closes or its stream ends they go to another session (design: Redelivery on session loss).
	queued []queuedNote

	rp replayLog // SSE event ids and replay (resume.go)

	ping ssestream.Ping // liveness by ping (ping.go)
}

// AgentID implements connhub.Conn.
func (x *session) AgentID() string { return x.agentID }

// CredentialID implements connhub.Conn.
func (x *session) CredentialID() string { return x.credID }

// queuedNote is one doorbell queued on a session.
type queuedNote struct {
	todoID string
	msg    domain.ChannelMessage
}

// stream is one GET notification stream of a session (design: Idle
// streams): its connection and writes are an ssestream.Stream, every write
// under its lock and bounded by Options.WriteTimeout (design: Stream
// writes).
type stream struct {
	*ssestream.Stream // the connection and its writes
	s                 *Server
	sess              *session
	open              atomic.Bool // the 200 and SSE headers are written
	// lastEventID is the GET's Last-Event-ID header (resume.go).
	lastEventID string
}
