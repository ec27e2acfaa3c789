package claudecode

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

var versionRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]*$`)

// Process identifies one process across PID reuse: its PID and its start
// time (clock ticks since boot from /proc/<pid>/stat; 0 where /proc is
// missing, when only the PID is compared).
type Process struct {
	PID   int
	Start uint64
}

// procStat returns the parent PID, start time and command name of pid from
// /proc; ok false without /proc or for a missing process.
func procStat(pid int) (ppid int, start uint64, comm string, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, "", false
	}
	s := string(b)
	l, r := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if l < 0 || r < l {
		return 0, 0, "", false
	}
	comm = s[l+1 : r]
	f := strings.Fields(s[r+1:])
	// f[0] is field 3 (state); ppid is field 4, starttime field 22.
	if len(f) < 20 {
		return 0, 0, "", false
	}
	ppid, _ = strconv.Atoi(f[1])
	start, _ = strconv.ParseUint(f[19], 10, 64)
	return ppid, start, comm, true
}

// Identify returns the Process of pid (Start 0 without /proc).
func Identify(pid int) Process {
	_, start, _, _ := procStat(pid)
	return Process{PID: pid, Start: start}
}

// Alive reports whether p still runs (and is the same process: same start
// time where /proc has it). A zombie counts as gone.
func (p Process) Alive() bool {
	if p.PID <= 0 {
		return false
	}
	if _, start, _, ok := procStat(p.PID); ok {
		if p.Start != 0 && start != p.Start {
			return false
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/stat"); err == nil {
			if r := strings.LastIndexByte(string(b), ')'); r >= 0 && r+2 < len(b) && b[r+2] == 'Z' {
				return false
			}
		}
		return true
	}
	err := syscall.Kill(p.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Exe returns the executable of p from /proc/<pid>/exe, "" when unknown.
func (p Process) Exe() string {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/exe")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(exe, " (deleted)")
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ash": true, "busybox": true, "env": true, "timeout": true}

// ClaudeProcess finds the Claude Code process a hook runs under: Claude Code
// runs hook commands through a shell, so it walks up from the hook's parent
// to the first ancestor whose executable or command is named like claude
// ("claude", "claude.exe", a node running cli.js), else the first ancestor
// that is not a shell. env ROLLCALL_CLAUDE_PID overrides the search.
// Without /proc it returns the parent process.
func ClaudeProcess(getenv func(string) string) Process {
	if s := getenv("ROLLCALL_CLAUDE_PID"); s != "" {
		if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
			return Identify(pid)
		}
	}
	parent := os.Getppid()
	firstNonShell := 0
	pid := parent
	for depth := 0; depth < 16 && pid > 1; depth++ {
		ppid, _, comm, ok := procStat(pid)
		if !ok {
			break
		}
		exe := filepath.Base(Process{PID: pid}.Exe())
		if strings.HasPrefix(exe, "claude") || strings.HasPrefix(comm, "claude") {
			return Identify(pid)
		}
		if firstNonShell == 0 && !shells[exe] && !shells[comm] {
			firstNonShell = pid
		}
		pid = ppid
	}
	if firstNonShell != 0 {
		return Identify(firstNonShell)
	}
	return Identify(parent)
}
