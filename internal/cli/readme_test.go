package cli

import (
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMECommandsParse: every rollcall command line in the README's
// shell examples names existing commands, known flags and the right number
// of arguments (nothing is sent anywhere).
func TestREADMECommandsParse(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^\s*(?:\./)?rollcall (.*)$`)
	lines := strings.Split(string(data), "\n")
	n := 0
	for i := 0; i < len(lines); i++ {
		m := line.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		cmdline := m[1]
		for strings.HasSuffix(strings.TrimSpace(stripComment(cmdline)), `\`) && i+1 < len(lines) {
			cmdline = strings.TrimSuffix(strings.TrimSpace(stripComment(cmdline)), `\`) + " " + lines[i+1]
			i++
		}
		args := shellWords(stripComment(cmdline))
		n++
		root := NewRoot(strings.NewReader(""), io.Discard, io.Discard)
		if err := checkCommandWords(root, args); err != nil {
			t.Errorf("README line %d: rollcall %s: %v", i+1, cmdline, err)
			continue
		}
		cmd, rest, err := root.Find(args)
		if err == nil {
			err = cmd.ParseFlags(rest)
		}
		if err == nil && cmd.Args != nil {
			err = cmd.Args(cmd, cmd.Flags().Args())
		}
		if err != nil {
			t.Errorf("README line %d: rollcall %s: %v", i+1, cmdline, err)
		}
	}
	if n < 20 {
		t.Fatalf("found %d rollcall command lines in the README, want at least 20", n)
	}
}

// stripComment removes a trailing "# …" outside quotes.
func stripComment(s string) string {
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote == 0 && r == '#' && (i == 0 || s[i-1] == ' '):
			return s[:i]
		}
	}
	return s
}

// shellWords splits s at spaces outside single or double quotes.
func shellWords(s string) []string {
	var (
		out   []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
