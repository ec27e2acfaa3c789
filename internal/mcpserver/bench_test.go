package mcpserver_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/mcpserver"
)

// BenchmarkDoorbell measures a todo push through the use cases (SQLite
// insert, todo-ready signal, doorbell) until the notification is read by a
// real MCP client on its GET stream, over loopback. It reports p50 and p99.
//
//	go test -run '^$' -bench BenchmarkDoorbell -benchtime 2000x ./internal/mcpserver/
func BenchmarkDoorbell(b *testing.B) {
	e := newEnv(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.svc.Run(ctx) }() // ring records, as in a server
	b.Cleanup(func() { cancel(); <-done })
	a := e.vend("ada", allVerbs, "q1")
	ac := e.listen(a.Credential)

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		e.push("ada", "q1", "benchmark todo")
		select {
		case <-ac.notes:
		case <-time.After(wait):
			b.Fatal("no doorbell")
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e6 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// BenchmarkSessionMemory opens b.N initialized sessions, then a GET stream
// on each, and reports the growth of the process's heap and stacks per
// session and per stream, and goroutines per stream (see docs/benchmarks.md: ≤ 16
// KB per idle session with an open stream at 5 000 sessions). Clients are
// bare TCP connections (not MCP clients) so that what is counted is the
// server's cost, plus one idle net.Conn per stream.
//
//	go test -run '^$' -bench BenchmarkSessionMemory -benchtime 5000x ./internal/mcpserver/
func BenchmarkSessionMemory(b *testing.B) {
	e := newEnv(b, func(o *mcpserver.Options) {
		o.OnEvent = nil
		o.Log = slog.New(slog.DiscardHandler) // 5 000 log lines would count as session memory
		o.MaxSessionsPerAgent = -1            // b.N sessions of one agent
	})
	a := e.vend("ada", allVerbs, "q1")
	host := strings.TrimPrefix(e.ts.URL, "http://")
	post := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	send := func(session, body string) string {
		req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+a.Credential)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", mcp.ProtocolVersion20251125)
		}
		resp, err := post.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			b.Fatalf("POST: %d", resp.StatusCode)
		}
		return resp.Header.Get("Mcp-Session-Id")
	}
	var stacks [3]uint64
	k := 0
	measure := func() (heapStack uint64, goroutines int) {
		for range 3 {
			runtime.GC()
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		stacks[k] = m.StackInuse
		k++
		return m.HeapInuse + m.StackInuse, runtime.NumGoroutine()
	}

	b.ResetTimer()
	m0, g0 := measure()
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = send("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mem","version":"1"}}}`)
		send(ids[i], `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	post.CloseIdleConnections()
	m1, _ := measure()
	conns := make([]net.Conn, 0, b.N)
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for _, id := range ids {
		c, err := net.Dial("tcp", host)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n", host, a.Credential, id)
		br := bufio.NewReaderSize(c, 512)
		status, err := br.ReadString('\n')
		if err != nil || !strings.Contains(status, " 200 ") {
			b.Fatalf("GET: %q %v", status, err)
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				b.Fatal(err)
			}
			if line == "\r\n" {
				break
			}
		}
		conns = append(conns, c)
	}
	m2, g2 := measure()
	b.StopTimer()

	if n := len(e.srv.AgentSessions(a.Agent.ID)); n != b.N {
		b.Fatalf("%d sessions, want %d", n, b.N)
	}
	n := float64(b.N)
	b.ReportMetric((float64(m1)-float64(m0))/n, "B/session")
	b.ReportMetric((float64(m2)-float64(m1))/n, "B/stream")
	b.ReportMetric((float64(m2)-float64(m0))/n, "B/session+stream")
	b.ReportMetric(float64(g2-g0)/n, "goroutines/stream")
	b.ReportMetric((float64(stacks[2])-float64(stacks[1]))/n, "stack-B/stream")
}
