package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	mcpclient "github.com/mark3labs/mcp-go/client"

	"github.com/rollcall/rollcall/internal/testkit/harness"
)

// session is one MCP client session (harness.DialMCPVia) with its GET
// notification stream open.
type session struct {
	c *mcpclient.Client
}

func openSession(ctx context.Context, mcpURL, token string, onBell func(harness.Bell)) (*session, error) {
	c, _, err := harness.DialMCPVia(ctx, nil, nil, mcpURL, token, "rollcall-load", onBell)
	if err != nil {
		return nil, err
	}
	return &session{c: c}, nil
}

func init() {
	register(mode{name: "doorbell", help: "latency from todo push (REST) to the doorbell read by a connected MCP client", run: runDoorbell})
	register(mode{name: "sessions", help: "server memory per idle MCP session with an open notification stream", run: runSessions})
}

func runDoorbell(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("doorbell", flag.ExitOnError)
	tf := addTargetFlags(fs, "rollcall binary to start (fresh store)", "server URL when not spawning", false)
	agents := fs.Int("agents", 20, "agents, one connected session each")
	n := fs.Int("n", 2000, "todos to push (sequentially)")
	fs.Parse(args)

	t, err := tf.open(ctx)
	if err != nil {
		return err
	}
	defer t.stop()
	run := time.Now().UnixNano()
	type agent struct {
		handle string
		got    chan string
		s      *session
	}
	as := make([]*agent, *agents)
	for i := range as {
		v, err := t.vend(ctx, fmt.Sprintf("load-%d-%d", run, i), []string{"q"})
		if err != nil {
			return err
		}
		a := &agent{handle: v.Agent.Handle, got: make(chan string, 16)}
		a.s, err = openSession(ctx, v.MCPURL, v.Credential, func(b harness.Bell) { a.got <- b.TodoID() })
		if err != nil {
			return err
		}
		defer a.s.c.Close()
		as[i] = a
	}
	lat := make([]time.Duration, 0, *n)
	deadline := time.Now().Add(10 * time.Minute)
	for i := 0; i < *n && time.Now().Before(deadline); i++ {
		a := as[i%len(as)]
		var td struct {
			ID string `json:"id"`
		}
		start := time.Now()
		if err := t.rest(ctx, "POST", "/v1/agents/"+a.handle+"/todos", map[string]any{"queue": "q", "title": fmt.Sprintf("load %d", i)}, &td); err != nil {
			return err
		}
		select {
		case id := <-a.got:
			if id != td.ID {
				return fmt.Errorf("doorbell for %s, pushed %s", id, td.ID)
			}
			lat = append(lat, time.Since(start))
		case <-time.After(10 * time.Second):
			return fmt.Errorf("no doorbell for todo %s within 10 s", td.ID)
		}
	}
	p50, p99, mx := percentiles(lat)
	fmt.Printf("doorbell: %d todos over %d agents: push→notification p50 %s p99 %s max %s\n", len(lat), len(as), p50, p99, mx)
	return nil
}

func runSessions(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sessions", flag.ExitOnError)
	tf := addTargetFlags(fs, "rollcall binary to start (required: memory is read from /proc)", "", false)
	n := fs.Int("n", 5000, "sessions to open")
	agents := fs.Int("agents", 200, "agents to spread the sessions over (the server allows 32 sessions per agent)")
	fs.Parse(args)
	if *tf.bin == "" {
		return fmt.Errorf("-spawn is required")
	}
	t, err := tf.open(ctx)
	if err != nil {
		return err
	}
	defer t.stop()
	run := time.Now().UnixNano()
	type cred struct{ url, token string }
	creds := make([]cred, *agents)
	for i := range creds {
		v, err := t.vend(ctx, fmt.Sprintf("mem-%d-%d", run, i), []string{"q"})
		if err != nil {
			return err
		}
		creds[i] = cred{v.MCPURL, v.Credential}
	}
	// Warm up: one session, then measure the baseline.
	warm, err := openSession(ctx, creds[0].url, creds[0].token, nil)
	if err != nil {
		return err
	}
	defer warm.c.Close()
	runtime.GC()
	time.Sleep(500 * time.Millisecond) // let the server settle before the baseline (measurement, not correctness)
	before, err := harness.RSSKiB(t.PID)
	if err != nil {
		return err
	}
	var opened atomic.Int64
	sessions := make([]*session, *n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	var firstErr atomic.Value
	for i := 0; i < *n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c := creds[i%len(creds)]
			s, err := openSession(ctx, c.url, c.token, nil)
			if err != nil {
				firstErr.CompareAndSwap(nil, err)
				return
			}
			sessions[i] = s
			opened.Add(1)
		}(i)
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return fmt.Errorf("opening sessions: %v (opened %d)", e, opened.Load())
	}
	time.Sleep(2 * time.Second) // let streams attach and buffers settle (measurement, not correctness)
	after, err := harness.RSSKiB(t.PID)
	if err != nil {
		return err
	}
	per := float64(after-before) * 1024 / float64(opened.Load())
	fmt.Printf("sessions: %d idle sessions with open streams: server RSS %d KiB → %d KiB, %.1f KiB per session\n", opened.Load(), before, after, per/1024)
	for _, s := range sessions {
		if s != nil {
			s.c.Close()
		}
	}
	return nil
}
