package main

import (
	"bytes"
	_ "embed"
	"strings"
	"testing"
)

// stream is a stream as `go test -json` writes it: one package passes (a
// test, a subtest, a skip), one fails a subtest, one does not build, one
// panics in the middle of a test; and a line that is not JSON.
//
//go:embed testdata/stream.jsonl
var stream []byte

func TestRun(t *testing.T) {
	var out strings.Builder
	s, err := Run(bytes.NewReader(stream), &out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.String(), "2 passed, 4 failed, 1 skipped"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
	if strings.Join(s.FailedPackages, ",") != "ex/broken,ex/panics" {
		t.Errorf("failed packages %v", s.FailedPackages)
	}
	got := out.String()
	for _, want := range []string{"ok  \tex/ok\t0.01s\n", "want 2, got 3", "--- FAIL: TestB (0.00s)", "FAIL\tex/bad\t0.02s", "syntax error", "[build failed]", "panic: test timed out", "not json at all"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"chatter of a passing test", "=== RUN", "SKIP", "PASS\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("output has %q, which plain go test does not print:\n%s", unwanted, got)
		}
	}
}
