package main

import (
	"bytes"
	_ "embed"
	"io"
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

// skips is a stream with skipped tests in two packages, interleaved: one
// with a reason, a subtest with a reason of two lines, one without a
// reason; and a package without test files (no skipped test).
//
//go:embed testdata/skips.jsonl
var skips []byte

// TestReport: the report of a stream names the skipped tests per package
// with their reasons, then the packages that failed without a failing
// test, then the count.
func TestReport(t *testing.T) {
	for _, c := range []struct {
		name   string
		stream []byte
		want   string
	}{
		{"skipped tests named", skips, `skipped in ex/db:
    TestPostgres
        pg_test.go:14: no PostgreSQL: set ROLLCALL_TEST_POSTGRES
    TestQuiet
skipped in ex/ui:
    TestBrowser/fleet
        ui_test.go:30: chromium is not installed
        apt-get install -y chromium
2 passed, 0 failed, 3 skipped
`},
		{"failed packages before the count", stream, `skipped in ex/ok:
    TestS
FAIL ex/broken (no failing test: build error, panic or timeout)
FAIL ex/panics (no failing test: build error, panic or timeout)
2 passed, 4 failed, 1 skipped
`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Run(bytes.NewReader(c.stream), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			s.Report(&out)
			if got := out.String(); got != c.want {
				t.Errorf("report:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}
