// Command load drives a running (or spawned) Rollcall server over loopback
// and reports latency, throughput and memory figures for docs/benchmarks.md.
// Every mode is bounded in count and time and stops by itself; it only ever
// talks to the URL it is given (loopback by default).
//
//	go run ./tools/load doorbell  -spawn ./rollcall -n 2000
//	go run ./tools/load sessions  -spawn ./rollcall -n 5000
//	go run ./tools/load heartbeat …   (see heartbeat.go)
//	go run ./tools/load pool      -spawn ./rollcall -store postgres://… (see pool.go)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

type mode struct {
	name string
	help string
	run  func(ctx context.Context, args []string) error
}

var modes []mode

func register(m mode) { modes = append(modes, m) }

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	for _, m := range modes {
		if m.name == os.Args[1] {
			if err := m.run(ctx, os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "load:", err)
				os.Exit(1)
			}
			return
		}
	}
	usage()
	os.Exit(2)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: load <mode> [flags]; modes:")
	sort.Slice(modes, func(i, j int) bool { return modes[i].name < modes[j].name })
	for _, m := range modes {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", m.name, m.help)
	}
}

// percentiles returns p50, p99 and max of ds (sorted in place).
func percentiles(ds []time.Duration) (p50, p99, max time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return at(0.50), at(0.99), ds[len(ds)-1]
}

// parallel calls do(i) for every i in [0, n) from workers goroutines; a
// worker stops at its first error or when ctx ends. It returns the first
// error.
func parallel(ctx context.Context, n, workers int, do func(i int) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
