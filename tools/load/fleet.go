package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
)

// The fleet mode (design: Liveness first, Billing-mode audit;
// docs/benchmarks.md, "Load never makes a
// healthy agent offline"): N agents on the WebSocket gateway, each sending
// a full heartbeat (member agent) every -interval as a real adapter does —
// starting at once after identify, so the first reports (audited writes)
// of the whole fleet arrive together — plus -rest agents heartbeating over
// REST every -interval, for -duration, against a server spawned with
// agent.presence_timeout -timeout and sync.heartbeat_interval -interval.
// Every agent keeps sending for the whole run, so the run must end with
// zero closes (4009 or any other) and zero offline events (GET
// /v1/events). It reports the gateway ack and REST response latency
// (p50/p99/max), heartbeats per second, 4009 and other closes and offline
// events, and fails when any of these counts is not zero.
//
//	go build -o /tmp/rollcall ./cmd/rollcall
//	go run ./tools/load fleet -spawn /tmp/rollcall                # SQLite
//	go run ./tools/load fleet -spawn /tmp/rollcall -store 'postgres://…'

func init() {
	register(mode{name: "fleet", help: "N gateway agents + REST agents heartbeating: ack latency, heartbeats/s, 4009 and other closes and offline events (must be 0)", run: runFleet})
}

