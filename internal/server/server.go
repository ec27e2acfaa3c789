// Package server is Rollcall's composition root: it opens the store named by
// the configuration, picks the bus, builds the use cases and mounts the
// adapters (MCP at /mcp, REST at /v1, operations endpoints) on one listener.
// It holds no rules of its own.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/bus/pgbus"
	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/connhub"
	"github.com/rollcall/rollcall/internal/console"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/edge"
	"github.com/rollcall/rollcall/internal/gateway"
	"github.com/rollcall/rollcall/internal/httpapi"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/mcpserver"
	"github.com/rollcall/rollcall/internal/metrics"
	"github.com/rollcall/rollcall/internal/oauth"
	"github.com/rollcall/rollcall/internal/ratelimit"
	"github.com/rollcall/rollcall/internal/stall"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/postgres"
	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/tracker"
)

// Options are the parts of a server that tests inject.
type Options struct {
	Clock  clockwork.Clock // nil = real clock
	Log    *slog.Logger    // nil = slog.Default()
	Stdout io.Writer       // where the URL and the bootstrap token are printed; nil = discard
	// OAuthMetadataClient fetches client metadata documents; nil = public
	// addresses only (tests pass their TLS server's client).
	OAuthMetadataClient *http.Client
}

// Server is one running Rollcall instance.
type Server struct {
	Config  config.Config
	Log     *slog.Logger
	Store   store.Store
	Bus     bus.Bus
	Service *app.Service
	SignIns *oauth.Grants // the sign-in use cases (design: Sign-in for MCP clients)
	MCP     *mcpserver.Server
	Gateway *gateway.Gateway // /v1/gateway
	Hub     *connhub.Hub     // the MCP sessions and gateway connections (design: Connection hub)
	Metrics *metrics.Metrics // /metrics
	Edge    *edge.Edge       // in front of every route
	// URL is the base URL the server is reachable at once Listen returned.
	URL string

	ln      net.Listener
	httpSrv *http.Server
}

// OpenStore opens (and migrates) the store named by a store URL.
func OpenStore(ctx context.Context, storeURL string) (store.Store, error) {
	dialect, target, err := config.ParseStore(storeURL)
	if err != nil {
		return nil, err
	}
	switch dialect {
	case "postgres":
		return postgres.Open(ctx, target)
	default:
		return sqlite.Open(ctx, target)
	}
}

