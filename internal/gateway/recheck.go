package gateway

import (
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
)

// recheckLoop re-checks the credential of every identified connection each
// Options.Recheck (default app.RecheckInterval) with one store query, and
// closes those whose credential was revoked or rotated or whose agent was
// revoked or deactivated with 4004. So a revocation holds on this instance
// within one period even when its bus signal was lost (design: Revocation within 5 s). The
// loop runs while connections are open and ends at Shutdown.
func (g *Gateway) recheckLoop(t clockwork.Ticker) {
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.Chan():
		}
		g.recheck()
	}
}

func (g *Gateway) recheck() {
	g.mu.Lock()
	byCred := map[string][]*conn{}
	for _, m := range g.byAgent {
		for c := range m {
			byCred[c.credID] = append(byCred[c.credID], c)
		}
	}
	g.mu.Unlock()
	dead, err := app.NoLongerValid(g.svc, byCred)
	if err != nil {
		g.log.Warn("gateway: re-checking credentials failed; connections kept until the next check", "err", err)
		return
	}
	for _, c := range dead {
		g.log.Info("gateway: connection closed, credential no longer valid", "credential_id", c.credID)
		go c.close(CloseAuthFailed, "credential revoked")
	}
}
