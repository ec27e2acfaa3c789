// Package config loads Rollcall's configuration from, in rising precedence,
// built-in defaults, a YAML file (--config), environment variables and
// command-line flags, and checks it (Config.Validate) before the server
// starts (design: Configuration sources). Every key is also an environment
// variable: ROLLCALL_ + the key upper-cased with dots as underscores
// (agent.presence_timeout → ROLLCALL_AGENT_PRESENCE_TIMEOUT), and a flag
// named like the key (--agent.presence_timeout). Durations use Go syntax
// ("45s", "10m"). Keys lists every key with its default.
package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
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
	// Hooks holds the webhook intake's settings (design: Hooks).
	Hooks struct {
		// DeliveryRetention is how long a delivery stays in the delivery
		// log (at least MinDeliveryRetention); within it a redelivery is a
		// duplicate (design: Delivery log retention).
		DeliveryRetention time.Duration `koanf:"delivery_retention"`
		// SecretKey seals hook secrets at rest (AES-256-GCM; at least
		// MinSecretKeyLen characters); the same on every instance. Empty =
		// secrets stored in plaintext, with a warning at start (design:
		// Hook secrets sealed at rest).
		SecretKey string `koanf:"secret_key"`
		// SecretKeyPrevious is the key being replaced during a rotation:
		// secrets it sealed still open and are resealed with SecretKey at
		// start. Empty = none.
		SecretKeyPrevious string `koanf:"secret_key_previous"`
	} `koanf:"hooks"`
	// MCP holds the MCP endpoint's session liveness probe (design: Session
	// liveness by ping).
	MCP struct {
		// PingInterval is how often a JSON-RPC ping is sent on each
		// session's open GET stream.
		PingInterval time.Duration `koanf:"ping_interval"`
		// PingTimeout is how long a ping may go unanswered before the
		// session counts as stalled.
		PingTimeout time.Duration `koanf:"ping_timeout"`
		// BrowserOrigins are the web origins (scheme://host[:port]) whose
		// pages may call /mcp with a bearer token: they get CORS answers;
		// any other foreign Origin stays refused (design: Browser clients).
		BrowserOrigins []string `koanf:"browser_origins"`
	} `koanf:"mcp"`
	Console struct {
		// SessionKey seals console session cookies; every instance behind
		// one load balancer needs the same value. Empty = a random key per
		// process (sessions end at restart).
		SessionKey string `koanf:"session_key"`
	} `koanf:"console"`
	OAuth struct {
		// ClientMetadataDocuments lets clients use the https URL of their
		// metadata document as client_id (design: Client registration);
		// false leaves registration as the only way.
		ClientMetadataDocuments bool `koanf:"client_metadata_documents"`
	} `koanf:"oauth"`
	Edge `koanf:",squash"`
}

// Edge is the configuration of the HTTP edge (design: Host and Origin,
// Trusted proxies, Request timeouts, Failed-authentication limit):
// which Host and Origin values are accepted, which peers may speak for a
// client through X-Forwarded-*, the body read deadline and the limit of
// failed authentications.
type Edge struct {
	// AllowedHosts are host names (port ignored, case-insensitive) accepted
	// in the Host header besides loopback names and the host of public_url.
	AllowedHosts []string `koanf:"allowed_hosts"`
	// AllowedOrigins are Origin values (scheme://host[:port]) accepted
	// besides the request's own origin and that of public_url.
	AllowedOrigins []string `koanf:"allowed_origins"`
	// TrustedProxies are CIDRs (or single addresses) of reverse proxies
	// whose X-Forwarded-For/Proto/Host headers are believed.
	TrustedProxies []string `koanf:"trusted_proxies"`
	HTTP           struct {
		// ReadTimeout bounds the time from the start of a request to the
		// last byte of its body; a slower body is cut off and its
		// connection closed. Responses (SSE, the gateway) have no write
		// timeout.
		ReadTimeout time.Duration `koanf:"read_timeout"`
		// MaxConnsPerClient bounds the connections one client address
		// (IPv6: its /64) holds open at once; trusted proxies are not
		// bounded. 0 = no bound.
		MaxConnsPerClient int `koanf:"max_conns_per_client"`
	} `koanf:"http"`
	Auth struct {
		// MaxFailures is how many failed authentications one client IP or
		// one credential prefix may make per minute before it is answered
		// 429 with Retry-After.
		MaxFailures int `koanf:"max_failures"`
	} `koanf:"auth"`
}

