package doorbell

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/evaluator"
	"github.com/rollcall/rollcall/internal/store"
)

// oneSessionHub is a SessionHub with one streaming session per agent that
// takes every notification.
type oneSessionHub struct{}

func (oneSessionHub) AgentSessions(agentID string) []SessionInfo {
	return []SessionInfo{{ID: "s-" + agentID, AgentID: agentID, Streaming: true}}
}
func (oneSessionHub) Notify(string, domain.ChannelMessage) error { return nil }
func (oneSessionHub) CloseAgentSessions(string, []string)        {}
func (oneSessionHub) AgentsWithSessions() []string               { return nil }

// BenchmarkDoorbellPush measures the doorbell's hot path for one todo push
// (cached presence check, dedup, session pick, queue the notification,
// queue the ring record) at a sustained 2 000 pushes/s of the injected
// clock: every push advances the clock 500 µs, so after 30 s of clock the
// dedup set holds 60 000 todos (the per-push cost stays flat; it used to
// sweep the whole set on every push past 10 000). Run with -benchtime
// 120000x for 60 s of clock; first-ns/op is the mean over the first 5 000
// pushes (set still small), last-ns/op over the last 5 000. The presence
// cache is the real evaluator's, filled without a store.
//
//	go test -run '^$' -bench BenchmarkDoorbellPush -benchtime 120000x ./internal/doorbell/
func BenchmarkDoorbellPush(b *testing.B) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	bs := bus.NewLocal()
	ev := evaluator.New(evaluator.Config{Bus: bs, Clock: clock, Log: log})
	d := New(Config{Bus: bs, Presence: ev, Clock: clock, Log: log})
	d.SetSessionHub(oneSessionHub{})
	const agents = 100
	for i := range agents {
		a := domain.Agent{ID: fmt.Sprintf("agent-%d", i), Handle: fmt.Sprintf("a%d", i), Active: true, Presence: domain.PresenceColumns{Seen: "in"}}
		ev.Upsert(&a, "")
	}
	stop := make(chan struct{})
	drained := make(chan struct{})
	go func() { // the recorder's consumer, without a store
		defer close(drained)
		for {
			select {
			case <-d.wake:
				d.writing.Lock()
				for len(d.takeRecords()) > 0 {
				}
				d.writing.Unlock()
			case <-stop:
				return
			}
		}
	}()
	defer func() { close(stop); <-drained }()
	const window = 5000
	var first, last time.Duration
	var t0 time.Time
	b.ResetTimer()
	for i := range b.N {
		if i%window == 0 {
			t0 = time.Now()
		}
		clock.Advance(500 * time.Microsecond)
		r := domain.TodoReady{AgentID: fmt.Sprintf("agent-%d", i%agents), TodoID: fmt.Sprintf("todo-%09d", i), Queue: "q", Title: "t"}
		if !d.Ring(r) {
			b.Fatal("not rung")
		}
		if i%window == window-1 {
			el := time.Since(t0)
			if i < window {
				first = el
			}
			if i >= b.N-window {
				last = el
			}
		}
	}
	b.StopTimer()
	if b.N >= 2*window {
		b.ReportMetric(float64(first.Nanoseconds())/window, "first-ns/op")
		b.ReportMetric(float64(last.Nanoseconds())/window, "last-ns/op")
		d.mu.Lock()
		b.ReportMetric(float64(d.recent.len()), "dedup-keys")
		d.mu.Unlock()
	}
}

// TestDedupExpires checks the dedup set of the doorbell: a key is refused
// for ttl, accepted again after, removable, and expired keys leave the set
// (its size stays bounded by the keys of the last ttl).
func TestDedupExpires(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	d := newDedup(30 * time.Second)
	if !d.add("a", t0) || d.add("a", t0.Add(29*time.Second)) {
		t.Fatal("a second add within the ttl must be refused")
	}
	if !d.add("a", t0.Add(30*time.Second)) {
		t.Fatal("an add after the ttl must be accepted")
	}
	d.remove("a")
	if !d.add("a", t0.Add(31*time.Second)) {
		t.Fatal("an add after remove must be accepted")
	}
	// 2 000 adds per second for 120 s: never more than 30 s of keys held.
	for i := range 240_000 {
		now := t0.Add(time.Minute + time.Duration(i)*500*time.Microsecond)
		if !d.add(fmt.Sprint(i), now) {
			t.Fatalf("fresh key %d refused", i)
		}
		if n := d.len(); n > 60_001 {
			t.Fatalf("dedup holds %d keys after %d adds, want ≤ 60 001", n, i)
		}
	}
	if len(d.fifo)-d.head > 60_001 || cap(d.fifo) > 4*60_001 {
		t.Fatalf("fifo len %d head %d cap %d: expired entries are kept", len(d.fifo), d.head, cap(d.fifo))
	}
}

