package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/pgtest"

	"github.com/rollcall/rollcall/internal/testkit"
)

// goSession is one mcp-go client session with its GET stream open.
type goSession = testkit.Session

func openGoSession(t *testing.T, mcpURL, cred string) *goSession {
	t.Helper()
	return testkit.OpenSession(t, mcpURL, cred, "e2e-multi", nil)
}

// untilTodo reads doorbells until the one of todoID and returns the metas
// of the ones before it.
func untilTodo(s *goSession, todoID string) []map[string]string {
	var before []map[string]string
	for {
		b := s.Next("doorbell of "+todoID, wait)
		if b.TodoID() == todoID {
			return before
		}
		before = append(before, b.Meta)
	}
}

// waitTransition waits for agent's transition to presence among the
// events after the first from.
func waitTransition(t *testing.T, evs *testkit.Events, from int, agent, presence string) testkit.Event {
	t.Helper()
	ev, ok := evs.WithinFrom(from, wait, testkit.Transition(agent, presence))
	if !ok {
		t.Fatalf("no %s transition of %s within %s", presence, agent, wait)
	}
	return ev
}

func pushVia(t *testing.T, srv *server, agent, queue, title string) string {
	t.Helper()
	var td todoJSON
	if code := restDo(t, srv, "POST", "/v1/agents/"+agent+"/todos", map[string]string{"queue": queue, "title": title}, &td); code != 201 {
		t.Fatalf("push: %d", code)
	}
	return td.ID
}

// startPair starts two instances on one fresh PostgreSQL database.
func startPair(t *testing.T, extra ...string) (*server, *server) {
	t.Helper()
	return startPairOn(t, pgtest.FreshDatabase(t), append([]string{"--presence.evaluate_interval", "200ms", "--doorbell.sweep_interval", "1h"}, extra...)...)
}

// startPairOn starts two instances on the store URL with args.
func startPairOn(t *testing.T, store string, args ...string) (*server, *server) {
	t.Helper()
	args = append([]string{"--store", store}, args...)
	return startServer(t, bootstrapEnv, args...), startServer(t, bootstrapEnv, args...)
}

