// Package claudecode connects Claude Code sessions to Rollcall: it writes a
// Claude Code plugin and a local marketplace for one agent (WritePlugin,
// `rollcall claude plugin`; design: Plugin), and runs the adapter that
// heartbeats over the gateway for one Claude Code process (Adapter, `rollcall
// adapter run`; design: Adapter), fed by the plugin's hooks (Hook, `rollcall
// adapter hook <event>`), with billing evidence read from the session's
// environment (design: Billing evidence).
package claudecode

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// DefaultCredentialEnv is the environment variable the plugin's MCP entry
// and the adapter read the agent's credential from. The credential is never
// written into a plugin file.
const DefaultCredentialEnv = "ROLLCALL_AGENT_CREDENTIAL"

// DefaultMarketplace is the name of the marketplace WritePlugin writes.
const DefaultMarketplace = "rollcall"

// ServerName is the key of the MCP server inside the plugin (and the
// channel's server). Claude Code names its tools mcp__plugin_<plugin>_rollcall__<tool>.
const ServerName = "rollcall"

// HookEvents are the Claude Code hook events the plugin registers, each
// running `rollcall adapter hook <event>`: SessionStart starts the adapter,
// UserPromptSubmit and PreToolUse open a run (a channel turn has no prompt
// but calls tools), Stop and StopFailure close it, SessionEnd sends a last
// heartbeat and stops the adapter.
var HookEvents = []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "StopFailure", "SessionEnd"}

// PluginOptions configures WritePlugin.
type PluginOptions struct {
	// Agent is the agent's handle (name form); the plugin is named
	// "rollcall-<agent>".
	Agent string
	// Server is the Rollcall server's base URL as the Claude Code machine
	// reaches it (http or https, no path beyond a prefix).
	Server string
	// MCPURL is the agent's MCP URL; "" = Server + "/mcp".
	MCPURL string
	// OutDir is the marketplace directory; it is created when missing. An
	// existing marketplace.json there keeps its other plugins.
	OutDir string
	// Marketplace names the marketplace; "" = DefaultMarketplace.
	Marketplace string
	// CredentialEnv names the environment variable holding the agent's
	// credential; "" = DefaultCredentialEnv.
	CredentialEnv string
	// Bin is the rollcall executable the hooks run; "" = "rollcall" (found
	// on PATH).
	Bin string
	// Version is the plugin's version (the rollcall version); "" = "0.0.0".
	Version string
}

// Plugin describes what WritePlugin wrote.
type Plugin struct {
	Name        string `json:"plugin"`      // rollcall-<agent>
	Marketplace string `json:"marketplace"` // the marketplace's name
	Dir         string `json:"dir"`         // the marketplace directory (absolute)
	PluginDir   string `json:"plugin_dir"`  // the plugin's directory (absolute)
	Channel     string `json:"channel"`     // plugin:<plugin>@<marketplace>, for --channels
	ToolPrefix  string `json:"tool_prefix"` // mcp__plugin_<plugin>_rollcall, for permissions.allow
}

