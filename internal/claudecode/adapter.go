package claudecode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// Names the adapter reports (design: Adapter; tool_class, details.runtime,
// details.adapter).
const (
	ToolClass   = "claude-code"
	RuntimeName = "claude-code"
	AdapterName = "rollcall-adapter"
)

// errIdentify: the gateway answered identify with an error frame.
var errIdentify = errors.New("gateway refused identify")

// ErrRunning is returned by Adapter.Run when another adapter already serves
// the Claude Code process (it holds the lock).
var ErrRunning = errors.New("an adapter already serves this Claude Code process")

// Gateway close codes the adapter reacts to (internal/gateway).
const (
	closeAuthFailed = 4004
	closeDeadline   = 4009
	closeGoingAway  = 4013
)

// AdapterOptions configures an Adapter.
type AdapterOptions struct {
	// Server is Rollcall's base URL (http or https); the gateway is
	// ws(s)://…/v1/gateway.
	Server string
	// Credential is the agent's credential (identify token).
	Credential string
	// Claude is the Claude Code process served; the adapter ends when it is
	// gone.
	Claude Process
	// StateDir holds the lock, socket and log per Claude Code process
	// (see StateDir).
	StateDir string
	// RuntimeVersion is Claude Code's version ("" = not reported).
	RuntimeVersion string
	// Evidence is the session's billing evidence (Billing).
	Evidence Evidence
	// Probe, when set, is called by Run once the hook socket listens and
	// before the first connection, and sets RuntimeVersion and Evidence
	// (asking Claude Code takes a while; hooks must not wait for it).
	Probe func(context.Context) (runtimeVersion string, ev Evidence)
	// Log receives the adapter's log; nil = slog.Default(). It should name the
	// Claude Code process (the CLI adds claude_pid to every line).
	Log *slog.Logger
	// Clock drives heartbeats, backoff and the process watch; nil = real.
	Clock clockwork.Clock
	// WatchInterval is how often the Claude Code process is checked;
	// 0 = 1s.
	WatchInterval time.Duration
	// MaxBackoff bounds the reconnect backoff (it starts at 500ms and
	// doubles, with jitter); 0 = 30s.
	MaxBackoff time.Duration
}

// Adapter heartbeats for one Claude Code process over the gateway
// (design: Adapter, Billing evidence). Run holds the process's lock, listens on
// its hook socket, keeps one gateway connection (reconnecting with backoff
// after 4013, 4009 or a lost connection) and sends a heartbeat every
// announced interval and at once when a run starts or stops.
type Adapter struct {
	o     AdapterOptions
	log   *slog.Logger
	clock clockwork.Clock

	mu      sync.Mutex
	runs    map[string]string // session id → active run id
	kick    chan struct{}     // a state change: heartbeat now
	end     chan struct{}     // SessionEnd: last heartbeat, then stop
	endOnce sync.Once
	ended   chan struct{} // closed when Run is done with the last heartbeat
}

// NewAdapter returns an Adapter; call Run.
func NewAdapter(o AdapterOptions) *Adapter {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.WatchInterval <= 0 {
		o.WatchInterval = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	return &Adapter{o: o, log: o.Log, clock: o.Clock, runs: map[string]string{},
		kick: make(chan struct{}, 1), end: make(chan struct{}), ended: make(chan struct{})}
}

// StateDir is where adapters keep their files: $ROLLCALL_ADAPTER_DIR, else
// $XDG_RUNTIME_DIR/rollcall-adapter, else <tmp>/rollcall-adapter-<uid>.
func StateDir(getenv func(string) string) string {
	if d := getenv("ROLLCALL_ADAPTER_DIR"); d != "" {
		return d
	}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "rollcall-adapter")
	}
	return filepath.Join(os.TempDir(), "rollcall-adapter-"+strconv.Itoa(os.Getuid()))
}

func statePath(dir string, p Process, ext string) string {
	return filepath.Join(dir, "claude-"+strconv.Itoa(p.PID)+ext)
}

// SocketPath is the hook socket of the adapter serving p.
func SocketPath(dir string, p Process) string { return statePath(dir, p, ".sock") }

// LogPath is the log file of the adapter serving p.
func LogPath(dir string, p Process) string { return statePath(dir, p, ".log") }

// AdapterVersion is this binary's module version, or "dev".
func AdapterVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && versionRE.MatchString(bi.Main.Version) {
		return bi.Main.Version
	}
	return "dev"
}

