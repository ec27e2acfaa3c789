// Command testsummary reads `go test -json` on stdin and prints what plain
// `go test` would print — each package's result line, and the full output
// of every test that failed — then every skipped test by package and name
// with the reason it logged, and, on its own last line, the count of tests
// (subtests included) as "N passed, N failed, N skipped".
//
//	go test -json ./... | go run ./tools/testsummary
//
// A package that failed without a failing test (a build error, a panic
// outside a test, a timeout) counts as one failed test. The exit status is
// 1 when anything failed, else 0. Lines that are not test2json events are
// copied through.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// event is one test2json record (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output and build-fail (Go 1.24+)
}

// Summary counts the tests of one run.
type Summary struct {
	Passed, Failed, Skipped int
	// FailedPackages failed with no failing test of their own.
	FailedPackages []string
	// Skips are the skipped tests in the order they ended.
	Skips []Skip
}

// Skip is one skipped test (or subtest) and the lines it logged, the
// reason given to t.Skip among them; Reason is empty when it logged none.
type Skip struct {
	Package, Test string
	Reason        []string
}

// Report writes the end of the summary to w: the skipped tests grouped by
// package (in the order the packages first had one), each with its reason
// lines indented below it; a line per failed package without a failing
// test; and the count line.
func (s Summary) Report(w io.Writer) {
	var pkgs []string
	for _, k := range s.Skips {
		if !slices.Contains(pkgs, k.Package) {
			pkgs = append(pkgs, k.Package)
		}
	}
	for _, p := range pkgs {
		fmt.Fprintf(w, "skipped in %s:\n", p)
		for _, k := range s.Skips {
			if k.Package != p {
				continue
			}
			fmt.Fprintf(w, "    %s\n", k.Test)
			for _, r := range k.Reason {
				fmt.Fprintf(w, "        %s\n", r)
			}
		}
	}
	for _, p := range s.FailedPackages {
		fmt.Fprintf(w, "FAIL %s (no failing test: build error, panic or timeout)\n", p)
	}
	fmt.Fprintln(w, s)
}

// String is the summary line.
func (s Summary) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", s.Passed, s.Failed, s.Skipped)
}

// Run copies the readable part of the test2json stream in to out and
// returns the counts.
func Run(in io.Reader, out io.Writer) (Summary, error) {
	var s Summary
	buf := map[string][]string{}       // package + test → output so far
	pkgFailedTest := map[string]bool{} // packages with a failing test
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
		case e.Test == "" && e.Action == "output":
			if o := e.Output; o != "PASS\n" && !strings.HasPrefix(o, "=== ") {
				fmt.Fprint(out, o)
			}
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			// Tests of the package that never ended (a panic, a timeout):
			// their output explains the failure.
			for k, lines := range buf {
				if strings.HasPrefix(k, e.Package+"\x00") {
					if e.Action == "fail" {
						fmt.Fprint(out, strings.Join(lines, ""))
					}
					delete(buf, k)
				}
			}
			if e.Action == "fail" && !pkgFailedTest[e.Package] {
				s.Failed++
				s.FailedPackages = append(s.FailedPackages, e.Package)
			}
		case e.Test == "":
		case e.Action == "output":
			if !strings.HasPrefix(e.Output, "=== ") { // RUN, PAUSE, CONT, NAME: -v's markers
				buf[key] = append(buf[key], e.Output)
			}
		case e.Action == "pass":
			s.Passed++
			delete(buf, key)
		case e.Action == "skip":
			s.Skipped++
			s.Skips = append(s.Skips, Skip{Package: e.Package, Test: e.Test, Reason: skipReason(buf[key])})
			delete(buf, key)
		case e.Action == "fail":
			s.Failed++
			pkgFailedTest[e.Package] = true
			for _, o := range buf[key] {
				fmt.Fprint(out, o)
			}
			delete(buf, key)
		}
	}
	return s, sc.Err()
}

// skipReason is what a skipped test logged, trimmed, without its own
// "--- SKIP" line.
func skipReason(lines []string) []string {
	var r []string
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--- SKIP: ") {
			r = append(r, t)
		}
	}
	return r
}

func main() {
	s, err := Run(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	s.Report(os.Stdout)
	if s.Failed > 0 {
		os.Exit(1)
	}
}
