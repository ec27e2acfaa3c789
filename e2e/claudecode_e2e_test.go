package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/testkit"
)

// The end-to-end tests of (design: Claude Code channels) with the real Claude Code binary
// (@anthropic-ai/claude-code, pinned in e2e/claudecode/package-lock.json and
// installed by scripts/test.sh), driven by the scripted fake Messages API of
// fakeanthropic_test.go on loopback. Claude Code runs fully offline in a
// throwaway HOME: everything it needs for that is in claudeOffline below.
// Skips when the binary is not installed, unless ROLLCALL_REQUIRE_CLAUDE=1
// (as in .ci/run).

// claudeWait bounds every wait on Claude Code: it is a large binary on a
// busy 2-core machine, so the bound is generous (reaching it fails the test).
const claudeWait = 120 * time.Second

// fakeAPIKey is the API key Claude Code is given (the fake API takes any).
const fakeAPIKey = "sk-ant-api03-rollcall-e2e-fake-key-0000000000000000000000000000000000000000-AAAAAAAA"

// claudeBinary returns the pinned Claude Code binary, or skips.
func claudeBinary(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs("claudecode/node_modules/.bin/claude")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("ROLLCALL_REQUIRE_CLAUDE") == "1" {
			t.Fatalf("Claude Code is not installed at %s (run: cd e2e/claudecode && npm ci)", bin)
		}
		t.Skipf("Claude Code is not installed (cd e2e/claudecode && npm ci); set ROLLCALL_REQUIRE_CLAUDE=1 to fail instead")
	}
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("ROLLCALL_REQUIRE_CLAUDE") == "1" {
		t.Fatal("tmux is not installed")
	}
	return bin
}

// claudeEnv is one throwaway Claude Code installation: HOME, work dir and
// the environment of every claude process the test runs.
type claudeEnv struct {
	bin, home, work, debug string
	env                    []string
}

