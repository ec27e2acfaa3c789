package testkit

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Event is one event of GET /v1/events and when the test read it.
type Event struct {
	ID   string    `json:"id"`
	Kind string    `json:"kind"`
	At   time.Time `json:"at"` // the publishing instance's clock
	Data struct {
		Agent    string `json:"agent"`
		State    string `json:"state"`
		Presence string `json:"presence"`
		Reason   string `json:"reason"`
	} `json:"data"`
	Read time.Time `json:"-"`
}

// Events records every event of one GET /v1/events subscription.
type Events struct {
	mu  sync.Mutex
	all []Event
}

// Subscribe opens GET /v1/events on base with token (name is how failures
// name the server) and records its events until the test ends; the
// subscription reconnects with Last-Event-ID should the stream end.
func Subscribe(t testing.TB, name, base, token string) *Events {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e := &Events{}
	connected := make(chan struct{})
	go func() {
		last := ""
		var once sync.Once
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			if last != "" {
				req.Header.Set("Last-Event-ID", last)
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil && resp.StatusCode == 200 {
				once.Do(func() { close(connected) })
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				for sc.Scan() {
					line := sc.Text()
					if !strings.HasPrefix(line, "data:") {
						continue
					}
					var ev Event
					if json.Unmarshal([]byte(strings.TrimSpace(line[5:])), &ev) != nil {
						continue
					}
					ev.Read = time.Now()
					if ev.ID != "" {
						last = ev.ID
					}
					e.mu.Lock()
					e.all = append(e.all, ev)
					e.mu.Unlock()
				}
			}
			if resp != nil {
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(Wait):
		t.Fatalf("GET /v1/events on %s did not connect", name)
	}
	return e
}

// Len is how many events came so far.
func (e *Events) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.all)
}

// Find returns the first event that satisfies ok.
func (e *Events) Find(ok func(Event) bool) (Event, bool) { return e.findFrom(0, ok) }

func (e *Events) findFrom(from int, ok func(Event) bool) (Event, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.all[min(from, len(e.all)):] {
		if ok(ev) {
			return ev, true
		}
	}
	return Event{}, false
}

// Last returns the newest event that satisfies ok.
func (e *Events) Last(ok func(Event) bool) Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.all) - 1; i >= 0; i-- {
		if ok(e.all[i]) {
			return e.all[i]
		}
	}
	return Event{}
}

// Count is how many events satisfy ok.
func (e *Events) Count(ok func(Event) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ok(ev) {
			n++
		}
	}
	return n
}

// Within waits up to d for an event that satisfies ok.
func (e *Events) Within(d time.Duration, ok func(Event) bool) (Event, bool) {
	return e.WithinFrom(0, d, ok)
}

// WithinFrom is Within for the events after the first from (a Len taken
// earlier).
func (e *Events) WithinFrom(from int, d time.Duration, ok func(Event) bool) (Event, bool) {
	deadline := time.Now().Add(d)
	for {
		if ev, found := e.findFrom(from, ok); found {
			return ev, true
		}
		if time.Now().After(deadline) {
			return Event{}, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Transition matches agent's presence transition to presence ("in", "out").
func Transition(agent, presence string) func(Event) bool {
	return func(ev Event) bool {
		return ev.Kind == "agent.presence_transition" && ev.Data.Agent == agent && ev.Data.Presence == presence
	}
}

// Liveness matches agent's liveness change to state ("online", "offline", …).
func Liveness(agent, state string) func(Event) bool {
	return func(ev Event) bool {
		return ev.Kind == "agent.presence_changed" && ev.Data.Agent == agent && ev.Data.State == state
	}
}
