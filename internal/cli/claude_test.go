package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClaudePluginCommand(t *testing.T) {
	dir := t.TempDir()
	r := run("claude", "plugin", "reviewer", "--out", dir, "--server", "http://127.0.0.1:7070", "--json").ok(t)
	var p struct{ Plugin, Marketplace, Channel, Tool_prefix string }
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p.Channel != "plugin:rollcall-reviewer@rollcall" {
		t.Fatalf("output %q: %v", r.stdout, err)
	}
	for _, f := range []string{".claude-plugin/marketplace.json", "plugins/rollcall-reviewer/.claude-plugin/plugin.json",
		"plugins/rollcall-reviewer/.mcp.json", "plugins/rollcall-reviewer/hooks/hooks.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	r = run("claude", "plugin", "reviewer", "--out", dir, "--server", "http://127.0.0.1:7070").ok(t)
	for _, want := range []string{"claude plugin marketplace add", "claude plugin install rollcall-reviewer@rollcall",
		"claude --channels plugin:rollcall-reviewer@rollcall", "allowedChannelPlugins", "ROLLCALL_AGENT_CREDENTIAL"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	run("claude", "plugin", "reviewer").fails(t, 2, "--out")
	run("claude", "plugin").fails(t, 2, "one argument")
	run("claude", "plugin", "Not A Handle", "--out", dir).fails(t, 2, "not a handle")
	run("adapter", "run").fails(t, 2, "--claude-pid")
}

// TestAdapterHookWithoutAdapter: a SessionEnd with no adapter running
// starts none, and neither does a hook without the credential; both exit 0
// (a hook never fails Claude Code).
func TestAdapterHookWithoutAdapter(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ROLLCALL_ADAPTER_DIR", dir)
	run("adapter", "hook", "SessionEnd").ok(t)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("SessionEnd left files: %v", entries)
	}
	// Without the credential no adapter is started (it could not
	// identify); the hook says why and still exits 0.
	t.Setenv("ROLLCALL_AGENT_CREDENTIAL", "")
	r := run("adapter", "hook", "UserPromptSubmit").ok(t)
	if !strings.Contains(r.stderr, "ROLLCALL_AGENT_CREDENTIAL is not set") {
		t.Fatalf("stderr = %q", r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a hook without credential left files: %v", entries)
	}
}
