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
