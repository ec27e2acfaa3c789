package mcpserver

import (
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
)

// recheckLoop re-checks the credential of every session on this instance
// each Options.Recheck (default app.RecheckInterval), with one store query
// for all of them, and closes the sessions whose credential was revoked or
// rotated or whose agent was revoked or deactivated: their GET streams end
// and their ids answer 404. So a revocation holds here within one period
// even when its bus signal was lost (design: Revocation within 5 s).
func (s *Server) recheckLoop(t clockwork.Ticker) {
	defer s.loops.Done()
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.Chan():
		}
		s.recheck()
	}
}

func (s *Server) recheck() {
	byCred := map[string][]string{}
	s.mu.RLock()
	for id, x := range s.sessions {
		if !x.gone {
			byCred[x.credID] = append(byCred[x.credID], id)
		}
	}
	s.mu.RUnlock()
	dead, err := app.NoLongerValid(s.svc, byCred)
	if err != nil {
		s.log.Warn("mcp: re-checking session credentials failed; sessions kept until the next check", "err", err)
		return
	}
	for _, id := range dead {
		s.closeSession(id, "credential no longer valid")
	}
}
