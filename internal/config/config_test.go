package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func load(t *testing.T, yaml string, environ []string, args ...string) (Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	RegisterFlags(fs)
	if yaml != "" {
		p := filepath.Join(t.TempDir(), "rollcall.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", p)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return Load(fs, environ)
}

func TestDefaults(t *testing.T) {
	c, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:7070" || c.Store != "sqlite:rollcall.db" || c.Agent.PresenceTimeout != 45*time.Second ||
		c.Sync.HeartbeatInterval != 15*time.Second || c.Presence.EvaluateInterval != 30*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
}

// Flags beat the environment, which beats the file; dotted and nested
// YAML keys mean the same.
func TestPrecedenceAndKeyForms(t *testing.T) {
	yaml := "log.level: warn\ndoorbell:\n  sweep_interval: 45s\nlisten: 127.0.0.1:1\n"
	c, err := load(t, yaml, []string{"ROLLCALL_LISTEN=127.0.0.1:2", "ROLLCALL_AGENT_PRESENCE_TIMEOUT=50s"}, "--listen", "127.0.0.1:3")
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.Level != "warn" {
		t.Fatalf("log.level from a dotted YAML key = %q, want warn", c.Log.Level)
	}
	if c.Doorbell.SweepInterval != 45*time.Second || c.Agent.PresenceTimeout != 50*time.Second || c.Listen != "127.0.0.1:3" {
		t.Fatalf("precedence: %+v", c)
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"unknown key", "log:\n  colour: red\n", nil, `unknown key "log.colour"`},
		{"bare number", "doorbell:\n  sweep_interval: 30\n", nil, "doorbell.sweep_interval must be a duration of at least 10ms"},
		{"timeout not above interval", "", []string{"ROLLCALL_AGENT_PRESENCE_TIMEOUT=15s"}, "agent.presence_timeout (15s) must be greater than sync.heartbeat_interval (15s)"},
		{"bad store", "store: mysql://x\n", nil, `store "mysql://x"`},
		{"bad level", "log:\n  level: loud\n", nil, `log.level "loud"`},
		{"bootstrap token without prefix", "", []string{"ROLLCALL_BOOTSTRAP_TOKEN=MySecretBootstrapValue"}, "bootstrap_token must start with rcp_"},
		{"short bootstrap token", "", []string{"ROLLCALL_BOOTSTRAP_TOKEN=rcp_x"}, "bootstrap_token must start with rcp_"},
		{"public_url not a URL", "public_url: not a url\n", nil, `public_url "not a url" must be an absolute http(s) URL`},
		{"sqlite options", "store: sqlite:/tmp/r.db?mode=ro\n", nil, "options after ? are not supported"},
		{"bad env duration", "", []string{"ROLLCALL_SYNC_HEARTBEAT_INTERVAL=soon"}, `ROLLCALL_SYNC_HEARTBEAT_INTERVAL="soon": not a duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestPresenceTimeoutAboveHeartbeatInterval: the server refuses to start
// when agent.presence_timeout ≤ sync.heartbeat_interval, with a message
// naming both keys (design: Heartbeat interval), from every source.
func TestPresenceTimeoutAboveHeartbeatInterval(t *testing.T) {
	cases := []struct {
		name    string
		env     []string
		file    string
		flags   []string
		refused bool
	}{
		{name: "defaults (45s > 15s)"},
		{name: "equal by env", env: []string{"ROLLCALL_AGENT_PRESENCE_TIMEOUT=15s"}, refused: true},
		{name: "shorter by env", env: []string{"ROLLCALL_SYNC_HEARTBEAT_INTERVAL=1m"}, refused: true},
		{name: "shorter by file", file: "agent:\n  presence_timeout: 10s\nsync:\n  heartbeat_interval: 20s\n", refused: true},
		{name: "shorter by flag", flags: []string{"--agent.presence_timeout=5s"}, refused: true},
		{name: "just above", env: []string{"ROLLCALL_AGENT_PRESENCE_TIMEOUT=15001ms"}},
		{name: "flag fixes env", env: []string{"ROLLCALL_AGENT_PRESENCE_TIMEOUT=5s"}, flags: []string{"--agent.presence_timeout=16s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			RegisterFlags(fs)
			env := tc.env
			if tc.file != "" {
				p := filepath.Join(t.TempDir(), "rollcall.yaml")
				if err := os.WriteFile(p, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
				env = append(env, "ROLLCALL_CONFIG="+p)
			}
			if err := fs.Parse(tc.flags); err != nil {
				t.Fatal(err)
			}
			c, err := Load(fs, env)
			if !tc.refused {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if c.Agent.PresenceTimeout <= c.Sync.HeartbeatInterval {
					t.Fatalf("accepted %s ≤ %s", c.Agent.PresenceTimeout, c.Sync.HeartbeatInterval)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load accepted presence_timeout %s ≤ heartbeat_interval %s", c.Agent.PresenceTimeout, c.Sync.HeartbeatInterval)
			}
			for _, key := range []string{"agent.presence_timeout", "sync.heartbeat_interval"} {
				if !strings.Contains(err.Error(), key) {
					t.Errorf("error %q does not name %s", err, key)
				}
			}
		})
	}
}

// TestLivenessKeys: the liveness, presence and doorbell keys, their defaults and their environment
// variables.
func TestLivenessKeys(t *testing.T) {
	c, err := Load(nil, []string{"ROLLCALL_AGENT_HEARTBEAT_PERSIST_INTERVAL=2m", "ROLLCALL_BILLING_MISMATCH_ALERT_AFTER=30s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.PresenceTimeout != 45*time.Second || c.Sync.HeartbeatInterval != 15*time.Second ||
		c.Agent.HeartbeatPersistInterval != 2*time.Minute || c.Billing.MismatchAlertAfter != 30*time.Second ||
		c.Shutdown.TotalTimeout != 30*time.Second {
		t.Errorf("liveness configuration = %+v %+v %+v %+v", c.Agent, c.Sync, c.Billing, c.Shutdown)
	}
	if EnvName("agent.presence_timeout") != "ROLLCALL_AGENT_PRESENCE_TIMEOUT" {
		t.Errorf("EnvName = %s", EnvName("agent.presence_timeout"))
	}
}

// TestDurationKeys: hooks.delivery_retention (default 7 days, at least
// MinDeliveryRetention) and mcp.ping_interval and mcp.ping_timeout (10 s
// and 5 s, at least MinDuration): each has its default, is read from its
// environment variable, takes its minimum and refuses less with an error
// that names the key.
func TestDurationKeys(t *testing.T) {
	for _, k := range []struct {
		key          string
		get          func(Config) time.Duration
		def          time.Duration
		env          string
		fromEnv      time.Duration
		least, below string
		refusal      string
	}{
		{"hooks.delivery_retention", func(c Config) time.Duration { return c.Hooks.DeliveryRetention }, 7 * 24 * time.Hour,
			"48h", 48 * time.Hour, "1h", "59m", "hooks.delivery_retention must be a duration of at least 1h0m0s"},
		{"mcp.ping_interval", func(c Config) time.Duration { return c.MCP.PingInterval }, 10 * time.Second,
			"3s", 3 * time.Second, "10ms", "5ms", "mcp.ping_interval"},
		{"mcp.ping_timeout", func(c Config) time.Duration { return c.MCP.PingTimeout }, 5 * time.Second,
			"2s", 2 * time.Second, "10ms", "5ms", "mcp.ping_timeout"},
	} {
		t.Run(k.key, func(t *testing.T) {
			env := func(v string) []string { return []string{EnvName(k.key) + "=" + v} }
			c, err := Load(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.get(c); got != k.def {
				t.Errorf("default = %s, want %s", got, k.def)
			}
			c, err = Load(nil, env(k.env))
			if err != nil || k.get(c) != k.fromEnv {
				t.Errorf("from the environment: %s, %v; want %s", k.get(c), err, k.fromEnv)
			}
			if _, err := Load(nil, env(k.least)); err != nil {
				t.Errorf("%s (the minimum): %v", k.least, err)
			}
			_, err = Load(nil, env(k.below))
			if err == nil || !strings.Contains(err.Error(), k.refusal) {
				t.Errorf("%s: err = %v, want one containing %q", k.below, err, k.refusal)
			}
		})
	}
}

// TestHookSecretKeys: hooks.secret_key and hooks.secret_key_previous are
// empty by default, read from the environment, and refused shorter than
// MinSecretKeyLen, previous without a key, or previous equal to the key.
func TestHookSecretKeys(t *testing.T) {
	c, err := Load(nil, nil)
	if err != nil || c.Hooks.SecretKey != "" || c.Hooks.SecretKeyPrevious != "" {
		t.Fatalf("defaults: %q %q, %v", c.Hooks.SecretKey, c.Hooks.SecretKeyPrevious, err)
	}
	key, old := strings.Repeat("k", 32), strings.Repeat("o", 40)
	c, err = Load(nil, []string{"ROLLCALL_HOOKS_SECRET_KEY=" + key, "ROLLCALL_HOOKS_SECRET_KEY_PREVIOUS=" + old})
	if err != nil || c.Hooks.SecretKey != key || c.Hooks.SecretKeyPrevious != old {
		t.Fatalf("from the environment: %q %q, %v", c.Hooks.SecretKey, c.Hooks.SecretKeyPrevious, err)
	}
	for _, bad := range []struct {
		env  []string
		want string
	}{
		{[]string{"ROLLCALL_HOOKS_SECRET_KEY=short"}, "hooks.secret_key must be at least 32 characters"},
		{[]string{"ROLLCALL_HOOKS_SECRET_KEY=" + key, "ROLLCALL_HOOKS_SECRET_KEY_PREVIOUS=short"}, "hooks.secret_key_previous must be at least 32 characters"},
		{[]string{"ROLLCALL_HOOKS_SECRET_KEY_PREVIOUS=" + old}, "hooks.secret_key_previous is set without hooks.secret_key"},
		{[]string{"ROLLCALL_HOOKS_SECRET_KEY=" + key, "ROLLCALL_HOOKS_SECRET_KEY_PREVIOUS=" + key}, "hooks.secret_key_previous equals hooks.secret_key"},
	} {
		if _, err := Load(nil, bad.env); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: err = %v, want %q", bad.env, err, bad.want)
		}
	}
}
