package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The edge keys arrive from YAML (list or comma string), the environment
// (comma lists) and flags, in the usual precedence.
func TestEdgeKeys(t *testing.T) {
	c, err := load(t, "allowed_hosts: [rollcall.example.com, Other.example]\nallowed_origins: https://app.example\ntrusted_proxies:\n  - 10.0.0.0/8\n  - 127.0.0.1\nhttp:\n  read_timeout: 5s\nauth.max_failures: 7\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.AllowedHosts, []string{"rollcall.example.com", "Other.example"}) || !slices.Equal(c.AllowedOrigins, []string{"https://app.example"}) ||
		!slices.Equal(c.TrustedProxies, []string{"10.0.0.0/8", "127.0.0.1"}) || c.HTTP.ReadTimeout != 5*time.Second || c.Auth.MaxFailures != 7 {
		t.Fatalf("from YAML: %+v", c.Edge)
	}
	c, err = load(t, "allowed_hosts: [a.example]\n", []string{"ROLLCALL_ALLOWED_HOSTS=b.example, c.example", "ROLLCALL_ALLOWED_ORIGINS=https://x.example",
		"ROLLCALL_TRUSTED_PROXIES=::1", "ROLLCALL_HTTP_READ_TIMEOUT=2s", "ROLLCALL_AUTH_MAX_FAILURES=3"}, "--allowed_origins", "https://y.example,https://z.example")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.AllowedHosts, []string{"b.example", "c.example"}) || !slices.Equal(c.AllowedOrigins, []string{"https://y.example", "https://z.example"}) ||
		!slices.Equal(c.TrustedProxies, []string{"::1"}) || c.HTTP.ReadTimeout != 2*time.Second || c.Auth.MaxFailures != 3 {
		t.Fatalf("env and flags: %+v", c.Edge)
	}
	c, err = load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.AllowedHosts) != 0 || c.HTTP.ReadTimeout != 15*time.Second || c.Auth.MaxFailures != 20 {
		t.Fatalf("defaults: %+v", c.Edge)
	}
}

// Wrong types and bad values name the file (or variable) and the key.
func TestEdgeAndTypeErrors(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		env  []string
		want []string
	}{
		{yaml: "agent:\n  presence_timeout: soon\n", want: []string{"rollcall.yaml", "key agent.presence_timeout", `"soon" is not a duration`, "45s"}},
		{yaml: "agent:\n  presence_timeout: [1]\n", want: []string{"key agent.presence_timeout", "want a duration", "a list"}},
		{yaml: "auth:\n  max_failures: many\n", want: []string{"key auth.max_failures", "want an integer"}},
		{yaml: "listen:\n  - a\n", want: []string{"key listen", "want a string, got a list"}},
		{yaml: "allowed_hosts: {a: 1}\n", want: []string{"unknown key \"allowed_hosts.a\""}},
		{yaml: "trusted_proxies: [nonsense]\n", want: []string{"trusted_proxies", "nonsense", "CIDR"}},
		{yaml: "allowed_origins: [example.com]\n", want: []string{"allowed_origins", "scheme://host"}},
		{yaml: "mcp:\n  browser_origins: [https://app.example/path]\n", want: []string{"mcp.browser_origins", "https://app.example/path", "scheme://host"}},
		{env: []string{"ROLLCALL_AUTH_MAX_FAILURES=x"}, want: []string{"ROLLCALL_AUTH_MAX_FAILURES", "not an integer"}},
		{yaml: "auth.max_failures: 0\n", want: []string{"auth.max_failures must be at least 1"}},
	} {
		_, err := load(t, tc.yaml, tc.env)
		if err == nil {
			t.Errorf("%q %v: no error", tc.yaml, tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q %v: error %q lacks %q", tc.yaml, tc.env, err, w)
			}
		}
	}
}

// An empty YAML value is an empty string or list, not "<nil>".
func TestEmptyYAMLValues(t *testing.T) {
	c, err := load(t, "public_url:\nallowed_hosts:\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.PublicURL != "" || len(c.AllowedHosts) != 0 {
		t.Fatalf("empty values: %q %q", c.PublicURL, c.AllowedHosts)
	}
}

// `log: debug` is short for `log.level: debug`.
func TestLogShorthand(t *testing.T) {
	c, err := load(t, "log: debug\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Log.Level != "debug" || c.Log.Format != "text" {
		t.Fatalf("log: %+v", c.Log)
	}
	if _, err := load(t, "log: loud\n", nil); err == nil || !strings.Contains(err.Error(), `log.level "loud"`) {
		t.Fatalf("log: loud → %v", err)
	}
}

// http.max_conns_per_client defaults to 256, comes from YAML or the
// environment, 0 turns the bound off and a negative value is refused.
func TestMaxConnsPerClient(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		env  []string
		want int
	}{
		{want: 256},
		{yaml: "http:\n  max_conns_per_client: 64\n", want: 64},
		{env: []string{"ROLLCALL_HTTP_MAX_CONNS_PER_CLIENT=0"}, want: 0},
	} {
		c, err := load(t, tc.yaml, tc.env)
		if err != nil || c.HTTP.MaxConnsPerClient != tc.want {
			t.Errorf("%q %v: %d %v, want %d", tc.yaml, tc.env, c.HTTP.MaxConnsPerClient, err, tc.want)
		}
	}
	if _, err := load(t, "http.max_conns_per_client: -1\n", nil); err == nil || !strings.Contains(err.Error(), "http.max_conns_per_client must be 0 (no bound) or more, got -1") {
		t.Fatalf("negative: %v", err)
	}
}

// mcp.browser_origins loads from the file, the environment (a comma list)
// and flags, default empty (design: Browser clients).
func TestBrowserOrigins(t *testing.T) {
	c, err := load(t, "", nil)
	if err != nil || len(c.MCP.BrowserOrigins) != 0 {
		t.Fatalf("default %v, %v; want empty", c.MCP.BrowserOrigins, err)
	}
	c, err = load(t, "mcp:\n  browser_origins: [https://inspector.example, 'http://localhost:6274']\n", nil)
	if err != nil || !slices.Equal(c.MCP.BrowserOrigins, []string{"https://inspector.example", "http://localhost:6274"}) {
		t.Fatalf("file: %v, %v", c.MCP.BrowserOrigins, err)
	}
	c, err = load(t, "", []string{"ROLLCALL_MCP_BROWSER_ORIGINS=https://a.example,https://b.example"})
	if err != nil || !slices.Equal(c.MCP.BrowserOrigins, []string{"https://a.example", "https://b.example"}) {
		t.Fatalf("env: %v, %v", c.MCP.BrowserOrigins, err)
	}
	c, err = load(t, "", nil, "--mcp.browser_origins", "https://c.example")
	if err != nil || !slices.Equal(c.MCP.BrowserOrigins, []string{"https://c.example"}) {
		t.Fatalf("flag: %v, %v", c.MCP.BrowserOrigins, err)
	}
}