var (
	handleRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	envRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// WritePlugin writes, under o.OutDir:
//
//	.claude-plugin/marketplace.json                 the marketplace (this plugin added or replaced)
//	plugins/rollcall-<agent>/.claude-plugin/plugin.json   name, version, channels [{server: rollcall}]
//	plugins/rollcall-<agent>/.mcp.json              HTTP server, Authorization: Bearer ${<CredentialEnv>}
//	plugins/rollcall-<agent>/hooks/hooks.json       the HookEvents, each `<bin> adapter hook <event> …`
//	plugins/rollcall-<agent>/README.md              what the plugin does
//
// The plugin's version is o.Version + "+" + a digest of its content.
// No file holds a secret. Errors: an invalid option (agent not a handle, a
// server URL that is not http(s), an env name that is not one), an existing
// marketplace.json that is not valid JSON, or the filesystem's.
func WritePlugin(o PluginOptions) (Plugin, error) {
	if !handleRE.MatchString(o.Agent) {
		return Plugin{}, fmt.Errorf("agent %q is not a handle (%s)", o.Agent, handleRE)
	}
	if o.Marketplace == "" {
		o.Marketplace = DefaultMarketplace
	}
	if !handleRE.MatchString(o.Marketplace) {
		return Plugin{}, fmt.Errorf("marketplace %q is not a name (%s)", o.Marketplace, handleRE)
	}
	if o.CredentialEnv == "" {
		o.CredentialEnv = DefaultCredentialEnv
	}
	if !envRE.MatchString(o.CredentialEnv) {
		return Plugin{}, fmt.Errorf("credential env %q is not an environment variable name", o.CredentialEnv)
	}
	base, err := checkHTTPURL(o.Server)
	if err != nil {
		return Plugin{}, fmt.Errorf("server: %w", err)
	}
	if o.MCPURL == "" {
		o.MCPURL = strings.TrimRight(base, "/") + "/mcp"
	} else if _, err := checkHTTPURL(o.MCPURL); err != nil {
		return Plugin{}, fmt.Errorf("mcp url: %w", err)
	}
	if o.Bin == "" {
		o.Bin = "rollcall"
	}
	if o.Version == "" {
		o.Version = "0.0.0"
	}
	dir, err := filepath.Abs(o.OutDir)
	if err != nil {
		return Plugin{}, err
	}
	name := "rollcall-" + o.Agent
	p := Plugin{Name: name, Marketplace: o.Marketplace, Dir: dir,
		PluginDir:  filepath.Join(dir, "plugins", name),
		Channel:    "plugin:" + name + "@" + o.Marketplace,
		ToolPrefix: "mcp__plugin_" + name + "_" + ServerName}

	desc := "Rollcall for agent " + o.Agent + ": todo doorbells as a channel, liveness heartbeats and billing evidence"
	var hosts []string
	for _, s := range []string{base, o.MCPURL} {
		if u, err := url.Parse(s); err == nil && !slices.Contains(hosts, u.Host) {
			hosts = append(hosts, u.Host)
		}
	}
	manifest := map[string]any{
		"name":        name,
		"version":     o.Version,
		"description": desc,
		"author":      map[string]any{"name": "Rollcall"},
		"channels":    []any{map[string]any{"server": ServerName, "displayName": "Rollcall (" + o.Agent + ")"}},
		"network":     map[string]any{"hosts": hosts},
	}
	mcp := map[string]any{"mcpServers": map[string]any{ServerName: map[string]any{
		"type":    "http",
		"url":     o.MCPURL,
		"headers": map[string]any{"Authorization": "Bearer ${" + o.CredentialEnv + "}"},
	}}}
	hooks := map[string]any{}
	for _, ev := range HookEvents {
		cmd := shellQuote(o.Bin) + " adapter hook " + ev + " --server " + shellQuote(base) +
			" --agent " + o.Agent + " --credential-env " + o.CredentialEnv
		h := map[string]any{"type": "command", "command": cmd, "timeout": 30}
		hooks[ev] = []any{map[string]any{"hooks": []any{h}}}
	}
	hooksFile := map[string]any{"description": "Rollcall adapter: heartbeats for this Claude Code process", "hooks": hooks}
	// The version carries a digest of the plugin's content, so a plugin
	// written again with other settings is a new version to `claude plugin
	// update` (Claude Code caches installed plugins by version).
	sum := sha256.New()
	for _, v := range []any{manifest, mcp, hooksFile} {
		b, _ := json.Marshal(v)
		sum.Write(b)
	}
	manifest["version"] = o.Version + "+" + hex.EncodeToString(sum.Sum(nil))[:12]
	readme := "# " + name + "\n\nConnects Claude Code to Rollcall as agent `" + o.Agent + "`: Rollcall's todo doorbells arrive as a\n" +
		"channel (`--channels " + p.Channel + "`), and the hooks run `rollcall adapter`, which heartbeats\n" +
		"for the Claude Code process (online/offline, billing evidence, active runs). The MCP server is\n" +
		o.MCPURL + "; its bearer is read from $" + o.CredentialEnv + " (never stored here).\n" +
		"\n    claude plugin marketplace add <this marketplace>\n    claude plugin install " + name + "@" + o.Marketplace + "\n\n" +
		"The organisation approves the channel with `allowedChannelPlugins` in managed settings.\n" +
		"Written by `rollcall claude plugin`; see Rollcall's README, \"Connect Claude Code\".\n"
	files := map[string]any{
		filepath.Join(p.PluginDir, ".claude-plugin", "plugin.json"): manifest,
		filepath.Join(p.PluginDir, ".mcp.json"):                     mcp,
		filepath.Join(p.PluginDir, "hooks", "hooks.json"):           hooksFile,
	}
	if err := os.MkdirAll(p.PluginDir, 0o755); err != nil {
		return Plugin{}, err
	}
	if err := os.WriteFile(filepath.Join(p.PluginDir, "README.md"), []byte(readme), 0o644); err != nil {
		return Plugin{}, err
	}

	mpPath := filepath.Join(dir, ".claude-plugin", "marketplace.json")
	mp := map[string]any{}
	if b, err := os.ReadFile(mpPath); err == nil {
		if err := json.Unmarshal(b, &mp); err != nil {
			return Plugin{}, fmt.Errorf("%s: %w", mpPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return Plugin{}, err
	}
	mp["name"] = o.Marketplace
	if _, ok := mp["description"]; !ok {
		mp["description"] = "Rollcall agents for Claude Code, written by `rollcall claude plugin`"
	}
	if _, ok := mp["owner"]; !ok {
		mp["owner"] = map[string]any{"name": "Rollcall"}
	}
	var plugins []any
	if old, ok := mp["plugins"].([]any); ok {
		for _, e := range old {
			if m, ok := e.(map[string]any); ok && m["name"] == name {
				continue
			}
			plugins = append(plugins, e)
		}
	}
	plugins = append(plugins, map[string]any{"name": name, "source": "./plugins/" + name,
		"description": desc, "version": manifest["version"]})
	slices.SortStableFunc(plugins, func(a, b any) int {
		an, _ := a.(map[string]any)["name"].(string)
		bn, _ := b.(map[string]any)["name"].(string)
		return strings.Compare(an, bn)
	})
	mp["plugins"] = plugins
	files[mpPath] = mp

	for path, v := range files {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return Plugin{}, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return Plugin{}, err
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			return Plugin{}, err
		}
	}
	return p, nil
}

func checkHTTPURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http(s) URL", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// shellQuote quotes s for sh when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
