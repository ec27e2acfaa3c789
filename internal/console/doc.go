// Package console is Rollcall's operator web console: a person signs in
// with a personal API token and sees their fleet — every agent's liveness
// state and warnings (design: Agent status), in/out presence with its source
// and next change (design: Effective presence), open sessions, held todos —
// and steers it: clock in or out, clear an override, edit the shift
// (design: Operator overrides), set the self clock-in cap, vend and revoke
// agents, push todos, manage hooks; the Tokens and People pages manage
// tokens, persons and hand-overs. Cards update live over server-sent events.
//
//	h, err := console.New(svc, console.Options{Sessions: mcpServer, SessionKey: key})
//	mux.Handle(console.Prefix, h)                  // "/console/"
//	mux.HandleFunc("GET /{$}", console.RedirectRoot)
//
// It is an adapter: every page calls use cases of app.Service and holds no
// rule of its own (presence labels come from presence.Effective's source,
// shift errors are presence.ParseShift's messages, exactly as the API sends
// them).
//
// # Rendering
//
// Server-rendered with html/template; the templates are parsed once in New.
// Assets (one stylesheet, one ~100-line script, no library) are embedded
// and served under /console/static/ with a content-hash query for caching.
// Every page works without the script; the script adds live updates, local
// time display and copy buttons. A strict Content-Security-Policy allows
// only same-origin scripts, styles and connections.
//
// # Sessions
//
// Signing in (POST /console/signin) checks the token and creates a server-side
// session row (app.Service.StartConsoleSession), then sets the cookie
// rollcall_session: HttpOnly, SameSite=Strict, Path=/, Secure over https (TLS,
// an https X-Forwarded-Proto — which reaches the console only from a peer in
// trusted_proxies, see internal/edge — or an https public_url). Its value is
// sealed with AES-256-GCM under console.session_key: the person id, the session
// row's id, the session's CSRF token and the expiry (DefaultSessionTTL,
// absolute). Any instance that has the same key and store serves any session;
// with no key each process draws a random one (sessions end at restart, one
// instance only). Each request checks the row, its token and its person with
// one indexed read, so signing out (which ends the row), revoking the token and
// deactivating the person end the session at once on every instance — a copied
// cookie stops working with it (design: Console sessions). The console's event
// stream re-checks its session every app.RecheckInterval. Tokens
// (/console/tokens) and, for admins, People (/console/people) manage tokens,
// persons and hand-overs.
//
// # CSRF
//
// Every state-changing form carries the session's synchronizer token in the
// field "csrf"; a POST without the matching token answers 403 with an
// explanation and changes nothing. The sign-in form, which has no session
// yet, uses a double-submit token (cookie rollcall_signin plus field).
// SameSite=Strict is a second line of defence.
//
// # Live updates
//
// GET /console/events is an SSE stream of the signed-in person's agent
// events from app.Service.SubscribeEvents (agent.presence_changed from the liveness
// tracker, agent.presence_transition from the presence evaluator,
// agent.todos_changed from the todo use cases, coalesced per agent). On an
// event the page fetches GET /console/agents/{id}/card and swaps the card's
// status part (controls keep focus and typed input) and announces the new
// state in an aria-live region. Reconnects resume with Last-Event-ID; when
// events were missed the page refreshes every card.
//
// # Time zones
//
// Times are rendered as <time> elements in UTC and shown relative ("12s
// ago", "in 3h"); the script re-renders them every 10 s with the local time
// as tooltip. The "until" field is a datetime-local input: the script puts
// the browser's IANA zone into the hidden field "tz" and the server reads
// the wall time in that zone (UTC without the script).
package console
