package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

func init() {
	register(mode{"boundary", "lateness of one shift start shared by -n agents, on two spawned servers on one PostgreSQL", runBoundary})
}

// runBoundary spawns two `rollcall serve` on the PostgreSQL database -store
// (create it first; it must be empty), vends -n agents on the first, gives
// them all one shift starting at the next minute boundary at least 30 s
// away, reads GET /v1/events on both servers and reports, per server, how
// late after the boundary each agent's agent.presence_transition to in
// arrived (design: Shift boundaries on time).
func runBoundary(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("boundary", flag.ContinueOnError)
	bin := fs.String("spawn", "", "rollcall binary to spawn twice")
	storeURL := fs.String("store", "", "PostgreSQL URL of an empty database")
	n := fs.Int("n", 1000, "agents on the shift")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || !strings.HasPrefix(*storeURL, "postgres") {
		return fmt.Errorf("give -spawn <rollcall binary> and -store postgres://…")
	}
	var servers []*target
	for range 2 {
		t, err := spawnOrAttach(ctx, *bin, *storeURL, "", "")
		if err != nil {
			return err
		}
		defer t.stop()
		servers = append(servers, t)
	}
	boundary := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	if time.Until(boundary) < 30*time.Second {
		boundary = boundary.Add(time.Minute)
	}
	shift := boundary.Format("15:04") + "-" + boundary.Add(8*time.Hour).Format("15:04")
	started := time.Now()
	for i := range *n {
		h := fmt.Sprintf("b%05d", i)
		if _, err := servers[0].vend(ctx, h, []string{"q"}); err != nil {
			return err
		}
		if err := servers[0].rest(ctx, "PUT", "/v1/agents/"+h+"/shift", map[string]any{"shift": shift}, nil); err != nil {
			return err
		}
	}
	fmt.Printf("%d agents vended with shift %s in %s; the boundary is in %s\n", *n, shift, time.Since(started).Round(time.Millisecond), time.Until(boundary).Round(time.Second))
	if time.Until(boundary) < 5*time.Second {
		return fmt.Errorf("vending took too long: the boundary is too close; use fewer agents")
	}
	rctx, cancel := context.WithDeadline(ctx, boundary.Add(45*time.Second))
	defer cancel()
	recs := make([]*transitionLog, len(servers))
	var wg sync.WaitGroup
	for i, t := range servers {
		recs[i] = &transitionLog{at: map[string]time.Time{}, want: *n, done: make(chan struct{})}
		ready := make(chan struct{})
		wg.Go(func() { recs[i].run(rctx, t, ready) })
		<-ready
	}
	for _, r := range recs {
		select {
		case <-r.done:
		case <-rctx.Done():
		}
	}
	cancel()
	wg.Wait()
	for i, r := range recs {
		r.mu.Lock()
		var late []time.Duration
		for _, at := range r.at {
			late = append(late, at.Sub(boundary))
		}
		r.mu.Unlock()
		if len(late) == 0 {
			fmt.Printf("server %d: no transition to in within 45 s of the boundary\n", i+1)
			continue
		}
		p50, p99, mx := percentiles(late)
		fmt.Printf("server %d: %d of %d transitions to in; lateness after the boundary p50 %s, p99 %s, max %s\n",
			i+1, len(late), *n, p50.Round(time.Millisecond), p99.Round(time.Millisecond), mx.Round(time.Millisecond))
	}
	return nil
}

// transitionLog reads GET /v1/events and records when each agent's first
// agent.presence_transition to in arrived.
type transitionLog struct {
	mu   sync.Mutex
	at   map[string]time.Time // by handle
	want int
	done chan struct{}
}

func (l *transitionLog) run(ctx context.Context, t *target, ready chan<- struct{}) {
	var once sync.Once
	signal := func() { once.Do(func() { close(ready) }) }
	defer signal()
	req, _ := http.NewRequestWithContext(ctx, "GET", t.URL+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+t.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	signal()
	readEvents(resp.Body, func(kind string, data []byte) {
		if kind != "agent.presence_transition" {
			return
		}
		now := time.Now()
		var ev struct {
			Data struct {
				Agent    string `json:"agent"`
				Presence string `json:"presence"`
			} `json:"data"`
		}
		if json.Unmarshal(data, &ev) != nil || ev.Data.Presence != "in" {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if _, seen := l.at[ev.Data.Agent]; !seen {
			l.at[ev.Data.Agent] = now
			if len(l.at) == l.want {
				close(l.done)
			}
		}
	})
}
