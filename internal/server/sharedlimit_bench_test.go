package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/rollcall/rollcall/internal/config"
	"github.com/rollcall/rollcall/internal/pgtest"
)

// BenchmarkSharedFailedAuth measures what counting failed authentications
// in PostgreSQL adds (design: Limits shared by instances), through the whole
// handler chain on a PostgreSQL store, in process: a wrong token from a
// fresh address each time (a counted failure under the limit, the 401)
// and the admin's valid token, each with the limiter counting in the
// database ("shared") and in process ("local"). A valid token costs the
// same in both (the limiter does no I/O for it); a failure costs one upsert
// more when shared (docs/benchmarks.md, "Shared failure limits").
func BenchmarkSharedFailedAuth(b *testing.B) {
	cfg, err := config.Load(nil, []string{"ROLLCALL_LISTEN=127.0.0.1:0", "ROLLCALL_STORE=" + pgtest.FreshDatabase(b), "ROLLCALL_BOOTSTRAP_TOKEN=" + testAdmin})
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(context.Background(), cfg, Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.closeAll)
	h := s.httpSrv.Handler
	serve := func(from, token string) int {
		req := httptest.NewRequest("GET", "/v1/agents", nil)
		req.RemoteAddr = from
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	shared := s.Edge.Limiter()
	for _, mode := range []string{"shared", "local"} {
		if mode == "local" {
			shared.SetShared(nil, nil) // from here on the limiter counts in process
		}
		b.Run("wrong_token_under_limit_"+mode, func(b *testing.B) {
			codes, i := map[int]int{}, 0
			for b.Loop() {
				i++
				codes[serve(fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255), fmt.Sprintf("rcp_%s%08d-secretsecretsecret", mode[:1], i))]++
			}
			b.Logf("statuses %v", codes)
		})
		b.Run("valid_admin_token_"+mode, func(b *testing.B) {
			codes := map[int]int{}
			for b.Loop() {
				codes[serve("192.0.2.9:1234", testAdmin)]++
			}
			b.Logf("statuses %v", codes)
		})
	}
}
