package main

import (
	"strings"
	"testing"
)

// A stream as `go test -json` writes it: one package passes (a test, a
// subtest, a skip), one fails a subtest, one does not build, one panics in
// the middle of a test.
const stream = `{"Action":"start","Package":"ex/ok"}
{"Action":"run","Package":"ex/ok","Test":"TestA"}
{"Action":"output","Package":"ex/ok","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"ex/ok","Test":"TestA","Output":"    a_test.go:9: chatter of a passing test\n"}
{"Action":"run","Package":"ex/ok","Test":"TestA/sub"}
{"Action":"pass","Package":"ex/ok","Test":"TestA/sub"}
{"Action":"pass","Package":"ex/ok","Test":"TestA"}
{"Action":"output","Package":"ex/ok","Test":"TestS","Output":"--- SKIP: TestS (0.00s)\n"}
{"Action":"skip","Package":"ex/ok","Test":"TestS"}
{"Action":"output","Package":"ex/ok","Output":"PASS\n"}
{"Action":"output","Package":"ex/ok","Output":"ok  \tex/ok\t0.01s\n"}
{"Action":"pass","Package":"ex/ok"}
{"Action":"output","Package":"ex/bad","Test":"TestB/one","Output":"    b_test.go:5: want 2, got 3\n"}
{"Action":"output","Package":"ex/bad","Test":"TestB/one","Output":"    --- FAIL: TestB/one (0.00s)\n"}
{"Action":"fail","Package":"ex/bad","Test":"TestB/one"}
{"Action":"output","Package":"ex/bad","Test":"TestB","Output":"--- FAIL: TestB (0.00s)\n"}
{"Action":"fail","Package":"ex/bad","Test":"TestB"}
{"Action":"output","Package":"ex/bad","Output":"FAIL\n"}
{"Action":"output","Package":"ex/bad","Output":"FAIL\tex/bad\t0.02s\n"}
{"Action":"fail","Package":"ex/bad"}
{"ImportPath":"ex/broken","Action":"build-output","Output":"ex/broken/x.go:3:1: syntax error\n"}
{"ImportPath":"ex/broken","Action":"build-fail"}
{"Action":"output","Package":"ex/broken","Output":"FAIL\tex/broken [build failed]\n"}
{"Action":"fail","Package":"ex/broken"}
{"Action":"run","Package":"ex/panics","Test":"TestP"}
{"Action":"output","Package":"ex/panics","Test":"TestP","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"ex/panics","Output":"FAIL\tex/panics\t1.00s\n"}
{"Action":"fail","Package":"ex/panics"}
not json at all
`

func TestRun(t *testing.T) {
	var out strings.Builder
	s, err := Run(strings.NewReader(stream), &out)
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
