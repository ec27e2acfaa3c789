package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// Systems, as named in the table.
const (
	sysRollcall   = "Rollcall MCP"
	sysUniSSE     = "Centrifugo uni_sse"
	sysWebSocket  = "Centrifugo WebSocket"
	sysRollcallPG = "Rollcall PostgreSQL"
	sysRollcallSQ = "Rollcall SQLite"
	sysRiver      = "River"
)

// sessionsPerAgent spreads idle MCP sessions over agents below the server's
// per-agent session limit (32).
const sessionsPerAgent = 25

// env is what every workload needs: binaries, the PostgreSQL server, where
// server logs go.
type env struct {
	rollcallBin   string
	centrifugoBin string
	pgURL         string
	logw          io.Writer
	sources       int    // loopback source addresses for idle connections
	queueMode     string // Rollcall queue workers: queueModeClaim or queueModeNext
	queueN        int    // Rollcall queue workers: claim_next's (and next's) n; <= 1 = absent
	queueIdle     string // Rollcall queue workers on an empty queue: queueIdlePoll or queueIdleDoorbell
}

// What a Rollcall queue worker does when its claim found nothing
// (-rollcall-queue-idle).
const (
	queueIdlePoll     = "poll"     // claim again after 1 ms
	queueIdleDoorbell = "doorbell" // claim again on the session's next doorbell, or after queueIdleMax
	queueIdleMax      = 50 * time.Millisecond
)

// The Rollcall queue workers' loops (-rollcall-queue).
const (
	queueModeClaim = "claim" // claim_next, then complete: two calls and two commits a todo
	queueModeNext  = "next"  // complete with next: one call and one commit a todo
)

// idList is a JSON list of todos, of which the harness keeps the ids.
type idList []struct {
	ID string `json:"id"`
}

func (l idList) ids() []string {
	ids := make([]string, 0, len(l))
	for _, td := range l {
		ids = append(ids, td.ID)
	}
	return ids
}

// claimedIDs reads claim_next's answer: one todo, or with n {"todos": [...]}.
func claimedIDs(text string, batch bool) ([]string, error) {
	if batch {
		var l struct {
			Todos idList `json:"todos"`
		}
		if err := json.Unmarshal([]byte(text), &l); err != nil {
			return nil, fmt.Errorf("claim_next answered %q", text)
		}
		return l.Todos.ids(), nil
	}
	var td struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(text), &td); err != nil || td.ID == "" {
		return nil, fmt.Errorf("claim_next answered %q", text)
	}
	return []string{td.ID}, nil
}

// nextIDs reads the todos complete with next claimed: {"todo", "next": [...]}.
func nextIDs(text string) ([]string, error) {
	var r struct {
		Next idList `json:"next"`
	}
	if err := json.Unmarshal([]byte(text), &r); err != nil || r.Next == nil {
		return nil, fmt.Errorf("complete with next answered %q", text)
	}
	return r.Next.ids(), nil
}

// idleSet is n idle connections to one system plus, optionally, one target
// connection whose pushes are reported to f.
type idleSet struct {
	pid   int
	conns []peerConn
	pool  *clientPool
	stop  func()
	// push sends push number seq to the target connection.
	push func(ctx context.Context, seq int) (string, error)
}

func (s *idleSet) close() {
	for _, c := range s.conns {
		if c != nil {
			c.close()
		}
	}
	s.pool.close()
	s.stop()
}