// Heartbeat returns the body the adapter sends now (agent_heartbeat.v1):
// state online, tool_class claude-code, runtime_version, billing_mode and
// billing_evidence, details {active_runs, adapter, runtime}.
func (a *Adapter) Heartbeat() liveness.Heartbeat {
	a.mu.Lock()
	runs := make([]string, 0, len(a.runs))
	for _, r := range a.runs {
		runs = append(runs, r)
	}
	a.mu.Unlock()
	tc, ver := ToolClass, AdapterVersion()
	h := liveness.Heartbeat{State: "online", ToolClass: &tc,
		Details: liveness.Details{ActiveRuns: runs,
			Adapter: &liveness.Adapter{Name: AdapterName, Version: &ver},
			Runtime: &liveness.Runtime{Name: RuntimeName}}}
	if v := a.o.RuntimeVersion; v != "" {
		h.RuntimeVersion = &v
	}
	if ev := a.o.Evidence; ev.KeyType != "" {
		be := ev.BillingEvidence
		h.BillingEvidence = &be
		if ev.Mode != "" {
			m := ev.Mode
			h.BillingMode = &m
		}
	}
	return h
}

// HookEvent is one line a hook sends on the adapter's socket.
type HookEvent struct {
	Event     string `json:"event"`
	SessionID string `json:"session_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Handle applies one hook event: UserPromptSubmit and PreToolUse open a run
// for the session (when none is open), Stop and StopFailure close it,
// SessionEnd (except with reason "clear", which a SessionStart follows in the
// same process) ends the adapter after a last heartbeat. It reports whether
// a heartbeat is due now.
func (a *Adapter) Handle(ev HookEvent) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch ev.Event {
	case "UserPromptSubmit", "PreToolUse":
		if _, ok := a.runs[ev.SessionID]; ok {
			return false
		}
		a.runs[ev.SessionID] = uuid.NewString()
		return true
	case "Stop", "StopFailure":
		if _, ok := a.runs[ev.SessionID]; !ok {
			return false
		}
		delete(a.runs, ev.SessionID)
		return true
	case "SessionEnd":
		delete(a.runs, ev.SessionID)
		if ev.Reason != "clear" {
			a.endOnce.Do(func() { close(a.end) })
		}
		return true
	}
	return false
}

// Run serves the Claude Code process until it is gone, SessionEnd arrives or
// ctx ends. It returns ErrRunning when another adapter holds the process's
// lock, and the filesystem's errors for the lock and socket; connection
// errors are logged and retried, never returned.
func (a *Adapter) Run(ctx context.Context) error {
	if err := os.MkdirAll(a.o.StateDir, 0o700); err != nil {
		return err
	}
	lock, err := os.OpenFile(statePath(a.o.StateDir, a.o.Claude, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return ErrRunning
		}
		return err
	}
	_ = lock.Truncate(0)
	_, _ = fmt.Fprintf(lock, "%d\n", os.Getpid())
	sock := SocketPath(a.o.StateDir, a.o.Claude)
	_ = os.Remove(sock) // a stale socket of a dead adapter: we hold the lock
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer os.Remove(sock)
	defer ln.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.serveHooks(ctx, ln)
	go a.watch(ctx, cancel)
	if a.o.Probe != nil {
		a.o.RuntimeVersion, a.o.Evidence = a.o.Probe(ctx)
	}
	// The caller's logger names the process (the CLI adds claude_pid).
	a.log.Info("adapter started", "runtime_version", a.o.RuntimeVersion,
		"key_type", a.o.Evidence.KeyType, "method", a.o.Evidence.Method)
	a.connectLoop(ctx)
	close(a.ended)
	a.log.Info("adapter stopped")
	return nil
}

// watch cancels when the Claude Code process is gone.
func (a *Adapter) watch(ctx context.Context, cancel context.CancelFunc) {
	t := a.clock.NewTicker(a.o.WatchInterval)
	defer t.Stop()
	workgroup.Every(ctx.Done(), t.Chan(), func() {
		if ctx.Err() == nil && !a.o.Claude.Alive() { // once: cancel ends ctx
			a.log.Info("claude code process gone")
			cancel()
		}
	})
}

// serveHooks answers hook connections: one HookEvent line in, "ok" out
// (for SessionEnd after the last heartbeat went out).
func (a *Adapter) serveHooks(ctx context.Context, ln net.Listener) {
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			line, err := bufio.NewReader(c).ReadBytes('\n')
			var ev HookEvent
			if err != nil || json.Unmarshal(line, &ev) != nil {
				return
			}
			a.log.Info("hook", "event", ev.Event, "session_id", ev.SessionID)
			if a.Handle(ev) {
				select {
				case a.kick <- struct{}{}:
				default:
				}
			}
			if ev.Event == "SessionEnd" && ev.Reason != "clear" {
				select {
				case <-a.ended:
				case <-time.After(20 * time.Second):
				}
			}
			_, _ = c.Write([]byte("ok\n"))
		}()
	}
}

// connectLoop keeps a gateway connection until ctx ends or SessionEnd.
func (a *Adapter) connectLoop(ctx context.Context) {
	backoff := 500 * time.Millisecond
	for {
		ready, err := a.session(ctx)
		select {
		case <-a.end:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
		if ready {
			backoff = 500 * time.Millisecond
		}
		code := websocket.CloseStatus(err)
		switch {
		case code == closeGoingAway || code == closeDeadline:
			a.log.Info("gateway closed; reconnecting", "code", int(code))
		case code == closeAuthFailed || errors.Is(err, errIdentify):
			a.log.Warn("gateway refused the credential; retrying slowly", "err", err)
			backoff = a.o.MaxBackoff
		default:
			a.log.Warn("gateway connection lost; reconnecting", "err", err)
		}
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-a.end:
			return
		case <-a.clock.After(d):
		}
		backoff = min(2*backoff, a.o.MaxBackoff)
	}
}

type frame struct {
	Op string          `json:"op"`
	D  json.RawMessage `json:"d,omitempty"`
}

// session runs one gateway connection. ready reports whether identify
// succeeded (the backoff resets).
func (a *Adapter) session(ctx context.Context) (ready bool, err error) {
	wsURL := "ws" + strings.TrimPrefix(strings.TrimRight(a.o.Server, "/"), "http") + "/v1/gateway"
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c, _, err := websocket.Dial(dctx, wsURL, nil)
	cancel()
	if err != nil {
		return false, err
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)
	interval := 15 * time.Second
	readInterval := func(want string) error {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, b, err := c.Read(rctx)
		if err != nil {
			return err
		}
		var f frame
		if err := json.Unmarshal(b, &f); err != nil {
			return err
		}
		if f.Op == "error" && want == "ready" {
			return fmt.Errorf("%w: %s", errIdentify, f.D)
		}
		if f.Op != want {
			return fmt.Errorf("gateway sent %s, want %s: %s", f.Op, want, b)
		}
		var d struct {
			HeartbeatIntervalMS int64 `json:"heartbeat_interval_ms"`
		}
		if json.Unmarshal(f.D, &d) == nil && d.HeartbeatIntervalMS > 0 {
			interval = time.Duration(d.HeartbeatIntervalMS) * time.Millisecond
		}
		return nil
	}
	if err := readInterval("hello"); err != nil {
		return false, err
	}
	id, _ := json.Marshal(map[string]string{"token": a.o.Credential})
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":`+string(id)+`}`)); err != nil {
		return false, err
	}
	if err := readInterval("ready"); err != nil {
		return false, err
	}
	a.log.Info("gateway ready", "interval", interval)

	sctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	go func() { // acks and error frames; a close ends the session
		for {
			_, b, err := c.Read(sctx)
			if err != nil {
				stop(err)
				return
			}
			var f frame
			if json.Unmarshal(b, &f) == nil && f.Op == "error" {
				a.log.Warn("gateway error frame", "d", string(f.D))
			}
		}
	}()
	send := func() error {
		body := a.Heartbeat().Canonical()
		return c.Write(sctx, websocket.MessageText, []byte(`{"op":"heartbeat","d":{"agent":`+string(body)+`}}`))
	}
	t := a.clock.NewTicker(interval)
	defer t.Stop()
	for {
		if err := send(); err != nil {
			return true, cause(sctx, err)
		}
		select {
		case <-sctx.Done():
			return true, cause(sctx, sctx.Err())
		case <-a.end:
			// The last heartbeat (runs closed), then a normal close.
			if err := send(); err != nil {
				return true, cause(sctx, err)
			}
			_ = c.Close(websocket.StatusNormalClosure, "claude code session ended")
			return true, nil
		case <-a.kick:
		case <-t.Chan():
		}
	}
}

func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}
