//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

import (
	"errors"
	"os"
)

var errLocked = errors.New("locked")

// lockFile creates name; this platform has no flock, so a second server on
// the same file is not detected.
func lockFile(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
}

func unlockFile(f *os.File) error { return f.Close() }
