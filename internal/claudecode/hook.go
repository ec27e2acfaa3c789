package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// HookOptions configures Hook.
type HookOptions struct {
	// Event is the hook event (one of HookEvents).
	Event string
	// Stdin is the hook's input: Claude Code's hook JSON (session_id,
	// hook_event_name, reason, …); at most 1 MiB is read.
	Stdin io.Reader
	// Getenv reads the hook's environment (Claude Code's); nil = os.Getenv.
	Getenv func(string) string
	// Self is the rollcall executable; "" = os.Executable().
	Self string
	// AdapterArgs are the arguments after `rollcall adapter run` that start
	// an adapter for this process (server, agent, credential env); the hook
	// adds --claude-pid and --claude-start.
	AdapterArgs []string
	// CredentialEnv names the variable the adapter reads the credential
	// from; when it is empty in the hook's environment no adapter is
	// started (it could not identify). "" = DefaultCredentialEnv.
	CredentialEnv string
}

// Hook is `rollcall adapter hook <event>`: it finds the Claude Code process
// it runs under (ClaudeProcess), starts the process's adapter detached when
// none answers on its socket (for every event but SessionEnd), and sends it
// the event. For SessionEnd it returns once the adapter sent its last
// heartbeat. It prints nothing on stdout (SessionStart's stdout would reach
// the model) and its errors are for the hook's stderr: the caller exits 0
// either way so a broken adapter never blocks Claude Code.
func Hook(o HookOptions) error {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	var in struct {
		SessionID string `json:"session_id"`
		Reason    string `json:"reason"`
	}
	if o.Stdin != nil {
		b, _ := io.ReadAll(io.LimitReader(o.Stdin, 1<<20))
		_ = json.Unmarshal(b, &in)
	}
	ev := HookEvent{Event: o.Event, SessionID: in.SessionID, Reason: in.Reason}
	p := ClaudeProcess(o.Getenv)
	dir := StateDir(o.Getenv)
	wait := 5 * time.Second
	if ev.Event == "SessionEnd" {
		wait = 25 * time.Second
	}
	err := sendEvent(dir, p, ev, wait)
	if err == nil || ev.Event == "SessionEnd" || !errors.Is(err, errNoAdapter) {
		return err
	}
	if o.CredentialEnv == "" {
		o.CredentialEnv = DefaultCredentialEnv
	}
	if o.Getenv(o.CredentialEnv) == "" {
		return fmt.Errorf("$%s is not set in Claude Code's environment: no adapter, no heartbeats", o.CredentialEnv)
	}
	exited, err := startAdapter(o, dir, p)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err = sendEvent(dir, p, ev, wait); err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-exited:
			// It failed to start, or another adapter won the lock: one more try.
			if err = sendEvent(dir, p, ev, wait); err != nil {
				return fmt.Errorf("the adapter exited at once; see %s", LogPath(dir, p))
			}
			return nil
		case <-time.After(100 * time.Millisecond): // polling for the new adapter's socket
		}
	}
}

// errNoAdapter: nothing listens on the process's socket.
var errNoAdapter = errors.New("no adapter for this Claude Code process")

func sendEvent(dir string, p Process, ev HookEvent, wait time.Duration) error {
	c, err := net.DialTimeout("unix", SocketPath(dir, p), time.Second)
	if err != nil {
		return errNoAdapter
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	b, _ := json.Marshal(ev)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return err
	}
	reply := make([]byte, 3)
	if _, err := io.ReadFull(c, reply); err != nil {
		return fmt.Errorf("adapter did not answer %s: %w", ev.Event, err)
	}
	return nil
}

// startAdapter runs `<self> adapter run …` in its own session (it outlives
// the hook and is not killed with the hook's process group), its output
// appended to the process's log file.
// The returned channel is closed when the adapter exits while the hook
// still runs.
func startAdapter(o HookOptions, dir string, p Process) (<-chan struct{}, error) {
	self := o.Self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(LogPath(dir, p), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append([]string{"adapter", "run", "--claude-pid", strconv.Itoa(p.PID),
		"--claude-start", strconv.FormatUint(p.Start, 10), "--state-dir", dir}, o.AdapterArgs...)
	cmd := exec.Command(self, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	return exited, nil
}