// claudeOffline is the one place naming what keeps Claude Code offline and
// unattended here (design: Claude Code channels; "facts learned"):
//
//   - env: the fake API (ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY), no
//     autoupdater, error reporting, telemetry or nonessential traffic, no
//     official marketplace auto-install, IS_SANDBOX=1, and
//     CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF=1 so the feature flag
//     cache below is read;
//   - ~/.claude.json: hasCompletedOnboarding, the API key approved
//     (customApiKeyResponses, its last 20 characters), the work dir's trust
//     dialog accepted, and the flag cache cachedGrowthBookFeatures with
//     tengu_harbor (channels) on;
//   - ~/.claude/settings.json: permissions.allow for the MCP tools
//     (allowTools, e.g. mcp__rollcall-e2e).
func claudeOffline(t *testing.T, apiURL string, allowTools ...string) *claudeEnv {
	t.Helper()
	root := t.TempDir()
	ce := &claudeEnv{bin: claudeBinary(t), home: filepath.Join(root, "home"), work: filepath.Join(root, "work"),
		debug: filepath.Join(root, "claude-debug.log")}
	for _, d := range []string{ce.home, ce.work, filepath.Join(ce.home, ".claude")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := map[string]any{
		"hasCompletedOnboarding":   true,
		"numStartups":              1,
		"customApiKeyResponses":    map[string]any{"approved": []string{fakeAPIKey[len(fakeAPIKey)-20:]}, "rejected": []string{}},
		"projects":                 map[string]any{ce.work: map[string]any{"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}},
		"cachedGrowthBookFeatures": map[string]any{"tengu_harbor": true},
	}
	writeJSON(t, filepath.Join(ce.home, ".claude.json"), cfg)
	writeJSON(t, filepath.Join(ce.home, ".claude", "settings.json"), map[string]any{"permissions": map[string]any{"allow": allowTools}})
	ce.env = []string{
		"HOME=" + ce.home, "PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=" + apiURL, "ANTHROPIC_API_KEY=" + fakeAPIKey,
		"DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
		"IS_SANDBOX=1", "CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF=1",
		"ROLLCALL_ADAPTER_DIR=" + filepath.Join(root, "adapter"),
	}
	t.Cleanup(func() {
		// ROLLCALL_CLAUDE_DEBUG_DIR keeps Claude Code's whole debug log.
		if d := os.Getenv("ROLLCALL_CLAUDE_DEBUG_DIR"); d != "" {
			if b, err := os.ReadFile(ce.debug); err == nil {
				os.WriteFile(filepath.Join(d, t.Name()+".log"), b, 0o644)
			}
		}
		if t.Failed() {
			if b, err := os.ReadFile(ce.debug); err == nil {
				lines := strings.Split(string(b), "\n")
				if len(lines) > 200 {
					lines = lines[len(lines)-200:]
				}
				t.Logf("claude debug log (last lines):\n%s", strings.Join(lines, "\n"))
			}
			logs, _ := filepath.Glob(filepath.Join(root, "adapter", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("adapter log %s:\n%s", l, b)
			}
		}
	})
	return ce
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// claude runs a claude subcommand (mcp add, plugin install, …) to its end.
func (ce *claudeEnv) claude(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(ce.bin, args...)
	cmd.Dir, cmd.Env = ce.work, ce.env
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(claudeWait):
		cmd.Process.Kill()
		<-done
		t.Fatalf("claude %s did not finish:\n%s", strings.Join(args, " "), out)
	}
	if err != nil {
		t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// debugLog returns Claude Code's debug log so far.
func (ce *claudeEnv) debugLog() string {
	b, _ := os.ReadFile(ce.debug)
	return string(b)
}

// waitChannel waits for the debug log's "Channel notifications registered"
// and fails at once on "skipped" (with Claude Code's reason).
func (ce *claudeEnv) waitChannel(t *testing.T, onWait func()) {
	t.Helper()
	skipRE := regexp.MustCompile(`Channel notifications skipped[^\n]*`)
	okRE := regexp.MustCompile(`Channel notifications (re-)?registered`)
	deadline := time.Now().Add(claudeWait)
	for {
		log := ce.debugLog()
		if okRE.MatchString(log) {
			return
		}
		if m := skipRE.FindString(log); m != "" {
			t.Fatalf("Claude Code did not register the channel: %s", m)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no channel registered within %s", claudeWait)
		}
		if onWait != nil {
			onWait()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitUntil polls ok until it holds or claudeWait passes.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	testkit.Eventually(t, what, claudeWait, ok)
}

func todoState(t *testing.T, srv *server, id string) string {
	t.Helper()
	var td todoJSON
	if code := restGet(t, srv, "/v1/todos/"+id, &td); code != 200 {
		t.Fatalf("GET /v1/todos/%s: %d", id, code)
	}
	return td.State
}

// tmuxSession is an interactive claude under tmux on its own socket.
type tmuxSession struct {
	sock string
}

func (s tmuxSession) tmux(args ...string) (string, error) {
	out, err := exec.Command("tmux", append([]string{"-S", s.sock}, args...)...).CombinedOutput()
	return string(out), err
}

func (s tmuxSession) screen() string {
	out, _ := s.tmux("capture-pane", "-p", "-t", "main")
	return out
}

// TestE2EClaudeCodeInteractive is the development route (design: Claude Code channels).
// `claude mcp add` with vend's line, an interactive session under tmux with
// --dangerously-load-development-channels: (a) a pushed todo reaches the
// model as a <channel> tag with todo_id, the model claims and completes it,
// REST shows done; (b) a clock-out, two pushes and a clock-in give one
// digest, drained with claim_next.
func TestE2EClaudeCodeInteractive(t *testing.T) {
	claudeBinary(t)
	needTmux(t)
	srv := startSQLite(t)
	v := vend(t, srv, "cc-dev", []string{"reviews"}, allVerbs)
	api := startFakeAnthropic(t, "mcp__rollcall-cc-dev")
	ce := claudeOffline(t, api.URL, "mcp__rollcall-cc-dev")

	// vend's line, verbatim but for the binary's path.
	line := strings.TrimPrefix(v.ClaudeMCPAdd, "claude ")
	add := exec.Command("sh", "-c", shQuote(ce.bin)+" "+line)
	add.Dir, add.Env = ce.work, ce.env
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", v.ClaudeMCPAdd, err, out)
	}
	if out := ce.claude(t, "mcp", "list"); !strings.Contains(out, "rollcall-cc-dev") || !strings.Contains(out, "Connected") {
		t.Fatalf("claude mcp list:\n%s", out)
	}

	startInteractive(t, ce, "--dangerously-load-development-channels", "server:rollcall-cc-dev")

	// (a) one todo, one doorbell, claim, complete.
	id := pushTodo(t, srv, "cc-dev", "reviews", "Review PR 7")
	waitUntil(t, "the todo done through the model's claim and complete", func() bool { return todoState(t, srv, id) == "done" })
	var tag string
	for _, c := range api.Channels() {
		if strings.Contains(c, ` todo_id="`+id+`"`) {
			tag = c
		}
	}
	if tag == "" || !strings.Contains(tag, `source="rollcall-cc-dev"`) {
		t.Fatalf("the model saw no <channel source=rollcall-cc-dev … todo_id=%s> tag; saw %q", id, api.Channels())
	}
	if calls := api.Calls(); !slices.Contains(calls, "claim "+id) || !slices.Contains(calls, "complete "+id) {
		t.Fatalf("model calls %q lack claim and complete of %s", calls, id)
	}

	// (b) clock-out, two pushes, clock-in: one digest, drained with claim_next.
	cli(t, srv, "agent", "clock-out", "cc-dev")
	ids := []string{pushTodo(t, srv, "cc-dev", "reviews", "Held one"), pushTodo(t, srv, "cc-dev", "reviews", "Held two")}
	before := len(api.Channels())
	cli(t, srv, "agent", "clock-in", "cc-dev")
	for _, hid := range ids {
		waitUntil(t, "held todo "+hid+" drained and done", func() bool { return todoState(t, srv, hid) == "done" })
	}
	var digests []string
	for _, c := range api.Channels()[before:] {
		if m := todoIDAttrRE.FindStringSubmatch(c); m != nil && slices.Contains(ids, m[1]) {
			t.Fatalf("a held todo was rung on its own instead of in the digest: %s", c)
		}
		if !todoIDAttrRE.MatchString(c) {
			digests = append(digests, c)
		}
	}
	if len(digests) != 1 || !strings.Contains(digests[0], `kind="digest"`) {
		t.Fatalf("want one digest tag after the clock-in, saw %q", digests)
	}
	// Claude Code shows the digest's meta as tag attributes, the oldest todo's id among them.
	if !strings.Contains(digests[0], `oldest_todo_id="`+ids[0]+`"`) {
		t.Fatalf("the digest tag does not name the oldest todo %s: %s", ids[0], digests[0])
	}
	if n := countPrefix(api.Calls(), "claim_next"); n < 2 {
		t.Fatalf("the digest was not drained with claim_next: calls %q", api.Calls())
	}
}

// startInteractive runs an interactive claude with args under tmux (its own
// socket), accepts the development-channels warning with Enter, and waits
// for the channel to register. Cleanup kills it and waits for it to exit.
func startInteractive(t *testing.T, ce *claudeEnv, args ...string) tmuxSession {
	t.Helper()
	script := filepath.Join(filepath.Dir(ce.home), "run-claude.sh")
	var sb strings.Builder
	sb.WriteString("#!/bin/sh\ncd " + shQuote(ce.work) + "\n")
	for _, kv := range ce.env {
		sb.WriteString("export " + shQuote(kv) + "\n")
	}
	sb.WriteString("exec " + shQuote(ce.bin) + " --debug-file " + shQuote(ce.debug))
	for _, a := range args {
		sb.WriteString(" " + shQuote(a))
	}
	sb.WriteString("\n")
	if err := os.WriteFile(script, []byte(sb.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	ts := tmuxSession{sock: filepath.Join(filepath.Dir(ce.home), "tmux.sock")}
	if out, err := ts.tmux("new-session", "-d", "-s", "main", "-x", "200", "-y", "50", script); err != nil {
		t.Fatalf("tmux: %v\n%s", err, out)
	}
	panePID, _ := ts.tmux("display-message", "-p", "-t", "main", "#{pane_pid}")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("claude screen:\n%s", ts.screen())
		}
		ts.tmux("kill-server")
		// Claude Code writes to its HOME until it is gone: wait before the
		// temp dir is removed.
		if pid, err := strconv.Atoi(strings.TrimSpace(panePID)); err == nil {
			deadline := time.Now().Add(30 * time.Second)
			for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// Enter accepts the development-channels warning (and any other
	// confirmation shown first); the channel registers after it.
	lastEnter := time.Time{}
	ce.waitChannel(t, func() {
		if sc := ts.screen(); strings.Contains(sc, "Enter") && time.Since(lastEnter) > 2*time.Second {
			ts.tmux("send-keys", "-t", "main", "Enter")
			lastEnter = time.Now()
		}
	})
	return ts
}

func countPrefix(ss []string, p string) int {
	n := 0
	for _, s := range ss {
		if strings.HasPrefix(s, p) {
			n++
		}
	}
	return n
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// managedSettings writes the organisation's approval of a channel plugin
// into Claude Code's managed settings. On Linux they live in
// /etc/claude-code (managed-settings.json and the drop-in folder
// managed-settings.d/); this build reads no other place (the hidden
// --managed-settings flag is for SDK hosts). The test writes a drop-in of
// its own and removes it, and the folders it created, at cleanup. Without
// permission to write there it skips (fails under ROLLCALL_REQUIRE_CLAUDE).
func managedSettings(t *testing.T, v any) {
	t.Helper()
	const dir = "/etc/claude-code"
	dropIn := filepath.Join(dir, "managed-settings.d")
	var created []string
	for _, d := range []string{dir, dropIn} {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			if err := os.Mkdir(d, 0o755); err != nil {
				if os.Getenv("ROLLCALL_REQUIRE_CLAUDE") == "1" {
					t.Fatalf("cannot write managed settings: %v", err)
				}
				t.Skipf("cannot write managed settings in %s: %v", dir, err)
			}
			created = append(created, d)
		}
	}
	path := filepath.Join(dropIn, fmt.Sprintf("90-rollcall-e2e-%d.json", os.Getpid()))
	b, _ := json.Marshal(v)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		if os.Getenv("ROLLCALL_REQUIRE_CLAUDE") == "1" {
			t.Fatalf("cannot write managed settings: %v", err)
		}
		t.Skipf("cannot write managed settings: %v", err)
	}
	t.Cleanup(func() {
		os.Remove(path)
		for i := len(created) - 1; i >= 0; i-- {
			os.Remove(created[i])
		}
	})
}

// headless is a `claude -p --input-format stream-json` process.
type headless struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

func (h *headless) send(t *testing.T, text string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
	if _, err := h.stdin.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

func (h *headless) output() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.String()
}

// TestE2EClaudeCodePlugin is the plugin route, headless (design: Plugin, Adapter).
// `rollcall claude plugin` writes the plugin and marketplace, `claude plugin
// marketplace add` and `claude plugin install` install it, managed settings
// approve it (allowedChannelPlugins), and `claude -p --input-format
// stream-json --channels plugin:…` runs with the credential only in the
// environment: (d) after SessionStart the adapter has the agent online with
// tool_class claude-code and billing evidence api_key; (c) a pushed todo
// reaches the model as a <channel> tag, claimed and completed; (d) after
// Claude Code exits the agent goes offline after the timeout.
func TestE2EClaudeCodePlugin(t *testing.T) {
	claudeBinary(t)
	srv := startSQLite(t,
		"--sync.heartbeat_interval", "1s", "--agent.presence_timeout", "4s")
	v := vend(t, srv, "cc-fleet", []string{"reviews"}, allVerbs)
	const plugin, market = "rollcall-cc-fleet", "rollcall"
	prefix := "mcp__plugin_" + plugin + "_rollcall"
	api := startFakeAnthropic(t, prefix)
	ce := claudeOffline(t, api.URL, prefix)
	ce.env = append(ce.env, "ROLLCALL_AGENT_CREDENTIAL="+v.Credential)

	channel := installPlugin(t, srv, ce, "cc-fleet", v.Credential)
	managedSettings(t, map[string]any{"channelsEnabled": true,
		"allowedChannelPlugins": []any{map[string]any{"plugin": plugin, "marketplace": market}}})

	cmd := exec.Command(ce.bin, "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--debug-file", ce.debug, "--channels", channel)
	cmd.Dir, cmd.Env = ce.work, ce.env
	h := &headless{cmd: cmd, exited: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.stdin = stdin
	w := testkit.WriterFunc(func(b []byte) { h.mu.Lock(); h.out.Write(b); h.mu.Unlock() })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(h.exited) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-h.exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-h.exited
		}
		if t.Failed() {
			t.Logf("claude -p output:\n%s", h.output())
		}
	})
	// The channel registers when the first stdin message arrives.
	h.send(t, "You are on duty for Rollcall. Wait for todos.")
	ce.waitChannel(t, nil)

	// (d) SessionStart started the adapter: online, claude-code, api_key.
	var st struct {
		State             string  `json:"state"`
		ReportedToolClass *string `json:"reported_tool_class"`
		ReportedMode      *string `json:"reported_billing_mode"`
		BillingEvidence   *struct {
			KeyType string `json:"key_type"`
			Method  string `json:"method"`
		} `json:"billing_evidence"`
		Runtime *struct {
			Name           string `json:"name"`
			RuntimeVersion string `json:"runtime_version"`
		} `json:"runtime"`
		Adapter *struct {
			Name string `json:"name"`
		} `json:"adapter"`
	}
	waitUntil(t, "the agent online through the adapter", func() bool {
		restGet(t, srv, "/v1/agents/cc-fleet/status", &st)
		return st.State == "online" && st.BillingEvidence != nil
	})
	if st.BillingEvidence.KeyType != "api_key" || st.BillingEvidence.Method != "env" || st.ReportedToolClass == nil ||
		*st.ReportedToolClass != "claude-code" || st.ReportedMode == nil || *st.ReportedMode != "api" ||
		st.Runtime == nil || st.Runtime.Name != "claude-code" || !strings.HasPrefix(st.Runtime.RuntimeVersion, "2.") ||
		st.Adapter == nil || st.Adapter.Name != "rollcall-adapter" {
		b, _ := json.Marshal(st)
		t.Fatalf("status after SessionStart: %s", b)
	}

	// (c) the todo flow through the plugin channel.
	id := pushTodo(t, srv, "cc-fleet", "reviews", "Review PR 9")
	waitUntil(t, "the todo done through the plugin channel", func() bool { return todoState(t, srv, id) == "done" })
	var tag string
	for _, c := range api.Channels() {
		if strings.Contains(c, ` todo_id="`+id+`"`) && strings.Contains(c, `source="plugin:`+plugin+`:rollcall"`) {
			tag = c
		}
	}
	if tag == "" {
		t.Fatalf("the model saw no <channel source=plugin:%s:rollcall … todo_id=%s> tag; saw %q", plugin, id, api.Channels())
	}

	// (d) Claude Code exits (stdin closed): SessionEnd, the adapter's last
	// heartbeat, then offline after the presence timeout.
	stdin.Close()
	select {
	case <-h.exited:
	case <-time.After(claudeWait):
		t.Fatal("claude -p did not exit after its stdin closed")
	}
	waitUntil(t, "the agent offline after Claude Code exited", func() bool {
		restGet(t, srv, "/v1/agents/cc-fleet/status", &st)
		return st.State == "offline"
	})
	logs, _ := filepath.Glob(filepath.Join(filepath.Dir(ce.home), "adapter", "claude-*.log"))
	if len(logs) != 1 {
		t.Fatalf("want one adapter (one log) for the one Claude Code process, got %q", logs)
	}
	waitUntil(t, "the adapter stopped", func() bool {
		b, _ := os.ReadFile(logs[0])
		return strings.Contains(string(b), "adapter stopped")
	})
	b, _ := os.ReadFile(logs[0])
	for _, ev := range []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"} {
		if !strings.Contains(string(b), "event="+ev+" ") {
			t.Errorf("the adapter got no %s hook:\n%s", ev, b)
		}
	}
	if bytes.Contains(b, []byte(v.Credential)) || bytes.Contains(b, []byte(fakeAPIKey)) {
		t.Fatal("the adapter logged a secret")
	}
}

func needTmux(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("ROLLCALL_REQUIRE_CLAUDE") == "1" {
			t.Fatal("tmux is not installed")
		}
		t.Skip("tmux is not installed")
	}
}

// installPlugin writes agent's plugin with `rollcall claude plugin` (the
// hooks running this test's rollcall binary), checks no file holds the
// credential, validates it with `claude plugin validate`, and installs it with `claude plugin marketplace add` and
// `claude plugin install`. It returns the channel (plugin:<p>@<m>).
func installPlugin(t *testing.T, srv *server, ce *claudeEnv, agent, credential string) string {
	t.Helper()
	mkt := filepath.Join(filepath.Dir(ce.home), "marketplace")
	out := cli(t, srv, "claude", "plugin", agent, "--out", mkt, "--server", srv.URL, "--bin", binPath, "--json")
	var p struct {
		Plugin, Marketplace, Channel string
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.Channel != "plugin:rollcall-"+agent+"@rollcall" {
		t.Fatalf("rollcall claude plugin: %v\n%s", err, out)
	}
	filepath.WalkDir(mkt, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(credential)) {
				t.Errorf("%s holds the credential", path)
			}
		}
		return nil
	})
	for _, dir := range []string{mkt, filepath.Join(mkt, "plugins", p.Plugin)} {
		if out := ce.claude(t, "plugin", "validate", dir); !strings.Contains(out, "Validation passed") {
			t.Fatalf("claude plugin validate %s:\n%s", dir, out)
		}
	}
	ce.claude(t, "plugin", "marketplace", "add", mkt)
	ce.claude(t, "plugin", "install", p.Plugin+"@"+p.Marketplace)
	return p.Channel
}

// TestE2EClaudeCodeDevPlugin: the plugin without an organisation's
// approval, named as a development channel in an interactive session
// (README, development route with the adapter): the doorbell reaches the
// model as <channel source="plugin:rollcall-cc-devplug:rollcall" …>, the todo is done, and the adapter
// has the agent online.
func TestE2EClaudeCodeDevPlugin(t *testing.T) {
	claudeBinary(t)
	needTmux(t)
	srv := startSQLite(t)
	v := vend(t, srv, "cc-devplug", []string{"reviews"}, allVerbs)
	prefix := "mcp__plugin_rollcall-cc-devplug_rollcall"
	api := startFakeAnthropic(t, prefix)
	ce := claudeOffline(t, api.URL, prefix)
	ce.env = append(ce.env, "ROLLCALL_AGENT_CREDENTIAL="+v.Credential)
	channel := installPlugin(t, srv, ce, "cc-devplug", v.Credential)
	startInteractive(t, ce, "--dangerously-load-development-channels", channel)

	id := pushTodo(t, srv, "cc-devplug", "reviews", "Review PR 11")
	waitUntil(t, "the todo done", func() bool { return todoState(t, srv, id) == "done" })
	found := false
	for _, c := range api.Channels() {
		found = found || (strings.Contains(c, ` todo_id="`+id+`"`) && strings.Contains(c, `source="plugin:rollcall-cc-devplug:rollcall"`))
	}
	if !found {
		t.Fatalf("the model saw no <channel source=plugin:rollcall-cc-devplug:rollcall … todo_id=%s> tag; saw %q", id, api.Channels())
	}
	waitUntil(t, "the agent online through the adapter", func() bool { return agentState(t, srv, "cc-devplug") == "online" })
}