func runFleet(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fleet", flag.ExitOnError)
	tf := addTargetFlags(fs, "rollcall binary to start (fresh store)", "server URL when not spawning (loopback only; it must run with the -timeout and -interval given)", true)
	agents := fs.Int("agents", 2000, fmt.Sprintf("gateway agents (at most %d)", maxAgents))
	restAgents := fs.Int("rest", 1, "REST agents (at most 100)")
	interval := fs.Duration("interval", time.Second, "heartbeat interval of every agent (sync.heartbeat_interval of the spawned server)")
	timeout := fs.Duration("timeout", 3*time.Second, "agent.presence_timeout of the spawned server")
	persist := fs.Duration("persist", 60*time.Second, "agent.heartbeat_persist_interval of the spawned server")
	duration := fs.Duration("duration", 60*time.Second, "how long every agent heartbeats (at most 10m)")
	stopAt := fs.Duration("stop-at", 0, "spawned server only: SIGSTOP it this long into the run (0 = never), a stall of the server")
	stopFor := fs.Duration("stop-for", 5*time.Second, "how long the server stays stopped (then SIGCONT)")
	_ = fs.Parse(args)
	if *agents < 0 || *agents > maxAgents || *restAgents < 0 || *restAgents > 100 || *agents+*restAgents == 0 ||
		*duration <= 0 || *duration > maxDuration || *interval < 10*time.Millisecond || *timeout <= *interval {
		return fmt.Errorf("bounds: 0 ≤ agents ≤ %d, 0 ≤ rest ≤ 100, 0 < duration ≤ %s, interval ≥ 10ms, timeout > interval", maxAgents, maxDuration)
	}
	t, err := tf.open(ctx,
		"--agent.heartbeat_persist_interval", persist.String(), "--agent.presence_timeout", timeout.String(),
		"--sync.heartbeat_interval", interval.String())
	if err != nil {
		return err
	}
	defer t.stop()

	fmt.Printf("vending %d gateway + %d REST agents …\n", *agents, *restAgents)
	began := time.Now()
	creds, err := vendMany(ctx, t, *agents+*restAgents)
	if err != nil {
		return err
	}
	fmt.Printf("vended in %s\n", time.Since(began).Round(time.Millisecond))
	gwCreds, restCreds := creds[:*agents], creds[*agents:]

	// The offline events, counted from before the first heartbeat.
	evCtx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	ev := &eventCounter{}
	evReady := make(chan struct{})
	go ev.run(evCtx, t, evReady)
	select {
	case <-evReady:
	case <-time.After(30 * time.Second):
		return errors.New("GET /v1/events did not answer")
	}

	runCtx, stop := context.WithTimeout(ctx, *duration)
	defer stop()
	var (
		wg                        sync.WaitGroup
		closed4009, otherClose    atomic.Int64
		dialErrs, gwSent, restErr atomic.Int64
		lateSends, late4009       atomic.Int64 // sends later than the gateway deadline after the previous one
		maxGapNS                  atomic.Int64
		lastClose                 atomic.Value // string: the last other close's code and error
		gwLat, restLat            latencies
		restFirst                 latencies    // each REST agent's first heartbeat (its audited first report)
		restMaxAt                 atomic.Int64 // when the slowest steady REST heartbeat was sent, ns into the run
	)
	frame := []byte(`{"op":"heartbeat","d":{"agent":` + loadHeartbeat + `}}`)
	wsURL := "ws" + strings.TrimPrefix(t.URL, "http") + "/v1/gateway"
	start := time.Now()
	// Dial at most 64 at a time (a fleet reconnecting after a restart),
	// each connection heartbeating from the moment it is identified.
	dialSlots := make(chan struct{}, 64)
	for _, c := range gwCreds {
		wg.Go(func() {
			select {
			case dialSlots <- struct{}{}:
			case <-runCtx.Done():
				return
			}
			conn, err := dialGateway(runCtx, wsURL, c.token)
			<-dialSlots
			if err != nil {
				if runCtx.Err() == nil {
					dialErrs.Add(1)
				}
				return
			}
			defer conn.CloseNow()
			sent := make(chan time.Time, 64)
			var late atomic.Bool // this tool sent late once (its own starvation)
			var readers sync.WaitGroup
			readers.Go(func() {
				for {
					_, b, err := conn.Read(context.Background())
					if err != nil {
						if runCtx.Err() == nil {
							if websocket.CloseStatus(err) == 4009 {
								closed4009.Add(1)
								if late.Load() {
									late4009.Add(1)
								}
							} else {
								otherClose.Add(1)
								lastClose.Store(fmt.Sprintf("close status %d: %v", websocket.CloseStatus(err), err))
							}
						}
						return
					}
					if strings.HasPrefix(string(b), `{"op":"heartbeat_ack"`) {
						select {
						case at := <-sent:
							gwLat.add(time.Since(at))
						default:
						}
					}
				}
			})
			tick := time.NewTicker(*interval)
			defer tick.Stop()
			var prev time.Time
			for first := true; ; first = false {
				if !first {
					select {
					case <-runCtx.Done():
						_ = conn.Close(websocket.StatusNormalClosure, "")
						readers.Wait()
						return
					case <-tick.C:
					}
				}
				now := time.Now()
				if !prev.IsZero() {
					gap := now.Sub(prev)
					if gap >= 2**interval { // the gateway's deadline: this tool was starved
						lateSends.Add(1)
						late.Store(true)
					}
					for {
						m := maxGapNS.Load()
						if int64(gap) <= m || maxGapNS.CompareAndSwap(m, int64(gap)) {
							break
						}
					}
				}
				prev = now
				select {
				case sent <- now:
				default: // 64 unacknowledged: the server is far behind
				}
				if conn.Write(context.Background(), websocket.MessageText, frame) != nil {
					readers.Wait()
					return
				}
				gwSent.Add(1)
			}
		})
	}
	client := &http.Client{Timeout: 30 * time.Second}
	for _, c := range restCreds {
		wg.Go(func() {
			// A random phase, then one heartbeat per interval.
			time.Sleep(time.Duration(rand.Int64N(int64(*interval))))
			tick := time.NewTicker(*interval)
			defer tick.Stop()
			var slowest time.Duration
			for first := true; ; first = false {
				req, _ := http.NewRequestWithContext(runCtx, "POST", t.URL+"/v1/agents/"+c.id+"/heartbeat", strings.NewReader(loadHeartbeat))
				req.Header.Set("Authorization", "Bearer "+c.token)
				req.Header.Set("Content-Type", "application/json")
				at := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					_, _ = bufio.NewReader(resp.Body).WriteTo(discard{})
					resp.Body.Close()
					if d := time.Since(at); resp.StatusCode == 200 && first {
						restFirst.add(d)
					} else if resp.StatusCode == 200 {
						restLat.add(d)
						if d > slowest {
							slowest = d
							restMaxAt.Store(int64(at.Sub(start)))
						}
					} else {
						restErr.Add(1)
					}
				} else if runCtx.Err() == nil {
					restErr.Add(1)
				}
				select {
				case <-runCtx.Done():
					return
				case <-tick.C:
				}
			}
		})
	}
	if *stopAt > 0 {
		if t.PID == 0 {
			return errors.New("-stop-at needs -spawn")
		}
		go func() {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(*stopAt):
			}
			fmt.Printf("SIGSTOP the server for %s …\n", *stopFor)
			_ = syscall.Kill(t.PID, syscall.SIGSTOP)
			time.Sleep(*stopFor)
			_ = syscall.Kill(t.PID, syscall.SIGCONT)
			fmt.Println("SIGCONT")
		}()
	}
	cpu := startCPU(t)
	// The counts are taken (timeout − interval) / 2 after the run ends: an
	// agent whose last heartbeat went out up to one interval before the end
	// cannot be due offline before timeout − interval after it, so an
	// offline event by then is a failure, and events published before the
	// end have arrived.
	type snap struct {
		offline, online int
		missed          bool
	}
	snapc := make(chan snap, 1)
	go func() {
		<-runCtx.Done()
		time.Sleep((*timeout - *interval) / 2)
		var s snap
		s.offline, s.online, s.missed = ev.counts()
		snapc <- s
	}()
	wg.Wait()
	measured := min(time.Since(start), *duration)
	cpuLine := cpu.line(gwSent.Load(), measured)
	sn := <-snapc
	stopEvents()
	offline, online, missed := sn.offline, sn.online, sn.missed

	p50, p99, mx := percentiles(gwLat.ds)
	fmt.Printf("fleet: %d gateway agents + %d REST agents, interval %s, timeout %s, %s\n", *agents, *restAgents, *interval, *timeout, measured.Round(100*time.Millisecond))
	fmt.Printf("gateway  heartbeats/s %8.0f   ack p50 %9s  p99 %9s  max %9s   sent %d, acked %d\n",
		float64(len(gwLat.ds))/measured.Seconds(), p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond), gwSent.Load(), len(gwLat.ds))
	p50, p99, mx = percentiles(restLat.ds)
	_, _, first := percentiles(restFirst.ds)
	fmt.Printf("rest     heartbeats/s %8.1f   resp p50 %8s  p99 %9s  max %9s (sent %s into the run)   first heartbeat (audited) max %s   errors %d\n",
		float64(len(restLat.ds)+len(restFirst.ds))/measured.Seconds(), p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond),
		time.Duration(restMaxAt.Load()).Round(100*time.Millisecond), first.Round(time.Microsecond), restErr.Load())
	fmt.Printf("closes 4009: %d   other closes: %d   dial errors: %d   events: %d online, %d offline%s\n",
		closed4009.Load(), otherClose.Load(), dialErrs.Load(), online, offline, map[bool]string{true: " (stream missed events!)", false: ""}[missed])
	fmt.Printf("load tool: longest gap between two sends of one connection %s; %d sends later than the gateway deadline (2 × interval), %d of the 4009 closes on such connections\n",
		time.Duration(maxGapNS.Load()).Round(time.Millisecond), lateSends.Load(), late4009.Load())
	fmt.Println("         " + cpuLine)
	if last, ok := lastClose.Load().(string); ok {
		fmt.Printf("last other close: %s\n", last)
	}
	// No close code is expected: every agent keeps sending and the server
	// stays up (a -stop-at stall included, design: Stall extension), so a
	// 4009 (presence timeout) is a missed heartbeat and any other close, a
	// reset or a failed dial is the server dropping a healthy connection.
	if closed4009.Load() != 0 || otherClose.Load() != 0 || offline != 0 || missed || dialErrs.Load() != 0 || restErr.Load() != 0 {
		return fmt.Errorf("FAILED: every agent kept sending, so 4009 and other closes, offline events, dial and REST errors must all be 0")
	}
	fmt.Println("OK: zero closes and zero offline events for agents that kept sending")
	return nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// eventCounter reads GET /v1/events (reconnecting with Last-Event-ID) and
