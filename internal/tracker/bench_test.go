package tracker_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// Benchmarks of the heartbeat use case on the real tracker and a real SQLite
// store (docs/benchmarks.md, Liveness). A steady heartbeat (nothing changed)
// touches memory only; the flush writes dirty entries in one transaction.
//
//	go test -run '^$' -bench 'Heartbeat|Flush' -benchmem ./internal/tracker/

const benchBody = `{"state":"online","billing_mode":"subscription","billing_modes_supported":["subscription","api"],` +
	`"tool_class":"claude-code","runtime_version":"2.1.3","billing_evidence":{"key_type":"oauth","method":"credentials_file"},` +
	`"details":{"capabilities":{"followups":"queue","components":true},"adapter":{"name":"rollcall-adapter","version":"0.4.0"},` +
	`"runtime":{"name":"claude-code"},"protocol_version":1}}`

type benchEnv struct {
	svc    *app.Service
	agents []domain.Principal
}

func newBenchEnv(b *testing.B, n int) *benchEnv {
	b.Helper()
	cfg := lvCfg
	cfg.RateLimit, cfg.RateBurst = 1e9, 1<<30 // measure the use case, not the limiter's refusals
	e := newLvEnv(b, withConfig(cfg), func(o *envOptions) { o.realClock = true })
	be := &benchEnv{svc: e.svc}
	for i := range n {
		p := e.vend(fmt.Sprintf("bench-%05d", i))
		be.agents = append(be.agents, p)
		if _, err := e.svc.Heartbeat(context.Background(), p, p.Agent.ID, []byte(benchBody), app.Arrival{}); err != nil {
			b.Fatal(err)
		}
	}
	// The first heartbeats are transitions, written at once by the
	// transition writer: let it finish, or it may take entries a benchmark
	// makes dirty again.
	deadline := time.Now().Add(time.Minute) // a bound, not a timing
	for !trk(e.svc).TransitionsIdle() {
		if time.Now().After(deadline) {
			b.Fatal("the transition writer did not finish within a minute")
		}
		time.Sleep(time.Millisecond)
	}
	return be
}

// BenchmarkHeartbeat: one agent's steady heartbeats (the same body again:
// authorize, compare, warnings; the decode is skipped for a body identical
// to the last accepted one), one goroutine.
func BenchmarkHeartbeat(b *testing.B) {
	be := newBenchEnv(b, 1)
	p := be.agents[0]
	body := []byte(benchBody)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := be.svc.Heartbeat(ctx, p, p.Agent.ID, body, app.Arrival{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeartbeatChanging: every heartbeat differs from the previous
// one (active_runs changes), so each is decoded; the reported pair stays, so
// nothing is written.
func BenchmarkHeartbeatChanging(b *testing.B) {
	be := newBenchEnv(b, 1)
	p := be.agents[0]
	bodies := [][]byte{
		[]byte(strings.Replace(benchBody, `"protocol_version":1`, `"protocol_version":1,"active_runs":["0b6f7a44-0000-4000-8000-000000000001"]`, 1)),
		[]byte(strings.Replace(benchBody, `"protocol_version":1`, `"protocol_version":1,"active_runs":["0b6f7a44-0000-4000-8000-000000000002"]`, 1)),
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		if _, err := be.svc.Heartbeat(ctx, p, p.Agent.ID, bodies[i%2], app.Arrival{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeartbeatParallel: 1000 agents heartbeating from GOMAXPROCS
// goroutines.
func BenchmarkHeartbeatParallel(b *testing.B) {
	be := newBenchEnv(b, 1000)
	body := []byte(benchBody)
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			p := be.agents[next.Add(1)%int64(len(be.agents))]
			if _, err := be.svc.Heartbeat(ctx, p, p.Agent.ID, body, app.Arrival{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFlush10k: one flush pass writing 10 000 dirty agents (one
// transaction, ascending ids) to SQLite; the time is per pass.
func BenchmarkFlush10k(b *testing.B) {
	be := newBenchEnv(b, 10000)
	body := []byte(benchBody)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for _, p := range be.agents { // make every entry dirty again
			if _, err := be.svc.Heartbeat(ctx, p, p.Agent.ID, body, app.Arrival{}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		n, err := trk(be.svc).Flush(ctx)
		if err != nil || n != len(be.agents) {
			b.Fatalf("Flush = %d, %v", n, err)
		}
	}
}
