// Package harness holds what the tests (through testkit) and the load and
// bench tools (tools/load, tools/bench) share to drive a Rollcall process
// from outside: a free loopback port, the line a server logs when it
// listens, its resident memory, and an MCP client session. It imports no
// testing package, so that the tools can link it.
package harness

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// ListeningRE matches the line `rollcall serve` logs once it listens; its
// submatch is the base URL.
var ListeningRE = regexp.MustCompile(`rollcall listening on (http://\S+)`)

// FreePort reserves and releases a loopback TCP port for a server that takes
// its port from configuration.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// RSSKiB is the resident set size of pid (VmRSS of /proc/PID/status, KiB).
func RSSKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) < 2 {
				break
			}
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}