// Open opens the store, builds the service, creates the bootstrap admin on
// an empty store and binds the listener. Errors name what failed: the store
// (unreachable, locked by another server, migration failure) or the listen
// address.
func Open(ctx context.Context, cfg config.Config, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	// Listen first: a bad address or a port in use must not leave a
	// created (and migrated) database behind.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	st, err := OpenStore(ctx, cfg.Store)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("store %s: %w", redact(cfg.Store), err)
	}
	url := cfg.PublicURL
	if url == "" {
		url = "http://" + ln.Addr().String()
	}
	var b bus.Bus = bus.NewLocal()
	var svcRef atomic.Pointer[app.Service] // set below; read by the reconnect hook
	if dialect, target, _ := config.ParseStore(cfg.Store); dialect == "postgres" {
		pb, err := pgbus.Open(ctx, pgbus.Options{URL: target, Log: o.Log, OnReconnect: func(lostAt time.Time) {
			// Signals sent while the listener was down are lost: catch up
			// (design: Readiness; missed transitions; never-rung todos).
			if svc := svcRef.Load(); svc != nil {
				// lostAt is this process's time; the catch-up compares it
				// with times other instances stamped: on the database's
				// clock, the same moment (design: Database clock).
				lostAt = svc.Clock().Now().Add(-time.Since(lostAt))
				catchUpRetrying(svc, lostAt, o.Log)
				svc.RequestLivenessClaims(context.Background()) // claims sent meanwhile were lost too
			}
		}})
		if err != nil {
			ln.Close()
			st.Close()
			return nil, fmt.Errorf("bus: %w", err)
		}
		b = pb
	}
	// The gauge reads the tracker, which exists once the service does.
	m, err := metrics.New(metrics.Options{MismatchAges: func(yield func(string, float64)) {
		if svc := svcRef.Load(); svc != nil {
			svc.MismatchAges(yield)
		}
	}})
	if err != nil {
		b.Close()
		ln.Close()
		st.Close()
		return nil, err
	}
	if o, ok := st.(interface{ ObserveCommitBatches(func(int)) }); ok { // both adapters (design: Group commit)
		o.ObserveCommitBatches(m.CommitBatch)
	}
	sealer, err := intake.NewSealer(cfg.Hooks.SecretKey, cfg.Hooks.SecretKeyPrevious)
	if err != nil {
		b.Close()
		ln.Close()
		st.Close()
		return nil, err
	}
	// Every cross-instance time on the database's clock, measured from this
	// process's (design: Database clock); a stall of this process extends
	// deadlines (design: Stall extension).
	svc := app.New(app.Options{Store: st, Bus: b, Clock: o.Clock, DBNow: st.DBNow, Log: o.Log, PublicURL: url, Metrics: m, HookSecrets: sealer,
		EvaluateInterval: cfg.Presence.EvaluateInterval, SweepInterval: cfg.Doorbell.SweepInterval, FailoverAfter: cfg.Doorbell.FailoverAfter,
		DeliveryRetention: cfg.Hooks.DeliveryRetention,
		Liveness: app.LivenessConfig{PresenceTimeout: cfg.Agent.PresenceTimeout, PersistInterval: cfg.Agent.HeartbeatPersistInterval,
			HeartbeatInterval: cfg.Sync.HeartbeatInterval, MismatchAlertAfter: cfg.Billing.MismatchAlertAfter, ShutdownTimeout: cfg.Shutdown.TotalTimeout,
			StallThreshold: stall.DefaultThreshold,
			// Several instances share PostgreSQL: one that dies releases its
			// agents (design: Owner lease). One SQLite file has one instance.
			OwnerLease: ownerLease(st.Dialect())}})
	svcRef.Store(svc)
	s := &Server{Config: cfg, Log: o.Log, Store: st, Bus: b, Service: svc, Metrics: m, URL: url, ln: ln}

	// Stored hook secrets under the configured key before any delivery
	// reads one (design: Hook secrets sealed at rest). A secret that does
	// not open leaves the start going: its hook's deliveries fail until
	// the right key is configured or the secret is rotated (which needs no
	// old secret), the way out when a key is lost.
	if _, err := svc.SealHookSecrets(ctx); err != nil {
		var unopened *app.UnopenedSecretsError
		if !errors.As(err, &unopened) {
			s.closeAll()
			return nil, fmt.Errorf("hook secrets: %w", err)
		}
		o.Log.Error("hook secrets: deliveries to these hooks fail until hooks.secret_key (or hooks.secret_key_previous) is the key that sealed them, or their secrets are rotated", "err", err)
	}

	token, created, err := svc.Bootstrap(ctx, cfg.BootstrapToken)
	if err != nil {
		s.closeAll()
		return nil, fmt.Errorf("bootstrap admin: %w", err)
	}
	if created && cfg.BootstrapToken == "" {
		fmt.Fprintf(o.Stdout, "Bootstrap admin token (shown once, store it safely):\n  %s\n  export ROLLCALL_TOKEN=%s\n", token, token)
	}

	s.Hub = connhub.New(connhub.Options{Bus: b, Clock: svc.Clock(), Log: o.Log, Recheck: app.RecheckInterval,
		NoLongerValid: connhub.CheckLive(svc.LiveCredentials)})
	// Rollcall is the authorization server of its own /mcp (design: Sign-in
	// for MCP clients); issuer and resource come from the public URL.
	signIns := oauth.NewGrants(st, svc, o.Log)
	s.SignIns = signIns
	auth, err := oauth.New(signIns, oauth.Options{Log: o.Log, ConsentURL: console.ConsentPath + "?id=", MetadataClient: o.OAuthMetadataClient,
		NoMetadataDocuments: !cfg.OAuth.ClientMetadataDocuments})
	if err != nil {
		s.closeAll()
		return nil, fmt.Errorf("oauth: %w", err)
	}
	s.MCP = mcpserver.New(svc, mcpserver.Options{Log: o.Log, Hub: s.Hub, AllowedHosts: allowedHosts(cfg, url), AllowedOrigins: allowedOrigins(cfg, url),
		PingInterval: cfg.MCP.PingInterval, PingTimeout: cfg.MCP.PingTimeout, ResourceMetadata: auth.ResourceMetadataURL(), SignIns: signIns})
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.MCP)
	for _, p := range []string{oauth.ProtectedResourcePath, oauth.ProtectedResourcePath + "/", oauth.AuthorizationServerPath, oauth.Prefix} {
		mux.Handle(p, auth)
	}
	s.Gateway = gateway.New(gateway.Options{Service: svc, Hub: s.Hub, Log: o.Log})
	mux.Handle("/v1/gateway", s.Gateway)
	mux.Handle("GET /metrics", m.Handler())
	mux.Handle("/", httpapi.New(svc, httpapi.Options{Log: o.Log, Ready: readiness(st, b)}))
	con, err := console.New(svc, console.Options{Log: o.Log, Sessions: s.MCP, SignIns: signIns,
		SessionKey: []byte(cfg.Console.SessionKey), SecureCookies: strings.HasPrefix(url, "https://")})
	if err != nil {
		s.closeAll()
		return nil, fmt.Errorf("console: %w", err)
	}
	mux.Handle(console.Prefix, con)
	auth.SetSignedIn(con.SignedIn) // prompt=none (design: Silent authorization requests)
	mux.HandleFunc("GET /{$}", console.RedirectRoot)
	mux.HandleFunc("GET /favicon.ico", console.Favicon)
	s.Edge = newEdge(cfg, url, o, mayAuthenticate(svc, signIns), store.SharedFailures(st))
	s.httpSrv = &http.Server{Handler: s.Edge.Handler(mux), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn)}
	s.httpSrv.RegisterOnShutdown(svc.CloseEvents) // ends open SSE streams so they do not hold the shutdown
	if bound := "http://" + s.ln.Addr().String(); bound != url {
		fmt.Fprintf(o.Stdout, "rollcall listening on %s (public URL %s, store %s)\n", bound, url, redact(cfg.Store))
	} else {
		fmt.Fprintf(o.Stdout, "rollcall listening on %s (store %s)\n", url, redact(cfg.Store))
	}
	return s, nil
}

