// Package mcpserver is Rollcall's MCP adapter: the Streamable HTTP endpoint
// an agent connects to at /mcp with its credential as bearer token
// (design: MCP sessions), and this instance's app.SessionHub, through which the
// doorbell reaches the agent's sessions (design: Ring on create).
//
// It is built on github.com/mark3labs/mcp-go (see DEPENDENCIES.md) and holds
// no rules: tools call the app.Service verbs, errors are the domain's.
//
//	srv := mcpserver.New(svc, mcpserver.Options{Log: log})
//	defer srv.Close()
//	mux.Handle("/mcp", srv)
//
// What the adapter adds around mcp-go's StreamableHTTPServer, in the order a
// request meets it:
//
//   - Host and Origin checks (DNS rebinding), then bearer authentication:
//     401 with WWW-Authenticate: Bearer, 403 for an inactive agent, and 403
//     reason subject_kind_not_allowed for a valid person token (the mirror
//     of an agent credential on a REST operator route). Refusals are the
//     REST API's RFC 9457 problem documents (httpapi.WriteProblem: type
//     urn:rollcall:problem:<code>, a code, a reason).
//   - A body limit (413); a POST body that is not one JSON-RPC message
//     object answers HTTP 400 with a JSON-RPC error (-32700 parse error
//     for malformed JSON, -32600 otherwise), with or without a session.
//   - The protocol version: 2025-11-25 and
//     2025-06-18 are served with sessions; requests of the stateless
//     2026-07-28 revision are refused by mcp-go with the JSON-RPC
//     unsupported-version error that lists the versions above, so a client
//     negotiates down to a session.
//   - Sessions: the id mcp-go mints on initialize is bound to the credential
//     that opened it before the response leaves; every later request must
//     carry that id (400 without, 404 when unknown or closed) and the same
//     credential (403 otherwise, nothing changes). An agent holds at most
//     Options.MaxSessionsPerAgent sessions here (32), initialized or
//     pending; one more initialize evicts the least recently used session
//     without an open stream, else the oldest (429 rate_limited with
//     Retry-After only while every place is an initialize in flight). A
//     session whose client has not sent notifications/initialized within
//     Options.InitTimeout (60 s) is closed, one that never opened a GET
//     stream after Options.StreamlessIdleTimeout (2 min) idle.
//   - Revocation: every request authenticates its credential through a
//     cache of app.CredentialCacheTTL (2 s) that revoke, rotate and
//     deactivate invalidate at once here and, through the bus, elsewhere.
//     Sessions are registered in the instance's connection hub
//     (internal/connhub, Options.Hub; design: Connection hub), shared with
//     the gateway's connections: a revocation closes them, and every 2 s
//     one batched store query of the hub re-checks the credentials of all
//     sessions and connections and closes those no longer valid, so a
//     revocation holds within 5 s even when its bus signal was lost
//     (design: Revocation within 5 s).
//   - GET notification streams are this package's own, not mcp-go's
//     (stream.go over internal/ssestream; design: Idle streams): an idle
//     stream holds one small goroutine and no net/http buffers.
//     Notifications wait in a per-session outbox (at most 512) that a drain
//     goroutine, running only while there is something to write, writes;
//     a session without an open stream gets it in its next POST's
//     response. A newer GET replaces an older one (SessionInfo.Streaming);
//     one goroutine writes the keepalives of all streams; sessions without
//     a stream expire after Options.IdleTimeout. mcp-go keeps only the
//     session's id between requests (transportSession).
//   - Liveness by ping (ping.go; design: Session liveness by ping): every
//     Options.PingInterval (10 s) a JSON-RPC ping request goes on each
//     open stream; a session that answered a ping before and leaves one
//     unanswered for Options.PingTimeout (5 s) is stalled — its unread
//     doorbells go to another session at once, and it is listed as not
//     streaming and stalled until it answers, POSTs or opens a stream. The
//     answers (POSTed responses) are taken here, never passed to mcp-go.
//   - Resumable streams (resume.go over ssestream.Log): message events
//     carry SSE ids and are kept for replay within Options.ReplayEvents
//     (200) and Options.ReplayWindow (10 min); a GET with a Last-Event-ID
//     the session issued gets the events after it first, any other is
//     ignored. The reconnect digest sent as a stream opens does not count
//     todos that stream delivers by itself (app.ToldReporter).
//   - Tools: the scope verbs granted to the agent, in domain.ScopeVerbs order,
//     then the self verbs (design: Self verbs) in every session. A tool outside
//     the scope is neither listed nor callable (JSON-RPC invalid params,
//     like an unknown tool); argument and use-case errors are tool results
//     with isError and a JSON text {"code","detail","pointer"}. Arguments
//     are decoded strictly against the tool's input schema, which states
//     every rule the decoder enforces: unknown or repeated members,
//     wrong types, strings that are empty (minLength 1) or outside their
//     enum, integers outside minimum..maximum are invalid_argument at the
//     member's pointer; a present 0 or "" is never read as absent.
package mcpserver
