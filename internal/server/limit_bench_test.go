package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// BenchmarkFailedAuthLimit measures one request of a client that is over
// the failed-auth limit, through the whole handler chain (edge, mux,
// authenticators, SQLite store) in process, without TCP (the 192.0.2.1
// client is over the limit; the reference case is under it). Run on a tree
// whose edge refuses before verifying, every case is that early 429; with
// verification first, a wrong token costs its check before the 429 (a
// fresh one each op: one store probe; the same one: a remembered verdict)
// and a valid credential is served (docs/benchmarks.md, "Failed-auth limit").
func BenchmarkFailedAuthLimit(b *testing.B) {
	s, cfg := openSQLite(b, slog.New(slog.DiscardHandler))
	b.Cleanup(s.closeAll)
	admin, err := s.Service.AuthenticatePerson(context.Background(), testAdmin)
	if err != nil {
		b.Fatal(err)
	}
	v, err := s.Service.Vend(context.Background(), admin, app.VendInput{Handle: "bench", Queues: []string{"q1"}, Verbs: domain.ScopeVerbs})
	if err != nil {
		b.Fatal(err)
	}
	h := s.httpSrv.Handler
	var serveFrom func(from, method, path, token, body string) int
	serve := func(method, path, token, body string) int {
		return serveFrom("192.0.2.1:1234", method, path, token, body)
	}
	serveFrom = func(from, method, path, token, body string) int {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, path, r)
		req.RemoteAddr = from
		req.Host = "127.0.0.1"
		req.Header.Set("Authorization", "Bearer "+token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	for i := range cfg.Auth.MaxFailures {
		if code := serve("GET", "/v1/agents", fmt.Sprintf("rcp_wrong%03d-secretsecretsecret", i), ""); code != http.StatusUnauthorized {
			b.Fatalf("failure %d: %d", i+1, code)
		}
	}
	// For reference, a wrong token of a client under the limit (a fresh
	// address and prefix each time): the 401 both trees answer.
	b.Run("wrong_person_token_rest_under_limit", func(b *testing.B) {
		codes, i := map[int]int{}, 0
		for b.Loop() {
			i++
			codes[serveFrom(fmt.Sprintf("10.%d.%d.%d:1234", i>>16&255, i>>8&255, i&255), "GET", "/v1/agents", fmt.Sprintf("rcp_%08d-secretsecretsecret", i), "")]++
		}
		b.Logf("statuses %v", codes)
	})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, c := range []struct {
		name, method, path, token, body string
	}{
		{"wrong_person_token_rest", "GET", "/v1/agents", "rcp_wrongXXXX-secretsecretsecret", ""},
		{"wrong_agent_credential_mcp", "POST", "/mcp", "rca_wrongXXXX-secretsecretsecret", ping},
		{"valid_agent_credential_mcp", "POST", "/mcp", v.Credential, ping},
		{"valid_admin_token_rest", "GET", "/v1/agents", testAdmin, ""},
	} {
		b.Run(c.name, func(b *testing.B) {
			codes := map[int]int{}
			for b.Loop() {
				codes[serve(c.method, c.path, c.token, c.body)]++
			}
			b.Logf("statuses %v", codes)
		})
	}
	// A client that sends a new wrong token every request: none was seen
	// before, so each costs the store's answer for its hash.
	for _, c := range []struct {
		name, method, path, format, body string
	}{
		{"fresh_wrong_person_token_rest", "GET", "/v1/agents", "rcp_fresh%08d-secretsecretsecret", ""},
		{"fresh_wrong_agent_credential_mcp", "POST", "/mcp", "rca_fresh%08d-secretsecretsecret", ping},
	} {
		b.Run(c.name, func(b *testing.B) {
			codes, i := map[int]int{}, 0
			for b.Loop() {
				i++
				codes[serve(c.method, c.path, fmt.Sprintf(c.format, i), c.body)]++
			}
			b.Logf("statuses %v", codes)
		})
	}
}
