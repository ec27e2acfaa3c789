package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/rollcall/rollcall/internal/testkit/harness"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// The heartbeat mode (docs/benchmarks.md, Liveness):
// N agents heartbeat one instance, over the WebSocket gateway (one
// connection per agent, paced open loop at -rate heartbeats per second in
// all, each with member agent so the full use case runs) and over REST
// (-workers keep-alive connections, closed loop). It reports the sustained
// heartbeats per second, the heartbeat_ack (gateway) or response (REST)
// latency percentiles, and the database writes per second, read from the
// server's /metrics (rollcall_liveness_persisted_rows_total): bounded by
// agents ÷ agent.heartbeat_persist_interval, not by the heartbeat rate.
//
//	go build -o /tmp/rollcall ./cmd/rollcall
//	go run ./tools/load heartbeat -spawn /tmp/rollcall -agents 10000 -rate 50000 -duration 30s

func init() {
	register(mode{name: "heartbeat", help: "heartbeats/s, ack latency and DB writes/s with N agents over the gateway and REST", run: runHeartbeat})
}

// Bounds of the mode: it stops by itself and never runs away.
const (
	maxAgents   = 20000
	maxDuration = 10 * time.Minute
	maxRate     = 200000
)

const loadHeartbeat = `{"state":"online","billing_mode":"subscription","tool_class":"claude-code","runtime_version":"2.1.3",` +
	`"billing_evidence":{"key_type":"oauth","method":"credentials_file"},"details":{"adapter":{"name":"rollcall-load","version":"1"},"runtime":{"name":"claude-code"}}}`

func runHeartbeat(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("heartbeat", flag.ExitOnError)
	tf := addTargetFlags(fs, "rollcall binary to start (fresh store)", "server URL when not spawning (loopback only)", true)
	agents := fs.Int("agents", 10000, fmt.Sprintf("agents (at most %d)", maxAgents))
	transport := fs.String("transport", "both", "gateway, rest or both")
	rate := fs.Int("rate", 50000, "gateway: heartbeats per second in all (open loop, paced per connection)")
	workers := fs.Int("workers", 64, "rest: concurrent keep-alive connections (closed loop)")
	duration := fs.Duration("duration", 30*time.Second, "measured time per transport (at most 10m)")
	warmup := fs.Duration("warmup", 5*time.Second, "unmeasured time before each measurement")
	persist := fs.Duration("persist", 5*time.Second, "agent.heartbeat_persist_interval of the spawned server")
	withAgent := fs.Bool("agent-member", true, "gateway: send member agent (the full use case); false = connection liveness only")
	_ = fs.Parse(args)
	if *agents < 1 || *agents > maxAgents || *duration <= 0 || *duration > maxDuration || *rate < 1 || *rate > maxRate || *workers < 1 || *workers > 1024 {
		return fmt.Errorf("bounds: 1 ≤ agents ≤ %d, 0 < duration ≤ %s, 1 ≤ rate ≤ %d, 1 ≤ workers ≤ 1024", maxAgents, maxDuration, maxRate)
	}
	t, err := tf.open(ctx,
		"--agent.heartbeat_persist_interval", persist.String(), "--agent.presence_timeout", "45s", "--sync.heartbeat_interval", "15s")
	if err != nil {
		return err
	}
	defer t.stop()

	fmt.Printf("vending %d agents …\n", *agents)
	start := time.Now()
	creds, err := vendMany(ctx, t, *agents)
	if err != nil {
		return err
	}
	fmt.Printf("vended %d agents in %s\n", len(creds), time.Since(start).Round(time.Millisecond))
	if t.PID != 0 {
		fmt.Printf("database writes are bounded by agents ÷ persist interval = %.0f rows/s\n", float64(len(creds))/persist.Seconds())
	}

	if *transport == "gateway" || *transport == "both" {
		if err := gatewayLoad(ctx, t, creds, *rate, *withAgent, *warmup, *duration); err != nil {
			return err
		}
	}
	if *transport == "rest" || *transport == "both" {
		if err := restLoad(ctx, t, creds, *workers, *warmup, *duration); err != nil {
			return err
		}
	}
	return nil
}

// requireLoopback refuses a server URL whose host is not a loopback address.
func requireLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-server %s: the load tool only talks to loopback addresses", raw)
}

