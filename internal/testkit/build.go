package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildRollcall builds ./cmd/rollcall of this module (with the race
// detector when race is set) into a new temporary directory and returns
// the binary's path and a func removing the directory. The go tool's
// output goes to stderr.
func BuildRollcall(race bool) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "rollcall-test-bin")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "rollcall")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/rollcall/rollcall/cmd/rollcall")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		remove()
		return "", nil, fmt.Errorf("building rollcall: %w", err)
	}
	return bin, remove, nil
}
