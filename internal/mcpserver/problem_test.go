package mcpserver

import (
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
)

// A store that cannot be reached is an unavailable tool error (and a 503
// with Retry-After at the HTTP level), not an internal one.
func TestUnavailableStoreErrors(t *testing.T) {
	down := fmt.Errorf("get agent: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	de, known := asDomainError(down)
	if known || de.Code != domain.CodeUnavailable || de.Detail != "the database cannot be reached right now; retry after 5 s" {
		t.Fatalf("asDomainError(%v) = %+v, %v", down, de, known)
	}
	if de, _ := asDomainError(errors.New("boom")); de.Code != domain.CodeInternal {
		t.Fatalf("anything else: %+v", de)
	}
	w := httptest.NewRecorder()
	writeProblemErr(w, statusOf(de.Code), de)
	if w.Code != 503 || w.Header().Get("Retry-After") != "5" {
		t.Fatalf("HTTP answer %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}
