package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/pgtest"
)

// goSession is one mcp-go client session with its GET stream open.
type goSession struct {
	t     *testing.T
	c     *mcpclient.Client
	notes chan map[string]string
}

func openGoSession(t *testing.T, mcpURL, cred string) *goSession {
	t.Helper()
	//lint:ignore SA1019 sessions of 2025-06-18/2025-11-25 receive doorbells on the GET stream (design: MCP sessions)
	tr, err := transport.NewStreamableHTTP(mcpURL, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + cred}), transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	s := &goSession{t: t, c: mcpclient.NewClient(tr, mcpclient.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)), notes: make(chan map[string]string, 256)}
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/claude/channel" {
			return
		}
		meta := map[string]string{}
		if m, ok := n.Params.AdditionalFields["meta"].(map[string]any); ok {
			for k, v := range m {
				meta[k], _ = v.(string)
			}
		}
		s.notes <- meta
	})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.c.Close() })
	if _, err := s.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION, ClientInfo: mcp.Implementation{Name: "e2e-multi", Version: "1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// next returns the next channel notification's meta.
func (s *goSession) next(what string) map[string]string {
	s.t.Helper()
	return s.nextWithin(what, wait)
}

func (s *goSession) nextWithin(what string, d time.Duration) map[string]string {
	s.t.Helper()
	select {
	case m := <-s.notes:
		return m
	case <-time.After(d):
		s.t.Fatalf("no notification (%s) within %s", what, d)
		return nil
	}
}

// untilTodo reads notifications until the doorbell of todoID and returns
// the ones before it.
func (s *goSession) untilTodo(todoID string) []map[string]string {
	s.t.Helper()
	var before []map[string]string
	for {
		m := s.next("doorbell of " + todoID)
		if m["todo_id"] == todoID {
			return before
		}
		before = append(before, m)
	}
}

// sseEvent is one event of GET /v1/events.
type sseEvent struct {
	ID   string
	Kind string
	Data struct {
		Agent    string `json:"agent"`
		Presence string `json:"presence"`
		Reason   string `json:"reason"`
		State    string `json:"state"`
	}
	At time.Time // when the test read it
}

// subscribeSSE opens GET /v1/events on srv and streams its events.
func subscribeSSE(t *testing.T, srv *server) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/events: %d", resp.StatusCode)
	}
	out := make(chan sseEvent, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id:"):
				ev.ID = strings.TrimSpace(line[3:])
			case strings.HasPrefix(line, "event:"):
				ev.Kind = strings.TrimSpace(line[6:])
			case strings.HasPrefix(line, "data:"):
				var body struct {
					Data json.RawMessage `json:"data"`
				}
				if json.Unmarshal([]byte(strings.TrimSpace(line[5:])), &body) == nil {
					json.Unmarshal(body.Data, &ev.Data)
				}
			case line == "" && ev.Kind != "":
				ev.At = time.Now()
				out <- ev
				ev = sseEvent{}
			}
		}
	}()
	t.Cleanup(cancel)
	return out
}

func waitTransition(t *testing.T, evs <-chan sseEvent, agent, presence string) sseEvent {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case ev := <-evs:
			if ev.Kind == "agent.presence_transition" && ev.Data.Agent == agent && ev.Data.Presence == presence {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s transition of %s within %s", presence, agent, wait)
		}
	}
}

func restDo(t *testing.T, srv *server, method, path string, body any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func pushVia(t *testing.T, srv *server, agent, queue, title string) string {
	t.Helper()
	var td todoJSON
	b, _ := json.Marshal(map[string]string{"queue": queue, "title": title})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/agents/"+agent+"/todos", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&td); err != nil || resp.StatusCode != 201 {
		t.Fatalf("push: %d %v", resp.StatusCode, err)
	}
	return td.ID
}

// startPair starts two instances on one fresh PostgreSQL database.
func startPair(t *testing.T, extra ...string) (*server, *server) {
	t.Helper()
	db := pgtest.FreshDatabase(t)
	args := append([]string{"--store", db, "--presence.evaluate_interval", "200ms", "--doorbell.sweep_interval", "1h"}, extra...)
	env := []string{"ROLLCALL_BOOTSTRAP_TOKEN=" + adminToken}
	a := startServer(t, env, args...)
	b := startServer(t, env, args...)
	return a, b
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
	evB := subscribeSSE(t, b)

	var lat []time.Duration
	for i := 0; i < 20; i++ {
		for _, p := range []string{"out", "in"} {
			start := time.Now()
			if code := restDo(t, a, "PUT", "/v1/agents/multi/presence", map[string]any{"presence": p}); code != 200 {
				t.Fatalf("PUT presence %s via A: %d", p, code)
			}
			ev := waitTransition(t, evB, "multi", p)
			lat = append(lat, ev.At.Sub(start))
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
	if code := restDo(t, a, "PUT", "/v1/agents/multi/presence", map[string]any{"presence": "out"}); code != 200 {
		t.Fatal(code)
	}
	waitTransition(t, evB, "multi", "out")
	held := pushVia(t, b, "multi", "q", "held across instances")
	fence := pushVia(t, b, "fencer", "f", "fence")
	if got := fB.untilTodo(fence); len(got) != 0 {
		t.Fatalf("fencer got %v before the fence", got)
	}
	for name, s := range map[string]*goSession{"A": sA, "B": sB} {
		select {
		case m := <-s.notes:
			t.Fatalf("session on %s was rung while out: %v", name, m)
		default:
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
	if code := restDo(t, a, "PUT", "/v1/agents/shifty/shift", map[string]any{"shift": shift}); code != 200 {
		t.Fatalf("PUT shift %q: %d", shift, code)
	}
	evA := subscribeSSE(t, a)
	sA := openGoSession(t, a.URL+"/mcp", agent.Credential)
	sB := openGoSession(t, b.URL+"/mcp", agent.Credential)
	pushVia(t, a, "shifty", "q", "one")
	pushVia(t, b, "shifty", "q", "two")
	t.Logf("waiting for the shift start at %s (%s)", start.Format(time.RFC3339), time.Until(start).Round(time.Second))

	dA := sA.nextWithin("digest on A", time.Until(start)+wait)
	dB := sB.next("digest on B")
	for name, d := range map[string]map[string]string{"A": dA, "B": dB} {
		if d["kind"] != "digest" || d["reason"] != "shift_start" || d["pending"] != "2" {
			t.Fatalf("session on %s: %v, want a shift_start digest of 2", name, d)
		}
	}
	// Fence both sessions with a todo ringing each instance's one session.
	fence := pushVia(t, a, "shifty", "q", "fence")
	for name, s := range map[string]*goSession{"A": sA, "B": sB} {
		if extra := s.untilTodo(fence); len(extra) != 0 {
			t.Fatalf("session on %s received more before the fence: %v", name, extra)
		}
	}
	waitTransition(t, evA, "shifty", "in")
	// Exactly one instance claimed the transition: one log line in all.
	claims := 0
	var mu sync.Mutex
	mu.Lock()
	for _, s := range []*server{a, b} {
		for _, line := range strings.Split(s.Output(), "\n") {
			if strings.Contains(line, "presence transition") && strings.Contains(line, "new=in") {
				claims++
			}
		}
	}
	mu.Unlock()
	if claims != 1 {
		t.Fatalf("%d instances claimed the shift-start transition, want exactly 1\nA:\n%s\nB:\n%s", claims, a.Output(), b.Output())
	}
}
