// Package fuzzseed adds the seed corpus of a fuzz target written as string
// literals. It imports nothing of Rollcall, so the fuzz tests of the pure
// rules can use it without an import cycle.
package fuzzseed

import "testing"

// Bytes adds each seed to f's corpus as []byte, for a target that fuzzes a
// body.
func Bytes(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
}

// Strings adds each seed to f's corpus as a string.
func Strings(f *testing.F, seeds ...string) {
	for _, s := range seeds {
		f.Add(s)
	}
}
