package testkit

import (
	"context"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// Gateway opens a WebSocket to base's /v1/gateway (base = http[s]://host:port),
// reads the hello, identifies with cred and waits for ready; dialling and
// identifying are bounded by Wait and fail t. The connection is closed when t
// ends. The returned channel receives the close status once the server
// closes the connection (4004 after a revocation; design: Gateway protocol,
// Revocation within 5 s).
func Gateway(t testing.TB, base, cred string) <-chan websocket.StatusCode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/gateway", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	if _, _, err := ws.Read(ctx); err != nil { // hello
		t.Fatal(err)
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+cred+`"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, m, err := ws.Read(ctx); err != nil || !strings.Contains(string(m), `"ready"`) {
		t.Fatalf("identify: %s %v", m, err)
	}
	closed := make(chan websocket.StatusCode, 1)
	go func() {
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				closed <- websocket.CloseStatus(err)
				return
			}
		}
	}()
	return closed
}