// Serve serves until ctx ends, then shuts down gracefully within
// shutdown.total_timeout: stops accepting, closes MCP sessions, drains
// background work and closes the store.
func (s *Server) Serve(ctx context.Context) error {
	// The start rule runs before the first request (design: Start rule).
	if err := s.Service.StartLiveness(ctx); err != nil {
		s.closeAll()
		return fmt.Errorf("liveness start rule: %w", err)
	}
	bg, stopBG := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Service.Run(bg) }()

	errc := make(chan error, 1)
	go func() { errc <- s.httpSrv.Serve(s.Edge.Listener(s.ln)) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.Log.Info("shutting down", "budget", s.Config.Shutdown.TotalTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.Config.Shutdown.TotalTimeout)
	defer cancel()
	// Gateway first (4013: adapters reconnect elsewhere), then the tracker
	// once no request can bring a heartbeat: its timers stop without
	// publishing and the last flush runs in the rest of the budget
	// (design: Shutdown flush).
	if e := s.Gateway.Shutdown(sctx); e != nil {
		s.Log.Warn("gateway shutdown", "err", e)
	}
	s.MCP.Close()
	s.Hub.Close() // both transports have closed their connections
	if e := s.httpSrv.Shutdown(sctx); e != nil && !errors.Is(e, http.ErrServerClosed) {
		s.Log.Warn("http shutdown", "err", e)
	}
	if e := s.Service.StopLiveness(sctx); e != nil {
		s.Log.Warn("liveness flush at shutdown failed", "err", e)
	}
	stopBG()
	select {
	case <-done:
	case <-sctx.Done():
	}
	s.Service.Close()
	s.closeAll()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// readiness is GET /readyz (design: Readiness): not ready while the bus
// listener of a PostgreSQL instance is down, or when the store does not
// answer a query within 2 s.
func readiness(st store.Store, b bus.Bus) func(context.Context) error {
	return func(ctx context.Context) error {
		if pb, ok := b.(*pgbus.Bus); ok {
			if err := pb.Listening(); err != nil {
				return &domain.Error{Code: domain.CodeInternal, Detail: "the bus listener is down (reconnecting); signals from other instances are not received"}
			}
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := st.ListAgents(ctx, store.ListAgentsParams{OwnerID: "00000000-0000-0000-0000-000000000000"}); err != nil {
			return fmt.Errorf("store: %w", err)
		}
		return nil
	}
}

// Addr is the listener's address (host:port), which differs from URL's
// when public_url is set.
func (s *Server) Addr() string { return s.ln.Addr().String() }

func (s *Server) closeAll() {
	if s.Hub != nil {
		s.Hub.Close()
	}
	if s.ln != nil {
		s.ln.Close()
	}
	if s.Bus != nil {
		s.Bus.Close()
	}
	if s.Store != nil {
		s.Store.Close()
	}
}

// Redact hides passwords in a store URL (user info and a `password` query
// parameter) for logs and messages.
func Redact(u string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme == "" {
		return u
	}
	if _, has := pu.User.Password(); has {
		pu.User = url.UserPassword(pu.User.Username(), "***")
	}
	if q := pu.Query(); q.Has("password") {
		q.Set("password", "***")
		pu.RawQuery = q.Encode()
	}
	return strings.Replace(pu.String(), "%2A%2A%2A", "***", -1)
}

func redact(u string) string { return Redact(u) }

// newEdge builds the HTTP edge of (design: Host and Origin, Trusted proxies, Request timeouts, Failed-authentication limit) from the configuration
// (Validate has checked the CIDRs); shared (PostgreSQL) counts failed
// authentications for all instances (design: Limits shared by instances).
func newEdge(cfg config.Config, publicURL string, o Options, verify func(context.Context, string) bool, shared ratelimit.Shared) *edge.Edge {
	var proxies []netip.Prefix
	for _, p := range cfg.TrustedProxies {
		if pf, err := config.ParsePrefix(p); err == nil {
			proxies = append(proxies, pf)
		}
	}
	conns := cfg.HTTP.MaxConnsPerClient
	if conns == 0 {
		conns = -1 // configured off
	}
	return edge.New(edge.Options{PublicURL: publicURL, AllowedHosts: cfg.AllowedHosts, AllowedOrigins: cfg.AllowedOrigins,
		TrustedProxies: proxies, ReadTimeout: cfg.HTTP.ReadTimeout, MaxFailures: cfg.Auth.MaxFailures, MaxConnsPerClient: conns, Verify: verify, Signed: hookDelivery, Shared: shared, Log: o.Log, Clock: o.Clock,
		CORS: edge.CORS{Public: oauth.CrossOrigin, Bearer: isMCP, Origins: cfg.MCP.BrowserOrigins}}) // design: Browser clients
}

// isMCP matches the MCP endpoint, the one route mcp.browser_origins open.
func isMCP(r *http.Request) bool { return r.URL.Path == "/mcp" }

// hookDelivery matches POST /v1/hooks/{id}/deliveries, the route that
// authenticates by the hook's signature (design: Hook signatures).
func hookDelivery(r *http.Request) bool {
	rest, hook := strings.CutPrefix(r.URL.Path, "/v1/hooks/")
	id, deliveries := strings.CutSuffix(rest, "/deliveries")
	return r.Method == http.MethodPost && hook && deliveries && id != "" && !strings.Contains(id, "/")
}

// allowedHosts and allowedOrigins are the MCP endpoint's own copies of the
// edge rule: the configured values plus public_url.
func allowedHosts(cfg config.Config, publicURL string) []string {
	out := slices.Clone(cfg.AllowedHosts)
	if u, err := url.Parse(publicURL); err == nil && u.Host != "" {
		out = append(out, u.Hostname())
	}
	return out
}

func allowedOrigins(cfg config.Config, publicURL string) []string {
	out := slices.Concat(cfg.AllowedOrigins, cfg.MCP.BrowserOrigins) // design: Browser clients
	if u, err := url.Parse(publicURL); err == nil && u.Host != "" {
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out
}

// catchUpRetrying runs svc.CatchUp after a bus reconnect until it succeeds,
// for at most catchUpFor: right after a database restart the listener may
// be back before the pool's connections are (each broken idle connection
// fails one query), and a catch-up given up at its first error would lose
// the transitions and doorbells it exists for (design: Catch-up after a lost listener).
func catchUpRetrying(svc *app.Service, lostAt time.Time, log *slog.Logger) {
	const catchUpFor = 30 * time.Second
	deadline := time.Now().Add(catchUpFor)
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := svc.CatchUp(cctx, lostAt)
		cancel()
		if err == nil {
			return
		}
		if time.Now().Add(delay).After(deadline) {
			log.Warn("catch-up after bus reconnect failed; the evaluator and the sweep are the net", "attempts", attempt, "err", err)
			return
		}
		log.Info("catch-up after bus reconnect failed; retrying", "attempt", attempt, "retry_in", delay, "err", err)
		time.Sleep(delay)
		delay = min(2*delay, 2*time.Second)
	}
}

// ownerLease is the tracker's owner lease for the store's dialect (design:
// Owner lease): tracker.DefaultOwnerLease on PostgreSQL, none on SQLite,
// where a second instance on the file refuses to start.
func ownerLease(dialect string) time.Duration {
	if dialect == "postgres" {
		return tracker.DefaultOwnerLease
	}
	return 0
}

// mayAuthenticate is the edge's check of a bearer token (design: The
// failed-auth limit): an access token of signing in by the sign-in use
// cases, any other by the use cases.
func mayAuthenticate(svc *app.Service, signIns *oauth.Grants) func(context.Context, string) bool {
	return func(ctx context.Context, token string) bool {
		if may, ok := signIns.MayAuthenticate(ctx, token); ok {
			return may
		}
		return svc.MayAuthenticate(ctx, token)
	}
}
