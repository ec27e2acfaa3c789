package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEExamplesLoad: every ```yaml block of the README, and the
// Rollcall settings quoted in deploy/nginx/rollcall.conf, load with the
// real loader (a newcomer copies them as they are).
func TestREADMEExamplesLoad(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) < 2 {
		t.Fatalf("found %d yaml blocks in README.md, want the single-instance and the team examples", len(blocks))
	}
	nginx, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nginx", "rollcall.conf"))
	if err != nil {
		t.Fatal(err)
	}
	_, side, ok := strings.Cut(string(nginx), "# Rollcall side (every instance, same values):\n")
	if !ok {
		t.Fatal("deploy/nginx/rollcall.conf lost its Rollcall side comment")
	}
	var conf []string
	for _, l := range strings.Split(side, "\n") {
		if !strings.HasPrefix(l, "#   ") {
			break
		}
		conf = append(conf, strings.TrimPrefix(l, "#   "))
	}
	examples := map[string]string{"deploy/nginx/rollcall.conf": strings.Join(conf, "\n") + "\n"}
	for i, b := range blocks {
		examples["README.md yaml block "+string(rune('1'+i))] = b[1]
	}
	for name, y := range examples {
		c, err := load(t, y, nil)
		if err != nil {
			t.Errorf("%s does not load: %v\n%s", name, err, y)
			continue
		}
		if strings.Contains(y, "trusted_proxies") && len(c.TrustedProxies) != 2 {
			t.Errorf("%s: trusted_proxies %v, want 2 prefixes", name, c.TrustedProxies)
		}
	}
}

// TestYAMLSyntaxErrorNamesLineAndKey: a syntax error names the file, the
// 1-based line and its key, wherever it is, and suggests quoting "::".
func TestYAMLSyntaxErrorNamesLineAndKey(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want []string
	}{
		{"listen: 127.0.0.1:7070\nstore: sqlite:r.db\npublic_url: https://x.example\ntrusted_proxies: [127.0.0.1/32, ::1/128]\nconsole:\n  session_key: s\n",
			[]string{"rollcall.yaml: line 4 (key trusted_proxies): did not find expected node content", `"::1/128"`}},
		{"trusted_proxies: [127.0.0.1/32, ::1/128]\n", []string{"line 1 (key trusted_proxies)", "quote"}},
		{"# comment\nlog:\n  level: info\n  format: [json, :x]\n", []string{"line 4 (key log.format)"}},
		{"listen: a\n store: b\n", []string{"line 2 (key listen.store)", "mapping values are not allowed"}},
		{"listen: a\nallowed_hosts: [a, b\nstore: c\n", []string{"line 2 (key allowed_hosts)"}},
		{"listen: a\n\tstore: b\n", []string{"line 2", "tab"}},
	} {
		_, err := load(t, tc.yaml, nil)
		if err == nil {
			t.Errorf("%q: no error", tc.yaml)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q lacks %q", tc.yaml, err, w)
			}
		}
	}
}
