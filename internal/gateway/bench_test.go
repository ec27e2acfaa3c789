package gateway_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/gateway"
	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/testkit"
)

// BenchmarkGatewayHeartbeat: heartbeats with member agent over real
// WebSocket connections on loopback (client and server in this process),
// each connection closed loop (send, wait for the ack). The time is per
// heartbeat over all connections.
//
//	go test -run '^$' -bench GatewayHeartbeat -benchmem ./internal/gateway/
func BenchmarkGatewayHeartbeat(b *testing.B) {
	for _, conns := range []int{1, 64} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) { benchGateway(b, conns) })
	}
}

func benchGateway(b *testing.B, conns int) {
	st, err := sqlite.Open(b.Context(), filepath.Join(testkit.LooseTempDir(b), "r.db"))
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	svc := app.New(app.Options{Store: st, Clock: clockwork.NewRealClock(), Log: log,
		Liveness: app.LivenessConfig{RateLimit: 1e9, RateBurst: 1 << 30}})
	admin, _ := testkit.BootstrapAdmin(b, svc)
	gw := gateway.New(gateway.Options{Service: svc, Log: log})
	mux := http.NewServeMux()
	mux.Handle("/v1/gateway", gw)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer gw.Shutdown(context.Background())
	ctx := context.Background()
	cs := make([]*websocket.Conn, conns)
	for i := range cs {
		res, err := svc.Vend(b.Context(), admin, app.VendInput{Handle: fmt.Sprintf("bench-%d", i), Queues: []string{"q"}})
		if err != nil {
			b.Fatal(err)
		}
		c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/gateway", nil)
		if err != nil {
			b.Fatal(err)
		}
		c.Read(ctx)
		c.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+res.Credential+`"}}`))
		c.Read(ctx)
		cs[i] = c
	}
	frame := []byte(`{"op":"heartbeat","d":{"agent":{"state":"online","billing_mode":"subscription","tool_class":"claude-code","runtime_version":"2.1.3","billing_evidence":{"key_type":"oauth","method":"credentials_file"},"details":{"adapter":{"name":"rollcall-load","version":"1"},"runtime":{"name":"claude-code"}}}}}`)
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / conns
	for i, c := range cs {
		n := per
		if i == 0 {
			n += b.N % conns
		}
		wg.Go(func() {
			for range n {
				if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
					b.Error(err)
					return
				}
				if _, _, err := c.Read(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	for _, c := range cs {
		c.CloseNow()
	}
}