// Key describes one configuration key: its default and its help text.
type Key struct {
	Name    string
	Default any
	Help    string
}

// Keys lists every configuration key with its default
// (design: Configuration sources).
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
	{"hooks.delivery_retention", 7 * 24 * time.Hour, "deliveries are kept in the delivery log this long; a redelivery within it is a duplicate"},
	{"hooks.secret_key", "", "secret that seals hook secrets at rest (at least 32 characters); the same on every instance (default: plaintext, with a warning)"},
	{"hooks.secret_key_previous", "", "during a rotation, the key being replaced: secrets it sealed still open and are resealed with hooks.secret_key at start"},
	{"mcp.ping_interval", 10 * time.Second, "a JSON-RPC ping is sent on each MCP session's open stream this often"},
	{"mcp.ping_timeout", 5 * time.Second, "an MCP session whose client leaves a ping unanswered this long is stalled: its doorbells go to another session"},
	{"mcp.browser_origins", []string{}, "web origins (scheme://host[:port]) whose pages may call /mcp with a bearer token, with CORS (comma list)"},
	{"console.session_key", "", "secret that seals console session cookies; the same on every instance (default: random per process)"},
	{"oauth.client_metadata_documents", true, "MCP clients may sign in with a client metadata document URL as client_id (fetched from public addresses); false: registration only"},
	// The HTTP edge (README "Running it for a team").
	{"allowed_hosts", []string{}, "extra Host names accepted besides loopback names and the host of public_url (comma list)"},
	{"allowed_origins", []string{}, "extra Origin values (scheme://host[:port]) accepted besides the server's own (comma list)"},
	{"trusted_proxies", []string{}, "CIDRs of reverse proxies whose X-Forwarded-For/Proto/Host are believed (comma list)"},
	{"http.read_timeout", 15 * time.Second, "a request body not complete this long after the request started is cut off"},
	{"http.max_conns_per_client", 256, "open connections one client address may hold (trusted proxies exempt; 0 = no bound)"},
	{"auth.max_failures", 20, "failed authentications per minute per client IP or credential prefix before 429"},
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
		case int:
			fs.Int(k.Name, d, help)
		case bool:
			fs.Bool(k.Name, d, help)
		case []string:
			fs.StringSlice(k.Name, d, help)
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
			return Config{}, yamlSyntaxError(path, err)
		}
		// `log: debug` is short for `log.level: debug`.
		if lv, ok := fk.Get("log").(string); ok {
			fk.Delete("log")
			if err := fk.Set("log.level", lv); err != nil {
				return Config{}, err
			}
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
		flat := fk.All()
		for key, v := range flat {
			cv, err := convertYAML(defaults[key], v)
			if err != nil {
				return Config{}, fmt.Errorf("config file %s: key %s: %s", path, key, err)
			}
			flat[key] = cv
		}
		// fk.All() is flat ("log.level"): loading it through confmap nests it
		// again, so `log.level: x` and `log: {level: x}` mean the same.
		if err := k.Load(confmap.Provider(flat, "."), nil); err != nil {
			return Config{}, err
		}
	}
	fromEnv := map[string]any{}
	for name, val := range envMap {
		key, ok := byEnv[name]
		if !ok {
			continue
		}
		v, err := convert(defaults[key], val)
		if err != nil {
			return Config{}, fmt.Errorf("%s=%q: %s", name, val, err)
		}
		fromEnv[key] = v
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

const durationHint = "use Go syntax such as \"45s\" or \"10m\""

// convert parses an environment value into the type of the key's default:
// a duration, an integer, or a comma-separated list.
func convert(def any, val string) (any, error) {
	switch def.(type) {
	case time.Duration:
		d, err := time.ParseDuration(val)
		if err != nil {
			return nil, fmt.Errorf("not a duration; %s", durationHint)
		}
		return d, nil
	case int:
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("not an integer")
		}
		return n, nil
	case []string:
		return splitList(val), nil
	}
	return val, nil
}

