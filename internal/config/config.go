// Package config loads Rollcall's configuration from, in rising precedence,
// built-in defaults, a YAML file (--config), environment variables and
// command-line flags (DESIGN.md §2 CLI and §5.3). Every key is also an
// environment variable: ROLLCALL_ + the key upper-cased with dots as
// underscores (agent.presence_timeout → ROLLCALL_AGENT_PRESENCE_TIMEOUT),
// and a flag named like the key (--agent.presence_timeout). Durations use Go
// syntax ("45s", "10m").
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// Config is the server configuration. Durations are time.Duration values.
type Config struct {
	// Listen is the TCP address to serve on (host:port; port 0 = any free).
	Listen string `koanf:"listen"`
	// Store is the store URL: "sqlite:<path>" (default "sqlite:rollcall.db")
	// or "postgres://…"/"postgresql://…".
	Store string `koanf:"store"`
	// PublicURL is the base URL clients use to reach the server; default
	// http://<listen address actually bound>.
	PublicURL string `koanf:"public_url"`
	// BootstrapToken, when set at the first start against an empty store,
	// becomes the admin token and is never printed.
	BootstrapToken string `koanf:"bootstrap_token"`
	Log            struct {
		Level  string `koanf:"level"`  // debug, info, warn, error
		Format string `koanf:"format"` // text or json
	} `koanf:"log"`
	Agent struct {
		PresenceTimeout          time.Duration `koanf:"presence_timeout"`
		HeartbeatPersistInterval time.Duration `koanf:"heartbeat_persist_interval"`
	} `koanf:"agent"`
	Sync struct {
		HeartbeatInterval time.Duration `koanf:"heartbeat_interval"`
	} `koanf:"sync"`
	Billing struct {
		MismatchAlertAfter time.Duration `koanf:"mismatch_alert_after"`
	} `koanf:"billing"`
	Shutdown struct {
		TotalTimeout time.Duration `koanf:"total_timeout"`
	} `koanf:"shutdown"`
	Presence struct {
		EvaluateInterval time.Duration `koanf:"evaluate_interval"`
	} `koanf:"presence"`
	Doorbell struct {
		SweepInterval time.Duration `koanf:"sweep_interval"`
		FailoverAfter time.Duration `koanf:"failover_after"`
	} `koanf:"doorbell"`
	Console struct {
		// SessionKey seals console session cookies; every instance behind
		// one load balancer needs the same value. Empty = a random key per
		// process (sessions end at restart).
		SessionKey string `koanf:"session_key"`
	} `koanf:"console"`
}

// Key describes one configuration key: its default and its help text.
type Key struct {
	Name    string
	Default any
	Help    string
}

// Keys lists every configuration key with its default (DESIGN.md §5.3).
var Keys = []Key{
	{"listen", "127.0.0.1:7070", "address to listen on (host:port)"},
	{"store", "sqlite:rollcall.db", "store URL: sqlite:<path> or postgres://…"},
	{"public_url", "", "base URL clients reach this server at (default http://<listen>)"},
	{"bootstrap_token", "", "admin token to create on the first start (never printed)"},
	{"log.level", "info", "log level: debug, info, warn, error"},
	{"log.format", "text", "log format: text or json"},
	{"agent.presence_timeout", 45 * time.Second, "an agent is offline at its last heartbeat + this"},
	{"agent.heartbeat_persist_interval", 60 * time.Second, "heartbeat times are written at most this often per agent"},
	{"sync.heartbeat_interval", 15 * time.Second, "heartbeat interval announced to clients"},
	{"billing.mismatch_alert_after", 10 * time.Minute, "a billing-mode mismatch warns after this long"},
	{"shutdown.total_timeout", 30 * time.Second, "graceful shutdown budget"},
	{"presence.evaluate_interval", 30 * time.Second, "presence evaluator period"},
	{"doorbell.sweep_interval", 30 * time.Second, "doorbell sweep period"},
	{"doorbell.failover_after", 30 * time.Second, "ring a still-unclaimed todo on another session of the agent after this long"},
	{"console.session_key", "", "secret that seals console session cookies; the same on every instance (default: random per process)"},
}

// EnvName returns the environment variable of a key.
func EnvName(key string) string {
	return "ROLLCALL_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// RegisterFlags adds one flag per key (named like the key) and --config.
func RegisterFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML configuration file (env ROLLCALL_CONFIG)")
	for _, k := range Keys {
		help := k.Help + " (env " + EnvName(k.Name) + ")"
		switch d := k.Default.(type) {
		case string:
			fs.String(k.Name, d, help)
		case time.Duration:
			fs.Duration(k.Name, d, help)
		}
	}
}

