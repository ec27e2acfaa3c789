package testkit

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// Server is one running `rollcall serve` process.
type Server struct {
	Name string // how failures name it
	URL  string // the URL it printed, http://127.0.0.1:port
	Cmd  *exec.Cmd
	Done chan struct{} // closed once the process has exited

	mu  sync.Mutex
	out strings.Builder
}

// StartServer runs `bin serve --listen 127.0.0.1:0 args...` (a later
// --listen in args wins) with env added to the environment, and waits up
// to Wait for the line naming its URL. Its stdout and stderr are kept
// (Output). At cleanup it gets SIGCONT (should the test have stopped it),
// then SIGINT, and SIGKILL after Wait; when the test failed its last 200
// lines are logged.
func StartServer(t testing.TB, bin, name string, env []string, args ...string) *Server {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Name: name, Cmd: cmd, Done: make(chan struct{})}
	cmd.Stderr = WriterFunc(func(p []byte) { s.mu.Lock(); s.out.Write(p); s.mu.Unlock() })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.out.WriteString(line + "\n")
			s.mu.Unlock()
			if m := harness.ListeningRE.FindStringSubmatch(line); m != nil {
				select {
				case urlc <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() { cmd.Wait(); close(s.Done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.Done:
		case <-time.After(Wait):
			cmd.Process.Kill()
			<-s.Done
		}
		if t.Failed() {
			t.Logf("server %s output (last 200 lines, /readyz requests left out):\n%s", name, tail(s.Output(), 200))
		}
	})
	select {
	case s.URL = <-urlc:
	case <-s.Done:
		t.Fatalf("server %s exited before listening:\n%s", name, s.Output())
	case <-time.After(Wait):
		t.Fatalf("server %s did not print its URL:\n%s", name, s.Output())
	}
	return s
}

func tail(s string, n int) string {
	// The /readyz polls of the tests would fill the tail.
	lines := slices.DeleteFunc(strings.Split(s, "\n"), func(l string) bool { return strings.Contains(l, "path=/readyz") })
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Output returns what the server printed so far (stdout and stderr).
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// Signal sends sig to the process, failing the test when it cannot.
func (s *Server) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := s.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to %s: %v", sig, s.Name, err)
	}
}

// Kill kills the process (SIGKILL, no shutdown) and waits for its exit.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	if err := s.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.Done
}

var livenessLineRE = regexp.MustCompile(`msg="agent liveness changed" agent=(\S+) agent_id=\S+ state=(\S+)`)

// ChangesLogged counts the liveness changes to state the server logged,
// per agent handle.
func (s *Server) ChangesLogged(state string) map[string]int {
	out := map[string]int{}
	for _, m := range livenessLineRE.FindAllStringSubmatch(s.Output(), -1) {
		if m[2] == state {
			out[m[1]]++
		}
	}
	return out
}
