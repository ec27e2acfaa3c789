package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// Cluster is a throwaway PostgreSQL cluster started from Debian's server
// binaries (the newest /usr/lib/postgresql/N/bin): its own data and socket
// directory under a temporary directory, its own loopback port, trust
// authentication for the superuser postgres. It is never the shared
// PostgreSQL.
type Cluster struct {
	bin      string // /usr/lib/postgresql/N/bin
	dir      string
	port     int
	asPG     []string // runuser -u postgres -- when running as root
	maxConns int
}

// StartCluster creates and starts a cluster that allows maxConns
// connections (with fsync off: nothing in it is kept). Without the server
// binaries its error says which package installs them.
func StartCluster(maxConns int) (*Cluster, error) {
	bin, err := pgBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rollcall-test-pg")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, maxConns: maxConns}
	if os.Getuid() == 0 {
		if err := os.Chown(dir, pgUID(), -1); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		c.asPG = []string{"runuser", "-u", "postgres", "--"}
	}
	if out, err := c.run("initdb", "-A", "trust", "-U", "postgres", "-D", c.data()); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ { // the free port may be taken again before the start
		c.port = freePort()
		if err := c.Start(); err == nil {
			return c, nil
		} else if attempt == 4 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// NewCluster is StartCluster for one test, removed at its cleanup. Without
// the server binaries the test skips, unless ROLLCALL_REQUIRE_POSTGRES=1,
// which fails it.
func NewCluster(t testing.TB, maxConns int) *Cluster {
	t.Helper()
	c, err := StartCluster(maxConns)
	if err != nil {
		if os.Getenv("ROLLCALL_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("throwaway PostgreSQL cluster: %v", err)
		}
		t.Skipf("throwaway PostgreSQL cluster: %v (set ROLLCALL_REQUIRE_POSTGRES=1 to fail instead)", err)
	}
	t.Cleanup(c.Destroy)
	return c
}

func pgBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (apt-get install postgresql)")
}

func pgMajor(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func pgUID() int {
	out, err := exec.Command("id", "-u", "postgres").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}

func freePort() int {
	port, err := harness.FreePort()
	if err != nil {
		panic(err)
	}
	return port
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *Cluster) run(tool string, args ...string) ([]byte, error) {
	argv := append(append([]string{}, c.asPG...), append([]string{filepath.Join(c.bin, tool)}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// Start starts (or starts again) the server and waits until it accepts
// connections.
func (c *Cluster) Start() error {
	out, err := c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "pg.log"), "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=%d -c fsync=off", c.port, c.dir, c.maxConns), "start")
	if err != nil {
		return fmt.Errorf("pg_ctl start: %v\n%s", err, out)
	}
	return nil
}

// Stop stops the server (fast: every connection is closed at once).
func (c *Cluster) Stop() error {
	out, err := c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "-t", "60", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Destroy stops the server at once and removes its directory.
func (c *Cluster) Destroy() {
	c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
	os.RemoveAll(c.dir)
}

// URL is the URL of database db as role.
func (c *Cluster) URL(role, db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", role, c.port, db)
}
