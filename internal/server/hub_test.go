package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/testkit"
)

// bothClosed waits until the agent's gateway connection closed with 4004 and
// its MCP session left the instance, and the connection hub holds nothing of
// the agent.
func bothClosed(t *testing.T, in *instance, agentID string, gw <-chan websocket.StatusCode) {
	t.Helper()
	select {
	case code := <-gw:
		if code != 4004 {
			t.Errorf("gateway closed with %d, want 4004", code)
		}
	case <-time.After(wait):
		t.Fatal("the gateway connection stayed open")
	}
	eventually(t, "the MCP session closed", func() bool { return len(in.srv.MCP.AgentSessions(agentID)) == 0 })
	eventually(t, "the hub emptied of the agent", func() bool { return len(in.srv.Hub.Conns(agentID)) == 0 })
}

// TestOneHubForBothTransports: an agent's MCP session and gateway
// connection on one instance are registered in the one connection hub, and
// one revocation closes both; with no bus signal at all (the agent revoked
// in the store behind the instance's back), the hub's periodic re-check
// closes both (design: Connection hub, Revocation within 5 s).
func TestOneHubForBothTransports(t *testing.T) {
	in := startInstance(t, "sqlite:"+filepath.Join(t.TempDir(), "r.db"))

	a := vend(t, in, "ada")
	openSession(t, in, a.Agent.ID, a.Credential)
	gw := testkit.Gateway(t, in.base, a.Credential)
	eventually(t, "both connections in the hub", func() bool { return len(in.srv.Hub.Conns(a.Agent.ID)) == 2 })
	if _, err := in.srv.Service.RevokeAgent(context.Background(), in.admin, "ada"); err != nil {
		t.Fatal(err)
	}
	bothClosed(t, in, a.Agent.ID, gw)

	b := vend(t, in, "bea")
	openSession(t, in, b.Agent.ID, b.Credential)
	gw = testkit.Gateway(t, in.base, b.Credential)
	eventually(t, "both connections in the hub", func() bool { return len(in.srv.Hub.Conns(b.Agent.ID)) == 2 })
	if _, err := in.srv.Store.RevokeAgent(context.Background(), store.RevokeAgentParams{ID: b.Agent.ID, Now: time.Now(),
		Audit: domain.AuditRecord{Actor: "system", Action: "agent.revoke", AgentID: b.Agent.ID}}); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	bothClosed(t, in, b.Agent.ID, gw)
	if d := time.Since(revokedAt); d > 5*time.Second {
		t.Errorf("the re-check closed both %s after the revoke, want ≤ 5s", d)
	}
}
