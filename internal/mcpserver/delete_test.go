package mcpserver_test

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/edge"
	"github.com/rollcall/rollcall/internal/mcpserver"
)

// A DELETE that names a live session ends it with the session's credential
// or with none at all (the id is the proof), which is what mcp-go's Close
// sends when the credential is configured with WithHTTPHeaders as its
// README shows: the session is gone and no failed authentication is
// counted. Another agent's valid credential is 403 and a wrong one 401,
// and the session lives on after both; an id that names no live session
// is 404 without a credential.
func TestDeleteBySessionID(t *testing.T) {
	lim := edge.New(edge.Options{MaxFailures: 1, Log: slog.New(slog.DiscardHandler)})
	e := newEnvServer(t, func(ts *httptest.Server) { ts.Config.Handler = lim.Handler(ts.Config.Handler) })
	a := e.vend("ada", allVerbs, "q1")
	b := e.vend("bob", allVerbs, "q1")

	tr, err := transport.NewStreamableHTTP(e.url, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + a.Credential}),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20250618
	init.Params.ClientInfo = mcp.Implementation{Name: "readme-configured", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	id := c.GetSessionId()
	e.waitEvent(id, mcpserver.SessionOpened)
	// The id is the proof: 192 bits from crypto/rand (at least 128 needed).
	if raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(id, "rcs_")); err != nil || len(raw) < 16 || !strings.HasPrefix(id, "rcs_") {
		t.Fatalf("session id %q: %d bytes, %v", id, len(raw), err)
	}
	if err := c.Close(); err != nil { // DELETE with the session id, without the headers
		t.Fatal(err)
	}
	e.waitEvent(id, mcpserver.SessionClosed)
	if s := e.sessions(a.Agent.ID); len(s) != 0 {
		t.Fatalf("sessions after mcp-go's Close: %+v", s)
	}
	if _, blocked := lim.Limiter().Blocked("127.0.0.1", ""); blocked {
		t.Fatal("the credential-less DELETE was counted as a failed authentication")
	}
	wantProblem(t, e.raw(http.MethodDelete, "", id, ""), http.StatusNotFound, domain.CodeNotFound)
	if _, blocked := lim.Limiter().Blocked("127.0.0.1", ""); blocked {
		t.Fatal("a credential-less DELETE of an ended session was counted as a failed authentication")
	}

	ac := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	id2 := ac.sessionID()
	wantProblem(t, e.raw(http.MethodDelete, b.Credential, id2, ""), http.StatusForbidden, domain.CodeForbidden)
	wantProblem(t, e.raw(http.MethodDelete, "rca_"+strings.Repeat("x", 40), id2, ""), http.StatusUnauthorized, domain.CodeUnauthenticated)
	if s := e.sessions(a.Agent.ID); len(s) != 1 || s[0].ID != id2 {
		t.Fatalf("sessions after refused DELETEs: %+v", s)
	}
	if _, err := ac.call("list_todos", nil); err != nil {
		t.Fatalf("the session after refused DELETEs: %v", err)
	}
	if resp := e.raw(http.MethodDelete, a.Credential, id2, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE with the session's credential: %d", resp.StatusCode)
	}
	e.waitEvent(id2, mcpserver.SessionClosed)
}
