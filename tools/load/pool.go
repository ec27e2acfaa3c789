package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// The pool mode (design: Pools, Pool routing; docs/benchmarks.md, "Pools"):
// two `rollcall serve` instances on one PostgreSQL database, a pool of
// -members agents with half their MCP sessions on each instance, and -n
// pooled todos pushed at -rate per second alternately to both instances.
// Every member's client claims the todo it is rung for (claim by the
// doorbell's todo_id) and completes it. It reports push-start → doorbell
// read latency (p50/p95/p99/max), how many todos were rung once, more than
// once or never, claimed once or twice, the most unanswered rings one
// member had at once (rung, its claim not yet answered) and the most todos
// one member worked at once (rung, not yet completed); it fails when a todo was never
// claimed or claimed twice.
//
//	go build -o /tmp/rollcall ./cmd/rollcall
//	go run ./tools/load pool -spawn /tmp/rollcall -store 'postgres://…/<fresh db>'

func init() {
	register(mode{name: "pool", help: "pool of N members across two instances: push→doorbell latency, rings and claims per todo (must be once)", run: runPool})
}

// poolTodo is what the run learns of one pushed todo.
type poolTodo struct {
	rings, claims int
	firstBell     time.Time
}

func runPool(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("pool", flag.ExitOnError)
	bin := fs.String("spawn", "", "rollcall binary to start twice (required)")
	store := fs.String("store", "", "PostgreSQL URL of a fresh database both instances share (required)")
	members := fs.Int("members", 200, "pool members, one MCP session each, alternately on the two instances (at most 200)")
	n := fs.Int("n", 2000, "pooled todos to push (at most 100000)")
	rate := fs.Float64("rate", 200, "pushes per second, alternately to the two instances")
	settle := fs.Duration("settle", 0, "how long to wait after creating the pool before the first push")
	wait := fs.Duration("wait", 60*time.Second, "how long to wait after the last push for every todo to be claimed")
	_ = fs.Parse(args)
	if *bin == "" || !strings.HasPrefix(*store, "postgres") {
		return errors.New("-spawn and a postgres:// -store are required")
	}
	if *members < 1 || *members > 200 || *n < 1 || *n > 100000 || *rate <= 0 || *rate > 5000 {
		return errors.New("bounds: 1 ≤ members ≤ 200, 1 ≤ n ≤ 100000, 0 < rate ≤ 5000")
	}
	// Keep connections for reuse as real clients do (Claude Code's MCP
	// client, a CI job pushing todos): Go's default keeps 2 idle per host,
	// so at a few hundred requests in flight nearly every push, claim and
	// complete would open a new TCP connection, a cost of the tool.
	if tr, ok := http.DefaultTransport.(*http.Transport); ok {
		tr.MaxIdleConnsPerHost = 512
	}
	// The first instance migrates the database; the second starts after it.
	var ts [2]*target
	for i := range ts {
		t, err := spawnOrAttach(ctx, *bin, *store, "", "")
		if err != nil {
			return fmt.Errorf("instance %d: %w", i, err)
		}
		defer t.stop()
		ts[i] = t
	}
	fmt.Printf("instances %s and %s on one database\n", ts[0].URL, ts[1].URL)

	var (
		mu       sync.Mutex
		todos    = map[string]*poolTodo{} // by todo id, from bells and claims
		inflight = make([]int, *members)  // rings a member is working on (rung, not yet completed)
		maxAt    = make([]int, *members)
		unanswd  = make([]int, *members) // rings a member has not claimed yet (rung, claim not answered)
		maxUnans = make([]int, *members)
		dupBell  atomic.Int64 // a member rung again for a todo it holds
		lost     atomic.Int64 // claims answered with a tool error
		callErrs atomic.Int64
		claimed  atomic.Int64
		lastErr  atomic.Value
	)
	get := func(id string) *poolTodo {
		td := todos[id]
		if td == nil {
			td = &poolTodo{}
			todos[id] = td
		}
		return td
	}
	call := func(s *session, tool string, args map[string]any) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res, err := s.c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
		if err != nil {
			return false, err
		}
		if res.IsError {
			var text string
			for _, c := range res.Content {
				if t, ok := c.(mcp.TextContent); ok {
					text += t.Text
				}
			}
			lastErr.Store(tool + ": " + text)
		}
		return !res.IsError, nil
	}

	run := time.Now().UnixNano()
	handles := make([]string, *members)
	sessions := make([]*session, *members)
	holding := make([]map[string]bool, *members)
	fmt.Printf("vending %d members …\n", *members)
	began := time.Now()
	err := parallel(ctx, *members, 8, func(i int) error {
		v, err := ts[0].vend(ctx, fmt.Sprintf("pool-%d-%d", run, i), []string{"q"})
		if err != nil {
			return err
		}
		handles[i] = v.Agent.Handle
		holding[i] = map[string]bool{}
		mcpURL := v.MCPURL
		if i%2 == 1 { // the other half on the second instance
			mcpURL = ts[1].URL + strings.TrimPrefix(v.MCPURL, ts[0].URL)
		}
		var s *session
		ready := make(chan struct{})
		onBell := func(b harness.Bell) {
			id := b.TodoID()
			if id == "" { // a digest
				return
			}
			<-ready
			mu.Lock()
			td := get(id)
			td.rings++
			if td.firstBell.IsZero() {
				td.firstBell = b.Read
			}
			if holding[i][id] {
				dupBell.Add(1)
				mu.Unlock()
				return
			}
			holding[i][id] = true
			inflight[i]++
			maxAt[i] = max(maxAt[i], inflight[i])
			unanswd[i]++
			maxUnans[i] = max(maxUnans[i], unanswd[i])
			mu.Unlock()
			go func() {
				defer func() {
					mu.Lock()
					inflight[i]--
					delete(holding[i], id)
					mu.Unlock()
				}()
				ok, err := call(s, "claim", map[string]any{"todo_id": id})
				mu.Lock()
				unanswd[i]--
				mu.Unlock()
				if err != nil {
					callErrs.Add(1)
					lastErr.Store("claim: " + err.Error())
					return
				}
				if !ok {
					lost.Add(1)
					return
				}
				mu.Lock()
				get(id).claims++
				mu.Unlock()
				claimed.Add(1)
				if ok, err := call(s, "complete", map[string]any{"todo_id": id}); err != nil || !ok {
					callErrs.Add(1)
					if err != nil {
						lastErr.Store("complete: " + err.Error())
					}
				}
			}()
		}
		s, err = openSession(ctx, mcpURL, v.Credential, onBell)
		close(ready)
		if err != nil {
			return err
		}
		sessions[i] = s
		return nil
	})
	defer func() {
		for _, s := range sessions {
			if s != nil {
				s.c.Close()
			}
		}
	}()
	if err != nil {
		return err
	}
	fmt.Printf("vended and connected in %s\n", time.Since(began).Round(time.Millisecond))
	var pool struct {
		ID string `json:"id"`
	}
	if err := ts[0].rest(ctx, "POST", "/v1/pools", map[string]any{"name": "loadpool", "queues": []string{"q"}, "members": handles}, &pool); err != nil {
		return fmt.Errorf("create pool: %w", err)
	}
	time.Sleep(*settle) // measurement: let the pool's creation pass before the first push

	// Push at -rate, each push in its own goroutine so a slow answer does
	// not hold back the next; latency is measured from each push's start.
	ids := make([]string, *n)
	starts := make([]time.Time, *n)
	answered := make([]time.Duration, *n) // push start → REST answer
	var pushErrs atomic.Int64
	var wg sync.WaitGroup
	every := time.Duration(float64(time.Second) / *rate)
	began = time.Now()
	for i := 0; i < *n; i++ {
		if d := time.Until(began.Add(time.Duration(i) * every)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		wg.Go(func() {
			var td struct {
				ID string `json:"id"`
			}
			starts[i] = time.Now()
			if err := ts[i%2].rest(ctx, "POST", "/v1/pools/loadpool/todos", map[string]any{"queue": "q", "title": fmt.Sprintf("pool load %d", i)}, &td); err != nil {
				pushErrs.Add(1)
				lastErr.Store("push: " + err.Error())
				return
			}
			ids[i] = td.ID
			answered[i] = time.Since(starts[i])
		})
	}
	wg.Wait()
	pushed := time.Since(began)
	fmt.Printf("pushed %d in %s (%.0f/s), %d push errors\n", *n, pushed.Round(time.Millisecond), float64(*n)/pushed.Seconds(), pushErrs.Load())
	want := int64(*n) - pushErrs.Load()
	deadline := time.Now().Add(*wait)
	for claimed.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond) // polling a counter the bell handlers raise
	}
	time.Sleep(2 * time.Second) // late second rings or claims still count (measurement)

	mu.Lock()
	defer mu.Unlock()
	var lat, pushLat []time.Duration
	var rungOnce, rungMore, neverRung, claimedOnce, claimedTwice, neverClaimed int
	for i, id := range ids {
		if id == "" {
			continue
		}
		pushLat = append(pushLat, answered[i])
		td := todos[id]
		if td == nil || td.rings == 0 {
			neverRung++
			neverClaimed++
			continue
		}
		lat = append(lat, td.firstBell.Sub(starts[i]))
		switch {
		case td.rings == 1:
			rungOnce++
		default:
			rungMore++
		}
		switch td.claims {
		case 0:
			neverClaimed++
		case 1:
			claimedOnce++
		default:
			claimedTwice++
		}
	}
	maxConc, membersOver1, membersRung, maxRung, rungTwice := 0, 0, 0, 0, 0
	for i := range maxAt {
		maxConc = max(maxConc, maxAt[i])
		maxRung = max(maxRung, maxUnans[i])
		if maxUnans[i] > 1 {
			rungTwice++
		}
		if maxAt[i] > 1 {
			membersOver1++
		}
		if maxAt[i] > 0 {
			membersRung++
		}
	}
	p50, p95, p99, mx := pcts(lat)
	fmt.Printf("pool: %d members (%d/%d per instance), %d todos at %.0f/s alternately to 2 instances\n", *members, (*members+1)/2, *members/2, *n, *rate)
	fmt.Printf("push→doorbell: p50 %s p95 %s p99 %s max %s (%d todos rung)\n", p50, p95, p99, mx, len(lat))
	a50, a95, a99, amx := pcts(pushLat)
	fmt.Printf("push answered: p50 %s p95 %s p99 %s max %s\n", a50, a95, a99, amx)
	// Where in the run the time went: a backlog that builds shows as
	// growing seconds, a stall as one slow second.
	perSec := int(max(1, *rate))
	var secs []string
	for from := 0; from < len(ids); from += perSec {
		var d []time.Duration
		for i := from; i < min(from+perSec, len(ids)); i++ {
			if ids[i] != "" {
				d = append(d, answered[i])
			}
		}
		s50, _, _, smx := pcts(d)
		secs = append(secs, fmt.Sprintf("%s/%s", s50.Round(time.Millisecond), smx.Round(time.Millisecond)))
	}
	fmt.Printf("push answered by second of the schedule (p50/max): %s\n", strings.Join(secs, " "))
	fmt.Printf("rings: %d rung once, %d rung more than once, %d never rung; %d repeated bells to the member holding the todo\n", rungOnce, rungMore, neverRung, dupBell.Load())
	fmt.Printf("claims: %d claimed once, %d claimed twice or more, %d never claimed; %d claims refused, %d call errors\n", claimedOnce, claimedTwice, neverClaimed, lost.Load(), callErrs.Load())
	fmt.Printf("members: %d rung; most unanswered rings one member had at once %d (%d members rung twice at once); most todos one member worked at once (rung, not yet completed) %d (%d members with more than one)\n", membersRung, maxRung, rungTwice, maxConc, membersOver1)
	for i, t := range ts { // the store's group commits of the audited pushes (design: Group commit)
		if v, err := metricValues(ctx, t.URL, "rollcall_store_commit_batch_size_count", "rollcall_store_commit_batch_size_sum"); err == nil && v[0] > 0 {
			fmt.Printf("instance %d: %.0f group commits of %.0f audited writes (%.2f a commit)\n", i, v[0], v[1], v[1]/v[0])
		}
	}
	if e := lastErr.Load(); e != nil {
		fmt.Printf("last error: %s\n", e)
	}
	if neverClaimed > 0 || claimedTwice > 0 || pushErrs.Load() > 0 {
		return fmt.Errorf("%d todos never claimed, %d claimed twice, %d push errors", neverClaimed, claimedTwice, pushErrs.Load())
	}
	return nil
}

// pcts returns p50, p95, p99 and max of ds (sorted in place by percentiles).
func pcts(ds []time.Duration) (p50, p95, p99, mx time.Duration) {
	p50, p99, mx = percentiles(ds)
	if len(ds) > 0 {
		p95 = ds[min(len(ds)-1, int(0.95*float64(len(ds))))]
	}
	return p50, p95, p99, mx
}
