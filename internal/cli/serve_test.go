package cli_test

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestServeRefusesABadListenAddressBeforeTheStore: serve checks its listen
// address (malformed, out-of-range port, port in use) before it opens the
// store, so a failed start leaves no database file behind.
func TestServeRefusesABadListenAddressBeforeTheStore(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct{ listen, stderr string }{
		{"127.0.0.1", "listen 127.0.0.1: "},
		{"127.0.0.1:99999", "listen 127.0.0.1:99999: "},
		{"no-such-host.invalid:7070", "listen no-such-host.invalid:7070: "},
		{busy.Addr().String(), "address already in use"},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "rollcall.db")
			run("serve", "--listen", tc.listen, "--store", "sqlite:"+db).fails(t, 1, tc.stderr)
			if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a failed serve left %s behind (stat: %v)", db, err)
			}
		})
	}
}
