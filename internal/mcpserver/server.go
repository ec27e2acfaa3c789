package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/edge"
	"github.com/rollcall/rollcall/internal/ssestream"
	"github.com/rollcall/rollcall/internal/strictjson"
)

var (
	_ http.Handler   = (*Server)(nil)
	_ app.SessionHub = (*Server)(nil)
)

// New builds the MCP endpoint for svc and attaches it as svc's session hub
// (svc.SetSessionHub). Call Close when done: it stops the keepalive and
// expiry loops and closes every session.
func New(svc *app.Service, opts Options) *Server {
	opts = opts.withDefaults()
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
		server.WithHTTPContextFunc(s.postContext),
	)
	svc.SetSessionHub(s)

	if opts.KeepAlive > 0 {
		s.loops.Add(1)
		go s.keepAliveLoop()
	}
	if opts.PingInterval > 0 {
		s.loops.Add(1)
		go s.pingLoop()
	}
	if opts.IdleTimeout > 0 || opts.InitTimeout > 0 || opts.StreamlessIdleTimeout > 0 {
		s.loops.Add(1)
		go s.expireLoop()
	}
	if s.hub == nil {
		s.hub, s.ownHub = ownHub(svc, opts), true
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
		// One reading of a body (design: see that heading): mcp-go decodes the
		// envelope with encoding/json, which takes the last of a repeated
		// name in any letter case. Tool arguments are strictjson.Object's
		// to refuse, with the tool's own wording.
		var ne *strictjson.NameError
		if errors.As(strictjson.CheckNames(body, "/params/arguments"), &ne) {
			writeJSONRPCError(w, mcp.INVALID_REQUEST, "Invalid Request: "+ne.Error())
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
	if r.Method == http.MethodGet {
		s.serveStream(w, r, sess) // leaves when the stream ends
		return
	}
	defer s.leave(sess)
	if id, ok := msg.pingAnswer(); ok {
		// Not passed to mcp-go (which drops it with 202 too) and not
		// counted as the client acting: the client process reads, its
		// model may not (design: Session liveness by ping).
		s.pingAnswered(sess, id)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.isResponse() {
		// A response to a request this server never sent (it sends only
		// pings): accepted and dropped, as the transport says of
		// responses. mcp-go would look for a sampling request.
		s.log.Debug("mcp response to no request of this server dropped", "session", sess.id)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if msg.Method == string(mcp.MethodNotificationInitialized) {
		s.markInitialized(sess)
	}
	r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess))
	s.http.ServeHTTP(noteWriter{ResponseWriter: w, s: s, x: sess}, r)
	s.acted(sess)
}

type sessionKey struct{}

// postContext runs in mcp-go before it handles a POST of a session: when
// the session has no open stream, its outbox goes into mcp-go's session
// for this request, which writes it into the response (upgraded to SSE),
// so a client without a GET stream gets its doorbells with its next
// response.
func (s *Server) postContext(ctx context.Context, _ *http.Request) context.Context {
	x, _ := ctx.Value(sessionKey{}).(*session)
	cs := server.ClientSessionFromContext(ctx)
	if x == nil || cs == nil {
		return ctx
	}
	ch := cs.NotificationChannel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if x.writing || x.gone || x.liveStreamLocked() != nil {
		return ctx
	}
	n := 0
	for _, note := range x.outbox {
		select {
		case ch <- note:
			n++
			continue
		default:
		}
		break
	}
	clear(x.outbox[:n])
	if x.outbox = x.outbox[n:]; len(x.outbox) == 0 {
		x.outbox = nil
	}
	return ctx
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

// acted records that the session's client made a request (not a GET, not
// a ping answer): proof it still acts, which clears a stall (design: Stream
// writes, Session liveness by ping).
func (s *Server) acted(x *session) {
	now := s.opts.Clock.Now()
	s.mu.Lock()
	x.lastPost, x.stalled = now, false
	x.ping.Acted()
	s.mu.Unlock()
}

// jsonrpcPeek is what ServeHTTP reads of a POSTed message.
type jsonrpcPeek struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	Params struct {
		Meta *mcp.Meta `json:"_meta"`
	} `json:"params"`
}

// isResponse reports whether m is a JSON-RPC response (a result or an
// error, no method).
func (m jsonrpcPeek) isResponse() bool {
	return m.Method == "" && m.ID != nil && (m.Result != nil || m.Error != nil)
}

// pingAnswer returns the id of a POSTed JSON-RPC response to one of this
// server's pings (a result or an error: either proves the client reads).
func (m jsonrpcPeek) pingAnswer() (string, bool) {
	if m.Method != "" || (m.Result == nil && m.Error == nil) {
		return "", false
	}
	var id string
	if json.Unmarshal(m.ID, &id) != nil || !strings.HasPrefix(id, ssestream.PingIDPrefix) {
		return "", false
	}
	return id, true
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
	if json.Valid(body) {
		writeJSONRPCError(w, mcp.INVALID_REQUEST, "Invalid Request: the body must be one JSON-RPC 2.0 message object")
	} else {
		writeJSONRPCError(w, mcp.PARSE_ERROR, "Parse error: the request body is malformed JSON")
	}
}

// writeJSONRPCError answers HTTP 400 with the JSON-RPC error code and
// message and a null id.
func writeJSONRPCError(w http.ResponseWriter, code int, message string) {
	var e jsonrpcError
	e.JSONRPC = "2.0"
	e.Error.Code, e.Error.Message = code, message
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
		w.Header().Set("WWW-Authenticate", s.challenge(""))
		writeProblem(w, http.StatusUnauthorized, domain.CodeUnauthenticated,
			"an agent credential is required: Authorization: Bearer <credential>")
		return domain.Principal{}, false
	}
	var p domain.Principal
	var err error
	signedIn := false
	if s.opts.SignIns != nil {
		// A token from signing in (design: OAuth tokens).
		p, signedIn, err = s.opts.SignIns.Authenticate(r.Context(), token)
	}
	switch {
	case signedIn:
	case strings.HasPrefix(token, app.AgentTokenPrefix):
		// Tool calls do not look the credential up every time: a cache of
		// app.CredentialCacheTTL, invalidated by revoke (design: Credential cache).
		p, err = s.svc.AuthenticateAgentCached(r.Context(), token)
	default:
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
		w.Header().Set("WWW-Authenticate", s.challenge(`error="invalid_token"`))
		writeProblemErr(w, http.StatusUnauthorized, de)
	default:
		writeProblemErr(w, statusOf(de.Code), de)
	}
	return domain.Principal{}, false
}

// challenge is the WWW-Authenticate of a 401: with the resource metadata
// URL when there is one (MCP authorization, RFC 9728 section 5.1).
func (s *Server) challenge(param string) string {
	v := `Bearer realm="rollcall"`
	if s.opts.ResourceMetadata != "" {
		v = `Bearer resource_metadata="` + s.opts.ResourceMetadata + `"`
	}
	if param != "" {
		v += ", " + param
	}
	return v
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
