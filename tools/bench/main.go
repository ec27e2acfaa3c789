// Command bench measures Rollcall side by side with the systems people
// compare it with, on loopback, each started fresh for every repetition and
// the runs interleaved (A B A B …):
//
//   - mem: server RSS per idle connection at -conns connections — Rollcall
//     MCP sessions with their GET stream open vs Centrifugo v6.9.1 uni_sse
//     streams and WebSocket connections (memory engine, one personal channel
//     each, server-side subscription from the connection JWT);
//   - push: -push-conns idle connections and -pushes sequential pushes to one
//     of them, push start → client read (Rollcall: REST push, committed, then
//     the doorbell on the MCP GET stream; Centrifugo: HTTP API publish);
//   - queue: K producers + W workers one job at a time for -queue-dur
//     (Rollcall: REST push + MCP complete with next — or, with -rollcall-queue
//     claim, claim_next + complete — on PostgreSQL and on SQLite; River
//     v0.51.2 on the same PostgreSQL, FetchCooldown 1 ms, no-op worker).
//
// It prints one markdown table: per-system medians over the repetitions and
// the median of the per-repetition ratios. It builds Rollcall from the
// repository (../..) and Centrifugo once into -cache; it links River.
//
//	cd tools/bench && go run . -reps 3
//	cd tools/bench && go run . -reps 1 -conns 200 -push-conns 200 -pushes 100 -queue-dur 5s
//
// Every loop is bounded in count and time; the whole run by -timeout. It exits
// non-zero when any measurement fails.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	userCache, _ := os.UserCacheDir()
	reps := flag.Int("reps", 3, "repetitions; every system is started fresh in each")
	workloads := flag.String("workloads", "mem,push,queue", "comma list of workloads: mem, push, queue")
	conns := flag.Int("conns", 5000, "mem: idle connections (20000 needs RLIMIT_NOFILE above 20 000 for the server and the harness)")
	pushConns := flag.Int("push-conns", 2000, "push: idle connections besides the target")
	pushes := flag.Int("pushes", 500, "push: sequential pushes to the target")
	queueDur := flag.Duration("queue-dur", 20*time.Second, "queue: measured duration per run (after a warm-up of a tenth of it)")
	queueKW := flag.String("queue-kw", "4,16", "queue: comma list of K=W (producers = workers)")
	pgURL := flag.String("pg", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "PostgreSQL server on loopback (a fresh database per run is created and dropped)")
	cache := flag.String("cache", filepath.Join(userCache, "rollcall-bench"), "directory of the built Centrifugo (kept between runs)")
	rollcallBin := flag.String("rollcall", "", "rollcall binary (default: built from the repository into a temporary directory)")
	centrifugoBin := flag.String("centrifugo", "", "centrifugo binary (default: built into -cache)")
	timeout := flag.Duration("timeout", 90*time.Minute, "bound of the whole run")
	verbose := flag.Bool("v", false, "copy the servers' logs to stderr")
	systems := flag.String("systems", "rollcall,centrifugo,river", "comma list of the systems to run (a partial run leaves the others' cells at 0)")
	queueMode := flag.String("rollcall-queue", queueModeNext, "queue: the Rollcall workers' loop: next (complete with next, one call a todo) or claim (claim_next then complete, the loop before complete took next)")
	queueN := flag.Int("rollcall-queue-n", 1, "queue: the Rollcall workers' claim_next n (and next's n), 1…32; 1 sends none")
	queueIdle := flag.String("rollcall-queue-idle", queueIdlePoll, "queue: what a Rollcall worker does when claim_next found nothing: poll (again after 1 ms) or doorbell (again on its session's next doorbell, at most 50 ms later)")
	flag.Parse()

	want := map[string]bool{}
	for _, w := range strings.Split(*workloads, ",") {
		switch w = strings.TrimSpace(w); w {
		case "mem", "push", "queue":
			want[w] = true
		default:
			return fmt.Errorf("unknown workload %q", w)
		}
	}
	runs := map[string]bool{}
	for _, s := range strings.Split(*systems, ",") {
		runs[strings.TrimSpace(s)] = true
	}
	on := func(sys string) bool {
		switch sys {
		case sysUniSSE, sysWebSocket:
			return runs["centrifugo"]
		case sysRiver:
			return runs["river"]
		}
		return runs["rollcall"]
	}
	var kws []int
	for _, s := range strings.Split(*queueKW, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 32 {
			return fmt.Errorf("-queue-kw: %q is not a count 1…32 (one agent holds at most 32 sessions)", s)
		}
		kws = append(kws, n)
	}
	if *reps < 1 || *conns < 1 || *pushConns < 0 || *pushes < 1 || *queueDur <= 0 {
		return fmt.Errorf("sizes must be positive")
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()

	nofile, err := raiseNoFile()
	if err != nil {
		return fmt.Errorf("raising RLIMIT_NOFILE: %w", err)
	}
	if want["mem"] && uint64(*conns)+256 > nofile || want["push"] && uint64(*pushConns)+256 > nofile {
		return fmt.Errorf("RLIMIT_NOFILE is %d here (hard limit): too few descriptors for the connections asked for", nofile)
	}

	var e env
	e.logw = io.Discard
	if *verbose {
		e.logw = os.Stderr
		clientLog = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	e.pgURL = *pgURL
	switch *queueMode {
	case queueModeNext, queueModeClaim:
	default:
		return fmt.Errorf("-rollcall-queue: %q is neither next nor claim", *queueMode)
	}
	if *queueN < 1 || *queueN > 32 {
		return fmt.Errorf("-rollcall-queue-n: %d is not 1…32", *queueN)
	}
	if *queueIdle != queueIdlePoll && *queueIdle != queueIdleDoorbell {
		return fmt.Errorf("-rollcall-queue-idle: %q is neither poll nor doorbell", *queueIdle)
	}
	e.queueMode, e.queueN, e.queueIdle = *queueMode, *queueN, *queueIdle
	e.sources = 4
	e.rollcallBin = *rollcallBin
	if e.rollcallBin == "" {
		dir, err := os.MkdirTemp("", "rollcall-bench-bin")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		wd, _ := os.Getwd()
		if e.rollcallBin, err = buildRollcall(ctx, filepath.Join(wd, "..", ".."), dir); err != nil {
			return err
		}
	}
	e.centrifugoBin = *centrifugoBin
	if e.centrifugoBin == "" && (want["mem"] || want["push"]) && runs["centrifugo"] {
		if e.centrifugoBin, err = ensureCentrifugo(ctx, *cache); err != nil {
			return err
		}
	}

	res := newResults()
	started, loadStart := time.Now(), loadAvg()
	peers := []string{sysRollcall, sysUniSSE, sysWebSocket}
	for rep := 1; rep <= *reps; rep++ {
		if want["mem"] {
			for _, sys := range peers {
				if !on(sys) {
					continue
				}
				v, err := measureRSS(ctx, e, sys, *conns)
				if err != nil {
					return fmt.Errorf("rep %d, mem, %s: %w", rep, sys, err)
				}
				res.add("mem", sys, v)
				logf("rep %d mem %-22s %8.1f KiB per connection (%d connections)", rep, sys, v, *conns)
			}
		}
		if want["push"] {
			for _, sys := range peers {
				if !on(sys) {
					continue
				}
				p50, p99, err := measurePush(ctx, e, sys, *pushConns, *pushes)
				if err != nil {
					return fmt.Errorf("rep %d, push, %s: %w", rep, sys, err)
				}
				res.add("p50", sys, p50)
				res.add("p99", sys, p99)
				logf("rep %d push %-22s p50 %.3f ms  p99 %.3f ms", rep, sys, p50, p99)
			}
		}
		if want["queue"] {
			warm := *queueDur / 10
			for _, kw := range kws {
				key := fmt.Sprintf("queue%d", kw)
				for _, sys := range []string{sysRollcallPG, sysRollcallSQ, sysRiver} {
					if !on(sys) {
						continue
					}
					var v float64
					var err error
					if sys == sysRiver {
						v, err = runRiverQueue(ctx, e.pgURL, kw, kw, warm, *queueDur)
					} else {
						v, err = measureRollcallQueue(ctx, e, sys == sysRollcallPG, kw, kw, warm, *queueDur)
					}
					if err != nil {
						return fmt.Errorf("rep %d, queue K=W=%d, %s: %w", rep, kw, sys, err)
					}
					res.add(key, sys, v)
					logf("rep %d queue K=W=%-2d %-20s %8.0f jobs/s", rep, kw, sys, v)
				}
			}
		}
	}

	fmt.Printf("\nMeasured %s, %d repetitions (each system started fresh, interleaved), %d CPUs, load average %s at the start and %s at the end, %s.\n\n",
		started.UTC().Format("2006-01-02 15:04 UTC"), *reps, runtime.NumCPU(), loadStart, loadAvg(), time.Since(started).Round(time.Second))
	fmt.Println("| measure | Rollcall | peer in the same run | ratio (median of per-repetition ratios) |")
	fmt.Println("|---|---|---|---|")
	if want["mem"] {
		fmt.Printf("| RSS per idle connection, %s connections (Rollcall: MCP session with its GET stream open; Centrifugo %s: uni_sse stream / WebSocket, memory engine, one personal channel each) | %s KiB | uni_sse %s KiB, WebSocket %s KiB | %s× / %s× |\n",
			thousands(*conns), centrifugoVersion, f1(res.median("mem", sysRollcall)), f1(res.median("mem", sysUniSSE)), f1(res.median("mem", sysWebSocket)),
			f2(res.ratio("mem", sysRollcall, sysUniSSE)), f2(res.ratio("mem", sysRollcall, sysWebSocket)))
	}
	if want["push"] {
		fmt.Printf("| targeted push → client, %s idle connections, %d pushes to one (Rollcall: REST push, committed to SQLite, then the doorbell; Centrifugo: HTTP API `publish`, in memory) | p50 %s ms, p99 %s ms | p50 %s / %s ms, p99 %s / %s ms | p50 %s× / %s×, p99 %s× / %s× |\n",
			thousands(*pushConns), *pushes,
			f2(res.median("p50", sysRollcall)), f2(res.median("p99", sysRollcall)),
			f2(res.median("p50", sysUniSSE)), f2(res.median("p50", sysWebSocket)), f2(res.median("p99", sysUniSSE)), f2(res.median("p99", sysWebSocket)),
			f1(res.ratio("p50", sysRollcall, sysUniSSE)), f1(res.ratio("p50", sysRollcall, sysWebSocket)),
			f1(res.ratio("p99", sysRollcall, sysUniSSE)), f1(res.ratio("p99", sysRollcall, sysWebSocket)))
	}
	if want["queue"] {
		var pg, sq, rv, rpg, rsq, kwl []string
		for _, kw := range kws {
			key := fmt.Sprintf("queue%d", kw)
			kwl = append(kwl, strconv.Itoa(kw))
			pg = append(pg, f0(res.median(key, sysRollcallPG)))
			sq = append(sq, f0(res.median(key, sysRollcallSQ)))
			rv = append(rv, f0(res.median(key, sysRiver)))
			rpg = append(rpg, f1(res.ratio(key, sysRiver, sysRollcallPG)))
			rsq = append(rsq, f1(res.ratio(key, sysRiver, sysRollcallSQ)))
		}
		j := func(s []string) string { return strings.Join(s, " / ") }
		loop := "`complete` with `next`"
		if e.queueMode == queueModeClaim {
			loop = "`claim_next` + `complete`"
		}
		if e.queueN > 1 {
			loop += fmt.Sprintf(", n %d", e.queueN)
		}
		if e.queueIdle == queueIdleDoorbell {
			loop += ", idle workers wait for a doorbell"
		}
		fmt.Printf("| work queue, K producers + W workers one job at a time, %s (Rollcall: REST push + MCP %s; River v0.51.2 on the same PostgreSQL, `FetchCooldown` 1 ms, no-op worker) | PG %s, SQLite %s jobs/s (K=W=%s) | %s jobs/s | River is %s× (PG) / %s× (SQLite) faster |\n",
			*queueDur, loop, j(pg), j(sq), j(kwl), j(rv), j(rpg), j(rsq))
	}
	fmt.Println()
	fmt.Println("Per repetition:")
	for _, k := range res.order {
		fmt.Printf("- %s %s: %s\n", k.measure, k.system, res.list(k))
	}
	return nil
}

// loadAvg is the 1, 5 and 15 minute load average (/proc/loadavg).
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

type resKey struct{ measure, system string }

// results holds every repetition's figure per measure and system.
type results struct {
	vals  map[resKey][]float64
	order []resKey
}

func newResults() *results { return &results{vals: map[resKey][]float64{}} }

func (r *results) add(measure, system string, v float64) {
	k := resKey{measure, system}
	if _, ok := r.vals[k]; !ok {
		r.order = append(r.order, k)
	}
	r.vals[k] = append(r.vals[k], v)
}

func (r *results) median(measure, system string) float64 {
	return median(r.vals[resKey{measure, system}])
}

// ratio is the median over repetitions of a's figure ÷ b's in that repetition.
func (r *results) ratio(measure, a, b string) float64 {
	as, bs := r.vals[resKey{measure, a}], r.vals[resKey{measure, b}]
	var rs []float64
	for i := range min(len(as), len(bs)) {
		if bs[i] != 0 {
			rs = append(rs, as[i]/bs[i])
		}
	}
	return median(rs)
}

func (r *results) list(k resKey) string {
	var s []string
	for _, v := range r.vals[k] {
		s = append(s, strconv.FormatFloat(v, 'f', 3, 64))
	}
	return strings.Join(s, ", ")
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// thousands writes n with a thin space between groups of three (5 000).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + " " + s[i:]
	}
	return s
}