// convertYAML checks a YAML value against the type of the key's default and
// converts it, so a wrong type is reported with the file and key instead of
// the decoder's text.
func convertYAML(def, v any) (any, error) {
	switch def.(type) {
	case time.Duration:
		switch x := v.(type) {
		case string:
			d, err := time.ParseDuration(x)
			if err != nil {
				return nil, fmt.Errorf("%q is not a duration; %s", x, durationHint)
			}
			return d, nil
		case int, int64, uint64, float64:
			return v, nil // nanoseconds; Validate refuses tiny values with a hint
		}
		return nil, fmt.Errorf("want a duration (%s), got %s", durationHint, describe(v))
	case int:
		switch x := v.(type) {
		case int, int64, uint64:
			return v, nil
		case float64:
			if x == float64(int(x)) {
				return int(x), nil
			}
		case string:
			if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
				return n, nil
			}
		}
		return nil, fmt.Errorf("want an integer, got %s", describe(v))
	case []string:
		switch x := v.(type) {
		case nil:
			return []string{}, nil
		case string:
			return splitList(x), nil
		case []any:
			out := make([]string, 0, len(x))
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("want a list of strings, got an element %s", describe(e))
				}
				out = append(out, s)
			}
			return out, nil
		}
		return nil, fmt.Errorf("want a list of strings, got %s", describe(v))
	case string:
		switch v.(type) {
		case nil:
			return "", nil // `key:` with no value
		case string:
			return v, nil
		case map[string]any, []any:
			return nil, fmt.Errorf("want a string, got %s", describe(v))
		}
		return fmt.Sprint(v), nil // a number or bool written without quotes
	}
	return v, nil
}

func describe(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case string:
		return fmt.Sprintf("the string %q", x)
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%v", v)
}

func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
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

// MinDeliveryRetention is the smallest accepted hooks.delivery_retention:
// senders retry for hours, and a shorter log would take their retries for
// new deliveries (design: Delivery log retention).
const MinDeliveryRetention = time.Hour

// MinSecretKeyLen is the shortest accepted hooks.secret_key and
// hooks.secret_key_previous (characters; intake.MinSecretKeyLen, which
// seals with them): e.g. the output of `openssl rand -base64 32`.
const MinSecretKeyLen = 32

// Validate checks combinations: positive durations, a store URL of a known
// scheme, and agent.presence_timeout > sync.heartbeat_interval
// (design: Heartbeat interval: otherwise an adapter following the interval
// flaps to offline).
func (c Config) Validate() error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"agent.presence_timeout": c.Agent.PresenceTimeout, "agent.heartbeat_persist_interval": c.Agent.HeartbeatPersistInterval,
		"sync.heartbeat_interval": c.Sync.HeartbeatInterval, "billing.mismatch_alert_after": c.Billing.MismatchAlertAfter,
		"shutdown.total_timeout": c.Shutdown.TotalTimeout, "presence.evaluate_interval": c.Presence.EvaluateInterval,
		"doorbell.sweep_interval": c.Doorbell.SweepInterval, "doorbell.failover_after": c.Doorbell.FailoverAfter,
		"mcp.ping_interval": c.MCP.PingInterval, "mcp.ping_timeout": c.MCP.PingTimeout,
	} {
		if d < MinDuration {
			errs = append(errs, fmt.Errorf("%s must be a duration of at least %s in Go syntax (e.g. \"30s\", \"10m\"), got %s — a bare number is read as nanoseconds", name, MinDuration, d))
		}
	}
	if c.Hooks.DeliveryRetention < MinDeliveryRetention {
		errs = append(errs, fmt.Errorf("hooks.delivery_retention must be a duration of at least %s in Go syntax (e.g. \"168h\" for 7 days), got %s", MinDeliveryRetention, c.Hooks.DeliveryRetention))
	}
	for name, k := range map[string]string{"hooks.secret_key": c.Hooks.SecretKey, "hooks.secret_key_previous": c.Hooks.SecretKeyPrevious} {
		if k != "" && len(k) < MinSecretKeyLen {
			errs = append(errs, fmt.Errorf("%s must be at least %d characters (e.g. the output of `openssl rand -base64 32`), got %d", name, MinSecretKeyLen, len(k)))
		}
	}
	if c.Hooks.SecretKeyPrevious != "" && c.Hooks.SecretKey == "" {
		errs = append(errs, errors.New("hooks.secret_key_previous is set without hooks.secret_key: set the new key as hooks.secret_key"))
	}
	if c.Hooks.SecretKeyPrevious != "" && c.Hooks.SecretKeyPrevious == c.Hooks.SecretKey {
		errs = append(errs, errors.New("hooks.secret_key_previous equals hooks.secret_key: set it to the key being replaced, or leave it empty"))
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
	errs = append(errs, c.Edge.validate()...)
	errs = append(errs, originErrs("mcp.browser_origins", c.MCP.BrowserOrigins)...)
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errors.Join(errs...)
}

