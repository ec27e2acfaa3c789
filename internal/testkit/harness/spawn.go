package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sync/atomic"
	"time"
)

// Proc is one process Start started.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
}

// Start starts bin with args and env (added to this process's
// environment), copies its stdout and stderr lines to logw, and when re is
// set waits (up to limit) for a stdout or stderr line matching it, which it
// keeps from logw and whose last submatch it returns. A process that exits
// before, or is not ready within limit or before ctx ends, is an error (and
// stopped).
func Start(ctx context.Context, bin string, args, env []string, logw io.Writer, re *regexp.Regexp, limit time.Duration) (*Proc, string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	found := make(chan string, 1)
	var sent atomic.Bool
	scan := func(r io.Reader) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if re != nil {
				if m := re.FindStringSubmatch(line); m != nil && sent.CompareAndSwap(false, true) {
					found <- m[len(m)-1]
					continue
				}
			}
			fmt.Fprintln(logw, line)
		}
	}
	go scan(out)
	go scan(errp)
	go func() { cmd.Wait(); close(p.done) }()
	if re == nil {
		return p, "", nil
	}
	select {
	case m := <-found:
		return p, m, nil
	case <-p.done:
		return nil, "", fmt.Errorf("%s exited before it was ready: %v", bin, cmd.ProcessState)
	case <-time.After(limit):
		p.Stop(stopGrace)
		return nil, "", fmt.Errorf("%s not ready within %s", bin, limit)
	case <-ctx.Done():
		p.Stop(stopGrace)
		return nil, "", ctx.Err()
	}
}

// stopGrace is how long Start's own Stop waits before it kills.
const stopGrace = 20 * time.Second

// PID is the process's id.
func (p *Proc) PID() int { return p.Cmd.Process.Pid }

// Stop interrupts the process and kills it if it has not exited within
// grace; it returns once the process has exited.
func (p *Proc) Stop(grace time.Duration) {
	p.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Cmd.Process.Kill()
		<-p.done
	}
}