// counts agent.presence_changed by state.
type eventCounter struct {
	mu                    sync.Mutex
	offline, online       int
	missed, readySignaled bool
}

func (c *eventCounter) counts() (offline, online int, missed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offline, c.online, c.missed
}

func (c *eventCounter) run(ctx context.Context, t *target, ready chan<- struct{}) {
	last := ""
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", t.URL+"/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+t.Token)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c.mu.Lock()
		if !c.readySignaled {
			c.readySignaled = true
			close(ready)
		}
		c.mu.Unlock()
		if id := readEvents(resp.Body, c.count); id != "" {
			last = id
		}
		resp.Body.Close()
	}
}

// count counts one event of the stream.
func (c *eventCounter) count(kind string, data []byte) {
	var ev struct {
		Data struct {
			State string `json:"state"`
		} `json:"data"`
	}
	_ = json.Unmarshal(data, &ev)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case kind == "stream.missed":
		c.missed = true
	case kind == "agent.presence_changed" && ev.Data.State == "offline":
		c.offline++
	case kind == "agent.presence_changed":
		c.online++
	}
}

// readEvents reads the frames of an SSE stream (GET /v1/events) until it
// ends and calls on with each data line's payload and the event kind last
// named; it returns the last event id seen ("" = none), to resume from
// with Last-Event-ID.
func readEvents(r io.Reader, on func(kind string, data []byte)) (lastID string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	kind := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			lastID = v
		} else if v, ok := strings.CutPrefix(line, "event: "); ok {
			kind = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			on(kind, []byte(v))
		}
	}
	return lastID
}