// Load builds the configuration from defaults, the YAML file named by
// --config or ROLLCALL_CONFIG, the environment, and the flags that were set.
// Errors name the file and key: unreadable file, unknown key, a value of the
// wrong type, or an invalid combination (see Validate).
func Load(fs *pflag.FlagSet, environ []string) (Config, error) {
	k := koanf.New(".")
	defaults := map[string]any{}
	known := map[string]bool{}
	byEnv := map[string]string{}
	for _, key := range Keys {
		defaults[key.Name] = key.Default
		known[key.Name] = true
		byEnv[EnvName(key.Name)] = key.Name
	}
	if err := k.Load(confmap.Provider(defaults, "."), nil); err != nil {
		return Config{}, err
	}
	envMap := map[string]string{}
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		envMap[name] = val
	}
	path := envMap["ROLLCALL_CONFIG"]
	if fs != nil {
		if f := fs.Lookup("config"); f != nil && f.Changed {
			path = f.Value.String()
		}
	}
	if path != "" {
		fk := koanf.New(".")
		if err := fk.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
		var unknown []string
		for _, key := range fk.Keys() {
			if !known[key] {
				unknown = append(unknown, key)
			}
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return Config{}, fmt.Errorf("config file %s: unknown key %q (known keys: %s)", path, unknown[0], knownList())
		}
		// fk.All() is flat ("log.level"): loading it through confmap nests it
		// again, so `log.level: x` and `log: {level: x}` mean the same.
		if err := k.Load(confmap.Provider(fk.All(), "."), nil); err != nil {
			return Config{}, err
		}
	}
	fromEnv := map[string]any{}
	for name, val := range envMap {
		key, ok := byEnv[name]
		if !ok {
			continue
		}
		if _, isDur := defaults[key].(time.Duration); isDur {
			if _, err := time.ParseDuration(val); err != nil {
				return Config{}, fmt.Errorf("%s=%q: not a duration; use Go syntax such as \"45s\" or \"10m\"", name, val)
			}
		}
		fromEnv[key] = val
	}
	if err := k.Load(confmap.Provider(fromEnv, "."), nil); err != nil {
		return Config{}, err
	}
	if fs != nil {
		if err := k.Load(posflag.ProviderWithFlag(fs, ".", k, func(f *pflag.Flag) (string, any) {
			if !known[f.Name] || !f.Changed {
				return "", nil
			}
			return f.Name, posflag.FlagVal(fs, f)
		}), nil); err != nil {
			return Config{}, err
		}
	}
	var c Config
	if err := k.UnmarshalWithConf("", &c, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return Config{}, fmt.Errorf("configuration: %w", err)
	}
	return c, c.Validate()
}

func knownList() string {
	names := make([]string, len(Keys))
	for i, k := range Keys {
		names[i] = k.Name
	}
	return strings.Join(names, ", ")
}

// MinDuration is the smallest accepted value of any duration key: a bare
// number in YAML is read as nanoseconds, and loops that fast would spin.
const MinDuration = 10 * time.Millisecond

// Validate checks combinations: positive durations, a store URL of a known
// scheme, and agent.presence_timeout > sync.heartbeat_interval (DESIGN.md
// §5.2: otherwise an adapter following the interval flaps to offline).
func (c Config) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"agent.presence_timeout": c.Agent.PresenceTimeout, "agent.heartbeat_persist_interval": c.Agent.HeartbeatPersistInterval,
		"sync.heartbeat_interval": c.Sync.HeartbeatInterval, "billing.mismatch_alert_after": c.Billing.MismatchAlertAfter,
		"shutdown.total_timeout": c.Shutdown.TotalTimeout, "presence.evaluate_interval": c.Presence.EvaluateInterval,
		"doorbell.sweep_interval": c.Doorbell.SweepInterval, "doorbell.failover_after": c.Doorbell.FailoverAfter,
	} {
		if d < MinDuration {
			errs = append(errs, fmt.Errorf("%s must be a duration of at least %s in Go syntax (e.g. \"30s\", \"10m\"), got %s — a bare number is read as nanoseconds", name, MinDuration, d))
		}
	}
	if c.Agent.PresenceTimeout <= c.Sync.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("agent.presence_timeout (%s) must be greater than sync.heartbeat_interval (%s)", c.Agent.PresenceTimeout, c.Sync.HeartbeatInterval))
	}
	if c.BootstrapToken != "" && (!strings.HasPrefix(c.BootstrapToken, "rcp_") || len(c.BootstrapToken) < len("rcp_")+24) {
		errs = append(errs, fmt.Errorf("bootstrap_token must start with rcp_ followed by at least 24 characters (e.g. rcp_$(openssl rand -hex 24)); other values could never sign in"))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("public_url %q must be an absolute http(s) URL such as https://rollcall.example.com", c.PublicURL))
		}
	}
	if _, _, err := ParseStore(c.Store); err != nil {
		errs = append(errs, err)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level %q must be debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format %q must be text or json", c.Log.Format))
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

// ParseStore splits a store URL into its dialect ("sqlite" or "postgres")
// and the path (sqlite) or connection URL (postgres).
func ParseStore(u string) (dialect, target string, err error) {
	switch {
	case strings.HasPrefix(u, "postgres://"), strings.HasPrefix(u, "postgresql://"):
		return "postgres", u, nil
	case strings.HasPrefix(u, "sqlite://"):
		return "sqlite", strings.TrimPrefix(u, "sqlite://"), nil
	case strings.HasPrefix(u, "sqlite:"):
		p := strings.TrimPrefix(u, "sqlite:")
		if p == "" {
			return "", "", fmt.Errorf("store %q: sqlite needs a file path, e.g. sqlite:rollcall.db", u)
		}
		if strings.ContainsAny(p, "?#") {
			return "", "", fmt.Errorf("store %q: a sqlite store is a plain file path; options after ? are not supported", u)
		}
		return "sqlite", p, nil
	}
	return "", "", fmt.Errorf("store %q: use sqlite:<path> or postgres://user@host:port/db", u)
}

// Environ returns os.Environ (a seam for tests).
func Environ() []string { return os.Environ() }