// connectAll opens n connections, 32 at a time, with open(i).
func connectAll(ctx context.Context, n int, open func(i int) (peerConn, error)) ([]peerConn, error) {
	conns := make([]peerConn, n)
	var wg sync.WaitGroup
	var first atomic.Value
	sem := make(chan struct{}, 32)
	for i := range n {
		if first.Load() != nil || ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := open(i)
			if err != nil {
				first.CompareAndSwap(nil, fmt.Errorf("connection %d: %w", i, err))
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		for _, c := range conns {
			if c != nil {
				c.close()
			}
		}
		return nil, e.(error)
	}
	return conns, ctx.Err()
}

// startIdle starts system fresh and opens a warm-up connection (the target,
// when f is set), then reads the server's RSS and descriptors; after opens n
// idle connections and waits until the server holds them all. It returns the
// RSS before and after (KiB).
func startIdle(ctx context.Context, e env, system string, n int, f func(id string, at time.Time)) (*idleSet, int64, int64, error) {
	set := &idleSet{pool: newClientPool(e.sources)}
	var open func(i int) (peerConn, error)
	var warm peerConn
	switch system {
	case sysRollcall:
		r, err := startRollcall(ctx, e.rollcallBin, "", e.logw)
		if err != nil {
			return nil, 0, 0, err
		}
		set.pid, set.stop = r.PID(), r.stop
		target, err := r.vend(ctx, "target")
		if err != nil {
			r.stop()
			return nil, 0, 0, err
		}
		agents, err := r.vendMany(ctx, "idle", (n+sessionsPerAgent-1)/sessionsPerAgent)
		if err != nil {
			r.stop()
			return nil, 0, 0, err
		}
		s, err := openMCP(ctx, set.pool.get(0), target, f)
		if err != nil {
			r.stop()
			return nil, 0, 0, fmt.Errorf("target session: %w", err)
		}
		warm = s
		set.push = func(ctx context.Context, seq int) (string, error) {
			return r.push(ctx, "target", fmt.Sprintf("bench %d", seq))
		}
		open = func(i int) (peerConn, error) {
			return openMCP(ctx, set.pool.get(i), agents[i/sessionsPerAgent], nil)
		}
	case sysUniSSE, sysWebSocket:
		c, err := startCentrifugo(ctx, e.centrifugoBin, e.logw)
		if err != nil {
			return nil, 0, 0, err
		}
		set.pid, set.stop = c.PID(), c.stop
		dial := func(ctx context.Context, hc *http.Client, user, ch string, f onPub) (peerConn, error) {
			if system == sysWebSocket {
				return c.dialWS(ctx, hc, user, ch, f)
			}
			return c.dialSSE(ctx, hc, user, ch, f)
		}
		var onP onPub
		if f != nil {
			onP = func(seq int, at time.Time) { f(fmt.Sprint(seq), at) }
		}
		w, err := dial(ctx, set.pool.get(0), "target", "target", onP)
		if err != nil {
			c.stop()
			return nil, 0, 0, fmt.Errorf("target connection: %w", err)
		}
		warm = w
		set.push = func(ctx context.Context, seq int) (string, error) {
			return fmt.Sprint(seq), c.publish(ctx, "target", pushMsg{Seq: seq})
		}
		open = func(i int) (peerConn, error) {
			u := fmt.Sprintf("u%d", i)
			return dial(ctx, set.pool.get(i), u, u, nil)
		}
	default:
		return nil, 0, 0, fmt.Errorf("unknown system %q", system)
	}
	set.conns = append(set.conns, warm)
	settle(ctx, time.Second)
	before, err := harness.RSSKiB(set.pid)
	if err != nil {
		set.close()
		return nil, 0, 0, err
	}
	fds, err := openFDs(set.pid)
	if err != nil {
		set.close()
		return nil, 0, 0, err
	}
	conns, err := connectAll(ctx, n, open)
	if err != nil {
		set.close()
		return nil, 0, 0, fmt.Errorf("%s: %w", system, err)
	}
	set.conns = append(set.conns, conns...)
	if err := waitFDs(ctx, set.pid, fds+n, 2*time.Minute); err != nil {
		set.close()
		return nil, 0, 0, fmt.Errorf("%s: %w", system, err)
	}
	settle(ctx, 3*time.Second)
	after, err := harness.RSSKiB(set.pid)
	if err != nil {
		set.close()
		return nil, 0, 0, err
	}
	return set, before, after, nil
}

// measureRSS is workload 1: server RSS per idle connection (KiB) at n
// connections.
func measureRSS(ctx context.Context, e env, system string, n int) (float64, error) {
	set, before, after, err := startIdle(ctx, e, system, n, nil)
	if err != nil {
		return 0, err
	}
	defer set.close()
	return float64(after-before) / float64(n), nil
}

// measurePush is workload 2: m idle connections plus one target, pushes
// sequential pushes to the target; it returns p50 and p99 (ms) from the start
// of the push request to the moment the target's client has read it.
func measurePush(ctx context.Context, e env, system string, m, pushes int) (p50, p99 float64, err error) {
	type got struct {
		id string
		at time.Time
	}
	recv := make(chan got, 64)
	set, _, _, err := startIdle(ctx, e, system, m, func(id string, at time.Time) {
		select {
		case recv <- got{id, at}:
		default:
		}
	})
	if err != nil {
		return 0, 0, err
	}
	defer set.close()
	lat := make([]time.Duration, 0, pushes)
	for i := 1; i <= pushes; i++ {
		start := time.Now()
		id, err := set.push(ctx, i)
		if err != nil {
			return 0, 0, fmt.Errorf("%s push %d: %w", system, i, err)
		}
		timeout := time.After(10 * time.Second)
	wait:
		for {
			select {
			case g := <-recv:
				if g.id == id { // a re-ring of an earlier push is skipped
					lat = append(lat, g.at.Sub(start))
					break wait
				}
			case <-timeout:
				return 0, 0, fmt.Errorf("%s: push %d (%s) not read by the client within 10 s", system, i, id)
			case <-ctx.Done():
				return 0, 0, ctx.Err()
			}
		}
	}
	a, b := percentiles(lat)
	return ms(a), ms(b), nil
}

// measureRollcallQueue is workload 3 on Rollcall: k producers push todos
// (REST) to one agent, w MCP sessions of that agent loop claim_next +
// complete; it returns acknowledged completes per second over d (after warm).
func measureRollcallQueue(ctx context.Context, e env, pg bool, k, w int, warm, d time.Duration) (float64, error) {
	pgURL := ""
	if pg {
		pgURL = e.pgURL
	}
	r, err := startRollcall(ctx, e.rollcallBin, pgURL, e.logw)
	if err != nil {
		return 0, err
	}
	defer r.stop()
	a, err := r.vend(ctx, "worker")
	if err != nil {
		return 0, err
	}
	pool := newClientPool(1)
	defer pool.close()
	sessions := make([]*mcpSession, w)
	bells := make([]chan struct{}, w) // a doorbell arrived on session i
	for i := range sessions {
		bells[i] = make(chan struct{}, 1)
		var onBell func(string, time.Time)
		if e.queueIdle == queueIdleDoorbell {
			onBell = func(string, time.Time) {
				select {
				case bells[i] <- struct{}{}:
				default:
				}
			}
		}
		if sessions[i], err = openMCP(ctx, pool.get(0), a, onBell); err != nil {
			return 0, err
		}
		defer sessions[i].close()
	}
	// idle waits after a claim found nothing: 1 ms (as River's
	// FetchCooldown), or with -rollcall-queue-idle doorbell until the
	// session's next doorbell, at most queueIdleMax.
	idle := func(i int) {
		if e.queueIdle != queueIdleDoorbell {
			time.Sleep(time.Millisecond)
			return
		}
		t := time.NewTimer(queueIdleMax)
		defer t.Stop()
		select {
		case <-bells[i]:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	end := time.Now().Add(warm + d)
	var counting atomic.Bool
	var done atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	fail := func(err error) { first.CompareAndSwap(nil, err) }
	for p := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end) && first.Load() == nil; i++ {
				if _, err := r.push(ctx, "worker", fmt.Sprintf("job %d-%d", p, i)); err != nil {
					fail(fmt.Errorf("push: %w", err))
					return
				}
			}
		}()
	}
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []string // todos claimed and not completed yet, oldest first
			for time.Now().Before(end) && first.Load() == nil {
				if len(held) == 0 {
					args := map[string]any{"queue": "q"}
					if e.queueN > 1 {
						args["n"] = e.queueN
					}
					text, err := s.call(ctx, "claim_next", args)
					if err == nil {
						held, err = claimedIDs(text, e.queueN > 1)
					}
					if notFound(err) || err == nil && len(held) == 0 {
						idle(i) // empty queue: poll again after 1 ms or the next doorbell
						continue
					}
					if err != nil {
						fail(fmt.Errorf("claim_next: %w", err))
						return
					}
				}
				id := held[0]
				held = held[1:]
				args := map[string]any{"todo_id": id}
				next := e.queueMode == queueModeNext && len(held) == 0
				if next {
					// complete with next (design: Complete and claim the next).
					nextArgs := map[string]any{"queue": "q"}
					if e.queueN > 1 {
						nextArgs["n"] = e.queueN
					}
					args["next"] = nextArgs
				}
				text, err := s.call(ctx, "complete", args)
				if err == nil && next {
					held, err = nextIDs(text)
				}
				if err != nil {
					fail(fmt.Errorf("complete: %w", err))
					return
				}
				if counting.Load() {
					done.Add(1)
				}
			}
		}()
	}
	settle(ctx, warm)
	counting.Store(true)
	t0 := time.Now()
	settle(ctx, d)
	counting.Store(false)
	elapsed := time.Since(t0)
	n := done.Load()
	wg.Wait()
	if e := first.Load(); e != nil {
		return 0, e.(error)
	}
	return float64(n) / elapsed.Seconds(), nil
}

// percentiles returns p50 and p99 of ds (sorted in place).
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return at(0.50), at(0.99)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