type cred struct{ id, handle, token string }

func vendMany(ctx context.Context, t *target, n int) ([]cred, error) {
	run := time.Now().UnixNano()
	out := make([]cred, n)
	err := parallel(ctx, n, 8, func(i int) error {
		v, err := t.vend(ctx, fmt.Sprintf("hb-%d-%05d", run, i), []string{"build"})
		out[i] = cred{id: v.Agent.ID, handle: v.Agent.Handle, token: v.Credential}
		return err
	})
	return out, err
}

// flushCounters reads rollcall_liveness_persisted_rows_total and
// rollcall_liveness_flushes_total from /metrics (0 before the first flush).
func flushCounters(ctx context.Context, base string) (rows, passes float64, err error) {
	v, err := metricValues(ctx, base, "rollcall_liveness_persisted_rows_total", "rollcall_liveness_flushes_total")
	return v[0], v[1], err
}

// metricValues reads the unlabelled samples names from the server's
// /metrics, in order (0 for one not exposed).
func metricValues(ctx context.Context, base string, names ...string) ([]float64, error) {
	out := make([]float64, len(names))
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for i, name := range names {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				out[i], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return out, sc.Err()
}

// cpuSeconds reads the user+system CPU time of pid ("self" for this
// process) from /proc (clock ticks of 10 ms); 0 when unavailable.
func cpuSeconds(pid string) float64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

type cpuMeter struct {
	server      string
	srv0, self0 float64
}

func startCPU(t *target) *cpuMeter {
	m := &cpuMeter{}
	if t.PID != 0 {
		m.server = strconv.Itoa(t.PID)
		m.srv0 = cpuSeconds(m.server)
	}
	m.self0 = cpuSeconds("self")
	return m
}

// line reports the cores the server and this tool used, and the server's
// CPU time per heartbeat.
func (m *cpuMeter) line(n int64, measured time.Duration) string {
	self := (cpuSeconds("self") - m.self0) / measured.Seconds()
	if m.server == "" {
		return fmt.Sprintf("load tool %.2f cores", self)
	}
	srv := cpuSeconds(m.server) - m.srv0
	per := 0.0
	if n > 0 {
		per = srv / float64(n) * 1e6
	}
	return fmt.Sprintf("server %.2f cores (%.1f µs CPU per heartbeat), load tool %.2f cores", srv/measured.Seconds(), per, self)
}

// latencies collects samples from many goroutines.
type latencies struct {
	mu sync.Mutex
	ds []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.ds = append(l.ds, d)
	l.mu.Unlock()
}

// rowsSample is the server's flush counters and when they were read.
type rowsSample struct {
	rows, passes float64
	at           time.Time
}

func sampleRows(ctx context.Context, base string) (rowsSample, error) {
	r, p, err := flushCounters(ctx, base)
	return rowsSample{r, p, time.Now()}, err
}

func report(name string, n int64, errs int64, measured time.Duration, l *latencies, r0, r1 rowsSample) {
	p50, p99, mx := percentiles(l.ds)
	window := r1.at.Sub(r0.at)
	fmt.Printf("%-8s heartbeats/s %9.0f   latency p50 %8s  p99 %8s  max %8s   errors %d\n",
		name, float64(n)/measured.Seconds(), p50.Round(time.Microsecond), p99.Round(time.Microsecond), mx.Round(time.Microsecond), errs)
	rows, passes := r1.rows-r0.rows, r1.passes-r0.passes
	perPass := 0.0
	if passes > 0 {
		perPass = rows / passes
	}
	fmt.Printf("         db writes: %.0f rows/s over %s (%.0f flush passes, %.0f rows each on average)\n",
		rows/window.Seconds(), window.Round(100*time.Millisecond), passes, perPass)
}

// gatewayLoad opens one gateway connection per agent and sends heartbeats
// paced so that all connections together send rate per second.
func gatewayLoad(ctx context.Context, t *target, creds []cred, rate int, withAgent bool, warmup, duration time.Duration) error {
	wsURL := "ws" + strings.TrimPrefix(t.URL, "http") + "/v1/gateway"
	frame := []byte(`{"op":"heartbeat","d":{}}`)
	if withAgent {
		frame = []byte(`{"op":"heartbeat","d":{"agent":` + loadHeartbeat + `}}`)
	}
	period := time.Duration(float64(time.Second) * float64(len(creds)) / float64(rate))
	fmt.Printf("gateway: %d connections, one heartbeat each per %s (%d/s in all) …\n", len(creds), period.Round(time.Millisecond), rate)
	conns := make([]*websocket.Conn, len(creds))
	dialErr := parallel(ctx, len(creds), 32, func(i int) error {
		c, err := dialGateway(ctx, wsURL, creds[i].token)
		if err != nil {
			return fmt.Errorf("gateway connection %d: %w", i, err)
		}
		conns[i] = c
		return nil
	})
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.CloseNow()
			}
		}
	}()
	if dialErr != nil {
		return dialErr
	}
	var measuring atomic.Bool
	var errs, closes4009, closes atomic.Int64
	var lastClose atomic.Value // string: the last close other than 4009
	lat := &latencies{}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var run sync.WaitGroup
	// Reads and writes use a context without Done (no timer per frame);
	// closing the connections ends them.
	bg := context.Background()
	sent := make([]chan time.Time, len(conns)) // send times awaiting their ack, in order
	samples := make([][]time.Duration, len(conns))
	ackPrefix := []byte(`{"op":"heartbeat_ack"`)
	for i, c := range conns {
		sent[i] = make(chan time.Time, 16)
		q := sent[i]
		run.Go(func() { // reader: acks and error frames, one reused buffer
			buf := make([]byte, 0, 512)
			for {
				_, r, err := c.Reader(bg)
				if err != nil {
					if runCtx.Err() == nil { // not this tool's own close at the end
						if websocket.CloseStatus(err) == 4009 {
							closes4009.Add(1)
						} else {
							closes.Add(1)
							lastClose.Store(fmt.Sprintf("close status %d: %v", websocket.CloseStatus(err), err))
						}
					}
					return
				}
				buf = buf[:0]
				for {
					if len(buf) == cap(buf) {
						buf = append(buf, 0)[:len(buf)]
					}
					n, err := r.Read(buf[len(buf):cap(buf)])
					buf = buf[:len(buf)+n]
					if err != nil {
						break
					}
				}
				if bytes.HasPrefix(buf, ackPrefix) {
					select {
					case at := <-q:
						if measuring.Load() {
							samples[i] = append(samples[i], time.Since(at))
						}
					default:
					}
				} else if measuring.Load() {
					errs.Add(1)
				}
			}
		})
	}
	// A few pacers send the heartbeats round-robin over their share of the
	// connections, as many as are due each millisecond: an open loop at
	// rate per second, each connection once per period.
	const pacers = 4
	for p := range pacers {
		run.Go(func() {
			var mine []int
			for i := p; i < len(conns); i += pacers {
				mine = append(mine, i)
			}
			perSec := float64(rate) * float64(len(mine)) / float64(len(conns))
			began, n, idx := time.Now(), 0, rand.IntN(len(mine))
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			workgroup.Every(runCtx.Done(), tick.C, func() {
				for due := int(time.Since(began).Seconds()*perSec) - n; due > 0 && runCtx.Err() == nil; due-- {
					i := mine[idx%len(mine)]
					idx++
					n++
					select {
					case sent[i] <- time.Now():
					default: // 16 unacknowledged: the server is behind; skip this one
						continue
					}
					if conns[i].Write(bg, websocket.MessageText, frame) != nil && runCtx.Err() == nil {
						errs.Add(1)
					}
				}
			})
		})
	}
	w, err := measureWindow(ctx, t, &measuring, warmup, duration)
	if err != nil {
		return err
	}
	var n int64
	for _, ss := range samples {
		n += int64(len(ss))
	}
	cpuLine := w.cpu.line(n, w.measured)
	stop()
	for _, c := range conns {
		_ = c.CloseNow()
	}
	run.Wait()
	for _, ss := range samples {
		lat.ds = append(lat.ds, ss...)
	}
	report("gateway", int64(len(lat.ds)), errs.Load(), w.measured, lat, w.rows0, w.rows1)
	fmt.Println("         " + cpuLine)
	if t.PID != 0 {
		if kb, err := harness.RSSKiB(t.PID); err == nil {
			fmt.Printf("server RSS with %d gateway connections: %d MiB\n", len(conns), kb/1024)
		}
	}
	fmt.Printf("gateway closes during the run: %d with 4009, %d other\n", closes4009.Load(), closes.Load())
	// Expected closes: 4009 (presence timeout) only when the pacing leaves
	// a connection silent past the gateway's deadline, two heartbeat
	// intervals (2 × 15 s, the spawned server's sync.heartbeat_interval; a
	// -server's interval is unknown, so its 4009s are only counted); any
	// other close or reset is the server dropping a live connection.
	if n := closes.Load(); n > 0 {
		return fmt.Errorf("FAILED: %d gateway connections closed other than by this tool (last: %v)", n, lastClose.Load())
	}
	if n := closes4009.Load(); n > 0 && t.PID != 0 && period < 30*time.Second {
		return fmt.Errorf("FAILED: %d gateway connections closed with 4009 although each sent every %s, within the gateway's 30 s deadline", n, period.Round(time.Millisecond))
	}
	return nil
}

