package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/rollcall/rollcall/internal/store/storetest"
)

// TestLivenessContract runs the liveness part of the store contract
// (DESIGN.md §5.2). A second handle on the file is refused by the instance
// lock, so the concurrent cases drive one Store from many goroutines.
func TestLivenessContract(t *testing.T) {
	storetest.RunLiveness(t, harness(func(t *testing.T) string { return filepath.Join(t.TempDir(), "rollcall.db") }))
}
