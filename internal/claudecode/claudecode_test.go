package claudecode

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/gateway"
	"github.com/rollcall/rollcall/internal/liveness"

	"github.com/rollcall/rollcall/internal/testkit"
)

const waitBound = 20 * time.Second

func TestWritePlugin(t *testing.T) {
	dir := t.TempDir()
	p, err := WritePlugin(PluginOptions{Agent: "reviewer", Server: "http://127.0.0.1:7070/", OutDir: dir, Bin: "/opt/roll call/rollcall"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "rollcall-reviewer" || p.Marketplace != "rollcall" || p.Channel != "plugin:rollcall-reviewer@rollcall" ||
		p.ToolPrefix != "mcp__plugin_rollcall-reviewer_rollcall" {
		t.Fatalf("plugin = %+v", p)
	}
	read := func(rel string, into any) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	var manifest struct {
		Name     string `json:"name"`
		Version  string `json:"version"`
		Channels []struct {
			Server string `json:"server"`
		} `json:"channels"`
	}
	read("plugins/rollcall-reviewer/.claude-plugin/plugin.json", &manifest)
	if manifest.Name != p.Name || len(manifest.Channels) != 1 || manifest.Channels[0].Server != ServerName {
		t.Fatalf("plugin.json = %+v", manifest)
	}
	var mcp struct {
		MCPServers map[string]struct {
			Type, URL string
			Headers   map[string]string
		} `json:"mcpServers"`
	}
	read("plugins/rollcall-reviewer/.mcp.json", &mcp)
	s := mcp.MCPServers[ServerName]
	if s.Type != "http" || s.URL != "http://127.0.0.1:7070/mcp" || s.Headers["Authorization"] != "Bearer ${ROLLCALL_AGENT_CREDENTIAL}" {
		t.Fatalf(".mcp.json = %+v", mcp)
	}
	var hooks struct {
		Hooks map[string][]struct {
			Hooks []struct{ Type, Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	read("plugins/rollcall-reviewer/hooks/hooks.json", &hooks)
	for _, ev := range HookEvents {
		h := hooks.Hooks[ev]
		if len(h) != 1 || len(h[0].Hooks) != 1 || h[0].Hooks[0].Type != "command" {
			t.Fatalf("hooks.json %s = %+v", ev, h)
		}
		want := `'/opt/roll call/rollcall' adapter hook ` + ev + ` --server http://127.0.0.1:7070 --agent reviewer --credential-env ROLLCALL_AGENT_CREDENTIAL`
		if h[0].Hooks[0].Command != want {
			t.Fatalf("hook %s command = %q, want %q", ev, h[0].Hooks[0].Command, want)
		}
	}

	if !strings.HasPrefix(manifest.Version, "0.0.0+") {
		t.Fatalf("version = %q, want 0.0.0+<digest>", manifest.Version)
	}
	// Other settings, another version (Claude Code caches by version).
	if _, err := WritePlugin(PluginOptions{Agent: "reviewer", Server: "http://127.0.0.1:7071", OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	first := manifest.Version
	read("plugins/rollcall-reviewer/.claude-plugin/plugin.json", &manifest)
	if manifest.Version == first {
		t.Fatalf("version %q unchanged after a change of server", first)
	}

	// A second agent joins the same marketplace; the first stays.
	if _, err := WritePlugin(PluginOptions{Agent: "builder", Server: "https://rollcall.example.com", OutDir: dir}); err != nil {
		t.Fatal(err)
	}
	var mp struct {
		Name    string `json:"name"`
		Plugins []struct{ Name, Source string }
	}
	read(".claude-plugin/marketplace.json", &mp)
	if mp.Name != "rollcall" || len(mp.Plugins) != 2 || mp.Plugins[0].Name != "rollcall-builder" ||
		mp.Plugins[1].Name != "rollcall-reviewer" || mp.Plugins[1].Source != "./plugins/rollcall-reviewer" {
		t.Fatalf("marketplace.json = %+v", mp)
	}

	for _, bad := range []PluginOptions{
		{Agent: "Bad Agent", Server: "http://x", OutDir: dir},
		{Agent: "a", Server: "ftp://x", OutDir: dir},
		{Agent: "a", Server: "http://x", OutDir: dir, CredentialEnv: "A-B"},
	} {
		if _, err := WritePlugin(bad); err == nil {
			t.Errorf("WritePlugin(%+v) succeeded", bad)
		}
	}
}

func TestBilling(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cases := []struct {
		name              string
		env               func(string) (string, bool)
		st                *AuthStatus
		key, method, mode string
	}{
		{"api key", env("ANTHROPIC_API_KEY", "sk-ant-x"), nil, "api_key", "env", "api"},
		{"bedrock beats a key", env("ANTHROPIC_API_KEY", "sk", "CLAUDE_CODE_USE_BEDROCK", "1"), nil, "cloud", "env", "cloud"},
		{"vertex off", env("CLAUDE_CODE_USE_VERTEX", "0"), nil, "unknown", "none", ""},
		{"foundry", env("CLAUDE_CODE_USE_FOUNDRY", "true"), nil, "cloud", "env", "cloud"},
		{"empty key", env("ANTHROPIC_API_KEY", " "), nil, "unknown", "none", ""},
		{"oauth token", env("CLAUDE_CODE_OAUTH_TOKEN", "x"), nil, "oauth", "env", "subscription"},
		{"claude.ai login", env(), &AuthStatus{LoggedIn: true, AuthMethod: "claude.ai", APIProvider: "firstParty"}, "oauth", "auth_status", "subscription"},
		{"stored key", env(), &AuthStatus{LoggedIn: true, AuthMethod: "api_key", APIProvider: "firstParty"}, "api_key", "auth_status", "api"},
		{"cloud provider", env(), &AuthStatus{LoggedIn: true, AuthMethod: "none", APIProvider: "vertex"}, "cloud", "auth_status", "cloud"},
		{"logged out", env(), &AuthStatus{LoggedIn: false, AuthMethod: "none", APIProvider: "firstParty"}, "unknown", "none", ""},
		{"nothing", env(), nil, "unknown", "none", ""},
	}
	for _, c := range cases {
		ev := Billing(c.env, c.st)
		if ev.KeyType != c.key || ev.Method != c.method || ev.Mode != c.mode {
			t.Errorf("%s: %+v, want %s/%s/%s", c.name, ev, c.key, c.method, c.mode)
		}
	}
}

// TestHeartbeatBody: the adapter's body passes the one decoder, and runs
// open at UserPromptSubmit / PreToolUse and close at Stop.
func TestHeartbeatBody(t *testing.T) {
	a := NewAdapter(AdapterOptions{RuntimeVersion: "2.1.328",
		Evidence: Billing(func(k string) (string, bool) { return "x", k == "ANTHROPIC_API_KEY" }, nil)})
	decode := func() liveness.Heartbeat {
		t.Helper()
		h, err := liveness.DecodeHeartbeat(a.Heartbeat().Canonical())
		if err != nil {
			t.Fatalf("%s: %v", a.Heartbeat().Canonical(), err)
		}
		return h
	}
	h := decode()
	if h.State != "online" || *h.ToolClass != "claude-code" || *h.RuntimeVersion != "2.1.328" || *h.BillingMode != "api" ||
		h.BillingEvidence.KeyType != "api_key" || h.Details.Runtime.Name != "claude-code" || h.Details.Adapter.Name != AdapterName ||
		h.Details.ActiveRuns == nil || len(h.Details.ActiveRuns) != 0 {
		t.Fatalf("heartbeat = %s", a.Heartbeat().Canonical())
	}
	if !a.Handle(HookEvent{Event: "UserPromptSubmit", SessionID: "s1"}) || a.Handle(HookEvent{Event: "PreToolUse", SessionID: "s1"}) {
		t.Fatal("a prompt opens one run; a tool call in it opens none")
	}
	if !a.Handle(HookEvent{Event: "PreToolUse", SessionID: "s2"}) { // a channel turn: no prompt, a tool call
		t.Fatal("a tool call outside a run opens one")
	}
	if runs := decode().Details.ActiveRuns; len(runs) != 2 {
		t.Fatalf("active runs = %v, want 2", runs)
	}
	a.Handle(HookEvent{Event: "Stop", SessionID: "s1"})
	a.Handle(HookEvent{Event: "StopFailure", SessionID: "s2"})
	if runs := decode().Details.ActiveRuns; len(runs) != 0 {
		t.Fatalf("active runs after Stop = %v", runs)
	}
	a.Handle(HookEvent{Event: "SessionEnd", SessionID: "s1", Reason: "clear"})
	select {
	case <-a.end:
		t.Fatal("SessionEnd with reason clear (a SessionStart follows) ended the adapter")
	default:
	}
}

type gwEnv struct {
	svc     *app.Service
	admin   domain.Person
	cred    string
	srv     *httptest.Server
	current *atomic.Pointer[gateway.Gateway]
	newGW   func() *gateway.Gateway
}

// newGatewayEnv runs the real gateway and use case on SQLite behind a
// handler whose gateway can be replaced (newGW), with an agent "cc".
func newGatewayEnv(t *testing.T) *gwEnv {
	t.Helper()
	st, _ := testkit.OpenSQLiteLoose(t)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	b := bus.NewLocal()
	log := slog.New(slog.DiscardHandler)
	svc := app.New(app.Options{Store: st, Bus: b, Clock: clock, Log: log,
		Liveness: app.LivenessConfig{HeartbeatInterval: 15 * time.Second, PresenceTimeout: 45 * time.Second}})
	admin, _ := testkit.BootstrapAdmin(t, svc)
	res, err := svc.Vend(t.Context(), admin, app.VendInput{Handle: "cc", Queues: []string{"build"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &gwEnv{svc: svc, admin: admin, cred: res.Credential, current: &atomic.Pointer[gateway.Gateway]{}}
	e.newGW = func() *gateway.Gateway {
		gw := gateway.New(gateway.Options{Service: svc, Bus: b, Log: log})
		e.current.Store(gw)
		return gw
	}
	e.newGW()
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.current.Load().ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	return e
}

func poll(t *testing.T, what string, ok func() bool) {
	t.Helper()
	testkit.Eventually(t, what, waitBound, ok)
}

// TestAdapterBadCredential: identify refused → the adapter says so in its
// log and keeps retrying slowly; it never logs the credential.
func TestAdapterBadCredential(t *testing.T) {
	e := newGatewayEnv(t)
	var logs testkit.SyncBuffer
	const bad = "rca_not-a-real-credential-0000000000000000"
	a := NewAdapter(AdapterOptions{Server: e.srv.URL, Credential: bad, Claude: Identify(os.Getpid()), StateDir: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(&logs, nil)), MaxBackoff: 50 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	poll(t, "refusal logged twice (retried)", func() bool { return strings.Count(logs.String(), "gateway refused the credential") >= 2 })
	a.endOnce.Do(func() { close(a.end) })
	<-done
	if strings.Contains(logs.String(), bad) {
		t.Fatalf("the credential was logged:\n%s", logs.String())
	}
}

// TestAdapterGateway runs the adapter against the real gateway and use case
// on SQLite: it identifies and heartbeats (online, claude-code, api_key), a
// second adapter for the same process gives way, a gateway shutdown (4013)
// is followed by a reconnect to the next gateway, hook events arrive on the
// socket, and SessionEnd ends Run after a last heartbeat.
func TestAdapterGateway(t *testing.T) {
	e := newGatewayEnv(t)
	svc, admin, srv, current := e.svc, e.admin, e.srv, e.current
	log := slog.New(slog.DiscardHandler)
	gw1 := current.Load()
	dir := t.TempDir()
	self := Identify(os.Getpid())
	opts := AdapterOptions{Server: srv.URL, Credential: e.cred, Claude: self, StateDir: dir, RuntimeVersion: "2.1.328",
		Evidence: Evidence{liveness.BillingEvidence{KeyType: "api_key", Method: "env"}, BillingModeAPI}, Log: log,
		MaxBackoff: time.Second}
	a := NewAdapter(opts)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	t.Cleanup(func() {
		a.endOnce.Do(func() { close(a.end) })
		<-done
	})

	status := func() app.AgentRuntimeStatus {
		s, err := svc.AgentStatus(t.Context(), admin, "cc")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	poll(t, "online through the adapter", func() bool { return status().State == "online" })
	s := status()
	if s.BillingEvidence == nil || s.BillingEvidence.KeyType != "api_key" || s.ReportedToolClass == nil || *s.ReportedToolClass != "claude-code" {
		b, _ := json.Marshal(s)
		t.Fatalf("status = %s", b)
	}

	// One adapter per process.
	if err := NewAdapter(opts).Run(context.Background()); err != ErrRunning {
		t.Fatalf("second adapter: %v, want ErrRunning", err)
	}

	// 4013: the adapter reconnects (to the next gateway).
	e.newGW()
	if err := gw1.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	poll(t, "reconnected after 4013", func() bool { return current.Load().Connections() == 1 })

	// Hook events on the socket; SessionEnd answers after the last heartbeat.
	if err := sendEvent(dir, self, HookEvent{Event: "UserPromptSubmit", SessionID: "s"}, waitBound); err != nil {
		t.Fatal(err)
	}
	if err := sendEvent(dir, self, HookEvent{Event: "SessionEnd", SessionID: "s", Reason: "prompt_input_exit"}, waitBound); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitBound):
		t.Fatal("Run did not return after SessionEnd")
	}
	poll(t, "connection closed", func() bool { return current.Load().Connections() == 0 })
	if _, err := os.Stat(SocketPath(dir, self)); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"rollcall": "rollcall", "/usr/bin/rollcall": "/usr/bin/rollcall",
		"a b": "'a b'", "it's": `'it'\''s'`, "": "''", "$(x)": "'$(x)'"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAdapterEndsWithProcess: the adapter serves a process (here a sleep)
// and Run returns once it is gone, with no gateway needed; a recycled PID
// with another start time counts as gone.
func TestAdapterEndsWithProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := Identify(cmd.Process.Pid)
	if !p.Alive() {
		t.Fatal("a running process is not alive")
	}
	if (Process{PID: p.PID, Start: p.Start + 1}).Alive() && p.Start != 0 {
		t.Fatal("another start time is the same process")
	}
	a := NewAdapter(AdapterOptions{Server: "http://127.0.0.1:1", Claude: p, StateDir: t.TempDir(),
		Log: slog.New(slog.DiscardHandler), WatchInterval: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	cmd.Process.Kill()
	cmd.Wait()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitBound):
		t.Fatal("Run did not return after the process was gone")
	}
	if p.Alive() {
		t.Fatal("a reaped process is alive")
	}
}