// window is one measurement: its length, the server's CPU meter started at
// its beginning and the flush counters sampled at both ends.
type window struct {
	measured     time.Duration
	cpu          *cpuMeter
	rows0, rows1 rowsSample
}

// measureWindow waits warmup, then measures for duration with measuring
// set.
func measureWindow(ctx context.Context, t *target, measuring *atomic.Bool, warmup, duration time.Duration) (window, error) {
	var w window
	time.Sleep(warmup)
	rows0, err := sampleRows(ctx, t.URL)
	if err != nil {
		return w, err
	}
	measuring.Store(true)
	w.cpu = startCPU(t)
	began := time.Now()
	time.Sleep(duration)
	measuring.Store(false)
	w.measured = time.Since(began)
	rows1, err := sampleRows(ctx, t.URL)
	w.rows0, w.rows1 = rows0, rows1
	return w, err
}

func dialGateway(ctx context.Context, wsURL, token string) (*websocket.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, wsURL, nil)
	if err != nil {
		return nil, err
	}
	if _, _, err := c.Read(dctx); err != nil { // hello
		c.CloseNow()
		return nil, err
	}
	if err := c.Write(dctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+token+`"}}`)); err != nil {
		c.CloseNow()
		return nil, err
	}
	_, b, err := c.Read(dctx)
	if err != nil || !strings.HasPrefix(string(b), `{"op":"ready"`) {
		c.CloseNow()
		return nil, fmt.Errorf("identify: %v %s", err, b)
	}
	return c, nil
}

