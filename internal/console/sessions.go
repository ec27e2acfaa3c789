package console

import (
	"github.com/rollcall/rollcall/internal/app"
)

// SessionCounter lists the MCP sessions of an agent hosted by this instance
// (mcpserver.Server implements it). With several instances behind a load
// balancer each one counts only its own sessions.
type SessionCounter interface {
	AgentSessions(agentID string) []app.SessionInfo
}