// TestMultiInstancePresencePropagation: two `rollcall serve` processes on
// one PostgreSQL database. A presence change made through A is observed by
// B (its event stream and its doorbell filter); the latency is measured and
// must stay inside the 5 s bound (design: Held doorbells).
func TestMultiInstancePresencePropagation(t *testing.T) {
	a, b := startPair(t)
	agent := vend(t, a, "multi", []string{"q"}, allVerbs)
	fencer := vend(t, a, "fencer", []string{"f"}, allVerbs)
	sA := openGoSession(t, a.URL+"/mcp", agent.Credential)
	sB := openGoSession(t, b.URL+"/mcp", agent.Credential)
	fB := openGoSession(t, b.URL+"/mcp", fencer.Credential)
	evB := testkit.Subscribe(t, "B", b.URL, adminToken)

	var lat []time.Duration
	for i := 0; i < 20; i++ {
		for _, p := range []string{"out", "in"} {
			from, start := evB.Len(), time.Now()
			if code := restDo(t, a, "PUT", "/v1/agents/multi/presence", map[string]any{"presence": p}, nil); code != 200 {
				t.Fatalf("PUT presence %s via A: %d", p, code)
			}
			ev := waitTransition(t, evB, from, "multi", p)
			lat = append(lat, ev.Read.Sub(start))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("presence change via A observed by B: n=%d p50=%s p99=%s max=%s", len(lat), p50, p99, lat[len(lat)-1])
	if lat[len(lat)-1] > 5*time.Second {
		t.Fatalf("B observed a change after %s, beyond the 5 s bound", lat[len(lat)-1])
	}
	if f := os.Getenv("ROLLCALL_E2E_REPORT"); f != "" {
		os.WriteFile(f, []byte(fmt.Sprintf("propagation n=%d p50=%s p99=%s max=%s\n", len(lat), p50, p99, lat[len(lat)-1])), 0o644)
	}

	// Held across instances: out via A, a todo pushed via B rings nobody.
	from := evB.Len()
	if code := restDo(t, a, "PUT", "/v1/agents/multi/presence", map[string]any{"presence": "out"}, nil); code != 200 {
		t.Fatal(code)
	}
	waitTransition(t, evB, from, "multi", "out")
	held := pushVia(t, b, "multi", "q", "held across instances")
	fence := pushVia(t, b, "fencer", "f", "fence")
	if got := untilTodo(fB, fence); len(got) != 0 {
		t.Fatalf("fencer got %v before the fence", got)
	}
	for name, s := range map[string]*goSession{"A": sA, "B": sB} {
		if m := s.Bells(); len(m) != 0 {
			t.Fatalf("session on %s was rung while out: %v", name, m)
		}
	}
	var td struct {
		State        string `json:"state"`
		RingAttempts int    `json:"ring_attempts"`
	}
	restGet(t, a, "/v1/todos/"+held, &td)
	if td.State != "pending" || td.RingAttempts != 0 {
		t.Fatalf("held todo = %+v, want pending with ring_attempts 0", td)
	}
}

// TestMultiInstanceShiftStart: a shift start evaluated by both instances at
// once yields exactly one claimed transition, and each instance's session
// receives exactly one digest.
func TestMultiInstanceShiftStart(t *testing.T) {
	t.Parallel() // it waits for a minute boundary; let the other tests run meanwhile
	a, b := startPair(t)
	agent := vend(t, a, "shifty", []string{"q"}, allVerbs)
	// A one-minute boundary at least 5 s away, every day, in UTC.
	now := time.Now().UTC()
	start := now.Truncate(time.Minute).Add(time.Minute)
	if start.Sub(now) < 5*time.Second {
		start = start.Add(time.Minute)
	}
	end := start.Add(30 * time.Minute)
	shift := fmt.Sprintf("%s-%s", start.Format("15:04"), end.Format("15:04"))
	if code := restDo(t, a, "PUT", "/v1/agents/shifty/shift", map[string]any{"shift": shift}, nil); code != 200 {
		t.Fatalf("PUT shift %q: %d", shift, code)
	}
	evA := testkit.Subscribe(t, "A", a.URL, adminToken)
	sA := openGoSession(t, a.URL+"/mcp", agent.Credential)
	sB := openGoSession(t, b.URL+"/mcp", agent.Credential)
	pushVia(t, a, "shifty", "q", "one")
	pushVia(t, b, "shifty", "q", "two")
	t.Logf("waiting for the shift start at %s (%s)", start.Format(time.RFC3339), time.Until(start).Round(time.Second))

	dA := sA.Next("digest on A", time.Until(start)+wait).Meta
	dB := sB.Next("digest on B", wait).Meta
	for name, d := range map[string]map[string]string{"A": dA, "B": dB} {
		if d["kind"] != "digest" || d["reason"] != "shift_start" || d["pending"] != "2" {
			t.Fatalf("session on %s: %v, want a shift_start digest of 2", name, d)
		}
	}
	// Fence both sessions with a todo ringing each instance's one session.
	fence := pushVia(t, a, "shifty", "q", "fence")
	for name, s := range map[string]*goSession{"A": sA, "B": sB} {
		if extra := untilTodo(s, fence); len(extra) != 0 {
			t.Fatalf("session on %s received more before the fence: %v", name, extra)
		}
	}
	waitTransition(t, evA, 0, "shifty", "in")
	// Exactly one instance claimed the transition: one log line in all.
	claims := 0
	for _, s := range []*server{a, b} {
		for _, line := range strings.Split(s.Output(), "\n") {
			if strings.Contains(line, "presence transition") && strings.Contains(line, "new=in") {
				claims++
			}
		}
	}
	if claims != 1 {
		t.Fatalf("%d instances claimed the shift-start transition, want exactly 1\nA:\n%s\nB:\n%s", claims, a.Output(), b.Output())
	}
}