// restLoad sends heartbeats over REST from workers keep-alive connections,
// closed loop, each worker cycling over its share of the agents.
func restLoad(ctx context.Context, t *target, creds []cred, workers int, warmup, duration time.Duration) error {
	fmt.Printf("rest: %d agents, %d keep-alive workers (closed loop) …\n", len(creds), workers)
	tr := &http.Transport{MaxIdleConnsPerHost: workers, MaxConnsPerHost: workers}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	defer tr.CloseIdleConnections()
	var measuring atomic.Bool
	var count, errs atomic.Int64
	lat := &latencies{}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; runCtx.Err() == nil; i += workers {
				c := creds[i%len(creds)]
				req, _ := http.NewRequestWithContext(runCtx, "POST", t.URL+"/v1/agents/"+c.id+"/heartbeat", strings.NewReader(loadHeartbeat))
				req.Header.Set("Authorization", "Bearer "+c.token)
				req.Header.Set("Content-Type", "application/json")
				at := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					if measuring.Load() && runCtx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				var buf [256]byte
				for {
					if _, err := resp.Body.Read(buf[:]); err != nil {
						break
					}
				}
				resp.Body.Close()
				if measuring.Load() {
					if resp.StatusCode == 200 {
						lat.add(time.Since(at))
						count.Add(1)
					} else {
						errs.Add(1)
					}
				}
			}
		})
	}
	w, err := measureWindow(ctx, t, &measuring, warmup, duration)
	if err != nil {
		return err
	}
	cpuLine := w.cpu.line(count.Load(), w.measured)
	stop()
	wg.Wait()
	report("rest", count.Load(), errs.Load(), w.measured, lat, w.rows0, w.rows1)
	fmt.Println("         " + cpuLine)
	return nil
}