func (e Edge) validate() []error {
	var errs []error
	if e.HTTP.ReadTimeout < MinDuration {
		errs = append(errs, fmt.Errorf("http.read_timeout must be a duration of at least %s in Go syntax (e.g. \"15s\"), got %s", MinDuration, e.HTTP.ReadTimeout))
	}
	if e.HTTP.MaxConnsPerClient < 0 {
		errs = append(errs, fmt.Errorf("http.max_conns_per_client must be 0 (no bound) or more, got %d", e.HTTP.MaxConnsPerClient))
	}
	if e.Auth.MaxFailures < 1 {
		errs = append(errs, fmt.Errorf("auth.max_failures must be at least 1, got %d", e.Auth.MaxFailures))
	}
	for _, p := range e.TrustedProxies {
		if _, err := ParsePrefix(p); err != nil {
			errs = append(errs, fmt.Errorf("trusted_proxies: %q is neither a CIDR (10.0.0.0/8) nor an IP address", p))
		}
	}
	errs = append(errs, originErrs("allowed_origins", e.AllowedOrigins)...)
	for _, h := range e.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			errs = append(errs, fmt.Errorf("allowed_hosts: %q must be a host name such as rollcall.example.com", h))
		}
	}
	return errs
}

// originErrs checks that every value of the list key is a web origin,
// scheme://host[:port].
func originErrs(key string, origins []string) []error {
	var errs []error
	for _, o := range origins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
			u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			errs = append(errs, fmt.Errorf("%s: %q must be scheme://host[:port], e.g. https://rollcall.example.com", key, o))
		}
	}
	return errs
}

// ParsePrefix parses a CIDR or a single IP address (a /32 or /128).
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()), nil
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

// yamlSyntaxRE matches a YAML syntax error of go.yaml.in/yaml/v3.
var yamlSyntaxRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.+)$`)

// yamlParserProblems are the problems the YAML parser (as opposed to its
// scanner) reports. For them go.yaml.in/yaml/v3 prints a 0-based line, and
// none at all on the first line; the scanner's lines are 1-based.
var yamlParserProblems = map[string]bool{
	"did not find expected node content": true, "did not find expected key": true,
	"did not find expected '-' indicator": true, "did not find expected ',' or ']'": true,
	"did not find expected ',' or '}'": true, "did not find expected <document start>": true,
}

// yamlSyntaxError rewrites a YAML syntax error of the file at path so that
// it names the right (1-based) line and the key that line belongs to, and
// suggests quoting when the line holds "::" (an IPv6 address such as
// ::1/128 in a flow list must be quoted). Other errors are wrapped as they
// are.
func yamlSyntaxError(path string, err error) error {
	m := yamlSyntaxRE.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	line, _ := strconv.Atoi(m[1])
	if yamlParserProblems[m[2]] {
		line++
	}
	data, rerr := os.ReadFile(path)
	if line == 0 || rerr != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	lines := strings.Split(string(data), "\n")
	where := fmt.Sprintf("line %d", line)
	if key := yamlKeyAt(lines, line); key != "" {
		where += " (key " + key + ")"
	}
	hint := ""
	if line <= len(lines) && strings.Contains(lines[line-1], "::") {
		hint = `; quote values with "::" such as IPv6 prefixes: ["127.0.0.1/32", "::1/128"]`
	}
	return fmt.Errorf("config file %s: %s: %s%s", path, where, m[2], hint)
}

var yamlKeyRE = regexp.MustCompile(`^(\s*)(?:-\s+)?([A-Za-z0-9_.-]+)\s*:(?:\s|$)`)

// yamlKeyAt returns the dotted key whose value holds line (1-based): the
// last key at or above it, nested by indentation ("" when there is none).
func yamlKeyAt(lines []string, line int) string {
	type level struct {
		indent int
		key    string
	}
	var stack []level
	for _, l := range lines[:min(line, len(lines))] {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		m := yamlKeyRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		ind := len(m[1])
		for len(stack) > 0 && stack[len(stack)-1].indent >= ind {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, level{ind, m[2]})
	}
	keys := make([]string, len(stack))
	for i, lv := range stack {
		keys[i] = lv.key
	}
	return strings.Join(keys, ".")
}
