package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

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
