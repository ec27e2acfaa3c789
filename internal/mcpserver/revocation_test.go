package mcpserver_test

import (
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/mcpserver"
	"github.com/rollcall/rollcall/internal/store"
)

// revokeBehindTheBack revokes the agent in the store only: no bus signal
// reaches this instance, as when another instance revoked it and the NOTIFY
// was lost.
func (e *env) revokeBehindTheBack(agentID string) {
	e.t.Helper()
	_, err := e.store.RevokeAgent(e.ctx, store.RevokeAgentParams{ID: agentID, Now: e.clock.Now(),
		Audit: domain.AuditRecord{Actor: "system", Action: "agent.revoke", AgentID: agentID}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// TestRecheckClosesSessionWithoutBusSignal: a session (with its open GET
// stream) whose credential was revoked elsewhere is closed within one
// re-check period (design: Revocation within 5 s).
func TestRecheckClosesSessionWithoutBusSignal(t *testing.T) {
	e := newEnv(t)
	a := e.vend("ada", allVerbs, "q1")
	ac := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125, listen: true})
	id := ac.sessionID()
	e.waitEvent(id, mcpserver.StreamOpened)
	e.revokeBehindTheBack(a.Agent.ID)
	e.clock.Advance(app.RecheckInterval)
	if ev := e.waitEvent(id, mcpserver.SessionClosed); ev.Reason != "credential no longer valid" {
		t.Fatalf("closed with reason %q", ev.Reason)
	}
	e.waitEvent(id, mcpserver.StreamClosed)
	if s := e.sessions(a.Agent.ID); len(s) != 0 {
		t.Fatalf("sessions after the re-check: %+v", s)
	}
}

// TestCredentialCache: a tool call reuses the credential lookup for
// app.CredentialCacheTTL (a revoke the bus did not announce is honoured
// after at most that), and a revoke through this instance invalidates the
// cache at once (design: Credential cache).
func TestCredentialCache(t *testing.T) {
	e := newEnv(t, func(o *mcpserver.Options) { o.Recheck = -1 })
	a := e.vend("ada", allVerbs, "q1")
	ac := e.connect(a.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	ac.ok("list_todos", nil, nil)
	e.revokeBehindTheBack(a.Agent.ID)
	ac.ok("list_todos", nil, nil) // served from the cache: the store says revoked
	e.clock.Advance(app.CredentialCacheTTL)
	wantProblem(t, e.raw("POST", a.Credential, ac.sessionID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`), 401, domain.CodeUnauthenticated)

	b := e.vend("bea", allVerbs, "q1")
	bc := e.connect(b.Credential, clientConfig{version: mcp.ProtocolVersion20251125})
	bc.ok("list_todos", nil, nil)
	if _, err := e.svc.RevokeAgent(e.ctx, e.admin, "bea"); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, e.raw("POST", b.Credential, "", `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`), 401, domain.CodeUnauthenticated)
}

// BenchmarkAuthenticateAgent compares the store lookup of an agent
// credential with the cached lookup MCP requests use (see docs/benchmarks.md).
//
//	go test -run '^$' -bench BenchmarkAuthenticateAgent -benchtime 20000x ./internal/mcpserver/
func BenchmarkAuthenticateAgent(b *testing.B) {
	e := newEnv(b)
	a := e.vend("ada", allVerbs, "q1")
	b.Run("store", func(b *testing.B) {
		for range b.N {
			if _, err := e.svc.AuthenticateAgent(e.ctx, a.Credential); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for range b.N {
			if _, err := e.svc.AuthenticateAgentCached(e.ctx, a.Credential); err != nil {
				b.Fatal(err)
			}
		}
	})
}
