package gateway

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
)

// recheckLoop re-checks the credential of every identified connection each
// Options.Recheck (default app.RecheckInterval) with one store query, and
// closes those whose credential was revoked or rotated or whose agent was
// revoked or deactivated with 4004. So a revocation holds on this instance
// within one period even when its bus signal was lost (DESIGN.md §4). The
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
	if len(byCred) == 0 {
		return
	}
	ids := make([]string, 0, len(byCred))
	for id := range byCred {
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	live, err := g.svc.LiveCredentials(ctx, ids)
	if err != nil {
		g.log.Warn("gateway: re-checking credentials failed; connections kept until the next check", "err", err)
		return
	}
	for id, cs := range byCred {
		if live[id] {
			continue
		}
		for _, c := range cs {
			g.log.Info("gateway: connection closed, credential no longer valid", "credential_id", id)
			go c.close(CloseAuthFailed, "credential revoked")
		}
	}
}
