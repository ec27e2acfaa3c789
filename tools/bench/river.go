package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is the River job of the queue workload; its worker does nothing.
type noopArgs struct {
	N int `json:"n"`
}

func (noopArgs) Kind() string { return "bench_noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// runRiverQueue runs k producers (one Insert at a time each) and a River
// client with w workers (FetchCooldown 1 ms, no-op worker) on a fresh
// database of pgURL's server for warm + d, and returns jobs completed per
// second over d: completed rows counted in the database at both ends of d,
// so only completions River has committed count.
func runRiverQueue(ctx context.Context, pgURL string, k, w int, warm, d time.Duration) (float64, error) {
	dbURL, drop, err := freshDatabase(ctx, pgURL, "river_bench")
	if err != nil {
		return 0, err
	}
	defer drop()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return 0, err
	}
	cfg.MaxConns = int32(k + w + 8) // one per producer, the workers' completer and fetches, River's maintenance
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	mig, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quiet})
	if err != nil {
		return 0, err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return 0, fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: w}},
		Workers:       workers,
		FetchCooldown: time.Millisecond,
		Logger:        quiet,
	})
	if err != nil {
		return 0, err
	}
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		client.Stop(sctx)
	}()
	completed := func() (int64, error) {
		var n int64
		err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
		return n, err
	}
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	end := time.Now().Add(warm + d)
	var wg sync.WaitGroup
	var perr atomic.Value
	for p := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				if _, err := client.Insert(pctx, noopArgs{N: p<<32 | i}, nil); err != nil {
					if pctx.Err() == nil {
						perr.CompareAndSwap(nil, err)
					}
					return
				}
			}
		}()
	}
	settle(ctx, warm)
	before, err := completed()
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	settle(ctx, d)
	after, err := completed()
	elapsed := time.Since(t0)
	stopProducers()
	wg.Wait()
	if err != nil {
		return 0, err
	}
	if e := perr.Load(); e != nil {
		return 0, fmt.Errorf("river insert: %v", e)
	}
	return float64(after-before) / elapsed.Seconds(), nil
}