// TestSessionInfoLive: the console counts a session as live while it
// streams or its client was seen within SessionLiveWindow.
func TestSessionInfoLive(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		si   SessionInfo
		live bool
	}{
		{SessionInfo{Streaming: true, LastActive: now.Add(-time.Hour)}, true},
		{SessionInfo{LastActive: now.Add(-SessionLiveWindow + time.Microsecond)}, true},
		{SessionInfo{LastActive: now.Add(-SessionLiveWindow)}, false},
		{SessionInfo{}, false},
	} {
		if got := c.si.Live(now); got != c.live {
			t.Errorf("%+v.Live = %v, want %v", c.si, got, c.live)
		}
	}
}

// TestDigestNamesOldestPendingTodo: meta.oldest_todo_id is the pending todo
// created first, whatever the order the store returned them in; on equal
// creation times the smaller id wins (design: Digest names the oldest todo).
func TestDigestNamesOldestPendingTodo(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		pend []store.PendingTodo
		want string
		age  string
	}{
		{"one", []store.PendingTodo{{ID: "t1", Queue: "q", CreatedAt: now.Add(-90 * time.Second)}}, "t1", "1m"},
		{"oldest last", []store.PendingTodo{
			{ID: "t1", Queue: "q", CreatedAt: now.Add(-time.Minute)},
			{ID: "t2", Queue: "r", CreatedAt: now.Add(-3 * time.Hour)},
			{ID: "t3", Queue: "q", CreatedAt: now.Add(-2 * time.Hour)},
		}, "t2", "3h00m"},
		{"tie takes the smaller id", []store.PendingTodo{
			{ID: "t9", Queue: "q", CreatedAt: now.Add(-time.Hour)},
			{ID: "t4", Queue: "q", CreatedAt: now.Add(-time.Hour)},
			{ID: "t5", Queue: "q", CreatedAt: now.Add(-time.Minute)},
		}, "t4", "1h00m"},
		{"created after now (clock skew) ages 0s", []store.PendingTodo{{ID: "t1", Queue: "q", CreatedAt: now.Add(time.Second)}}, "t1", "0s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := BuildDigest(c.pend, ReasonReconnect, now)
			if m.Meta["oldest_todo_id"] != c.want {
				t.Fatalf("oldest_todo_id = %q, want %q (meta %v)", m.Meta["oldest_todo_id"], c.want, m.Meta)
			}
			if _, ok := m.Meta["todo_id"]; ok {
				t.Fatalf("a digest carries no todo_id: %v", m.Meta)
			}
			for _, part := range []string{"oldest waiting " + c.age + " is todo " + c.want, `claim {"todo_id":"` + c.want + `"}`, "claim_next {}"} {
				if !strings.Contains(m.Content, part) {
					t.Fatalf("content %q lacks %q", m.Content, part)
				}
			}
		})
	}
}

// pendingStore answers PendingDoorbellTodos with one todo and records
// digest marks; the rest of the port is not used by Digest.
type pendingStore struct {
	Store
	marked int
}

func (s *pendingStore) PendingDoorbellTodos(context.Context, store.PendingParams) ([]store.PendingTodo, error) {
	return []store.PendingTodo{{ID: "t1", Queue: "q", CreatedAt: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}}, nil
}

func (s *pendingStore) MarkDigestRung(context.Context, store.MarkDigestParams) (int, error) {
	s.marked++
	return 1, nil
}

// TestDigestOnlyWhileIn: a digest whose transition to in is handled after
// the agent went out again is not sent; while in it is (design: Digest on
// return).
func TestDigestOnlyWhileIn(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	bs := bus.NewLocal()
	ev := evaluator.New(evaluator.Config{Bus: bs, Clock: clock, Log: log})
	st := &pendingStore{}
	d := New(Config{Bus: bs, Store: st, Presence: ev, Clock: clock, Log: log})
	d.SetSessionHub(oneSessionHub{})
	out := domain.Agent{ID: "agent-out", Handle: "out", Active: true, Presence: domain.PresenceColumns{Override: "out", Seen: "out"}}
	in := domain.Agent{ID: "agent-in", Handle: "in", Active: true, Presence: domain.PresenceColumns{Seen: "in"}}
	ev.Upsert(&out, "")
	ev.Upsert(&in, "")
	if d.Digest(t.Context(), out.ID, evaluator.ReasonShiftStart) || st.marked != 0 {
		t.Fatalf("a digest was sent to an agent that is out (marks %d)", st.marked)
	}
	if !d.Digest(t.Context(), in.ID, evaluator.ReasonShiftStart) || st.marked != 1 {
		t.Fatalf("no digest for an agent that is in (marks %d)", st.marked)
	}
}
