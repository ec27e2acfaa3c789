package doorbell

import (
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// SessionInfo describes one MCP session hosted by this instance.
type SessionInfo struct {
	ID           string
	AgentID      string
	CredentialID string
	// Streaming is true while the client holds the session's GET
	// notification stream open.
	Streaming bool
	OpenedAt  time.Time
	// LastActive is when the client was last seen on the session: now while
	// a request of it (a GET stream included) is in flight, else the end of
	// its last request.
	LastActive time.Time
	// LastRequestAt is the end of the session's last POST (zero = none
	// since initialize): proof that the client still acts, which a held-open
	// GET stream is not.
	LastRequestAt time.Time
	// Stalled is true after a write on the session's stream ran past the
	// write deadline, until the client acts again (a POST or a new stream):
	// such a session is not preferred (design: Stream writes).
	Stalled bool
}

// SessionLiveWindow: a session without an open stream whose client has not
// been seen for this long is not counted as live (the console's session
// count); it expires soon after.
const SessionLiveWindow = 2 * time.Minute

// Live reports whether the session counts as live at now: it has an open
// stream or its client was seen within SessionLiveWindow.
func (si SessionInfo) Live(now time.Time) bool {
	return si.Streaming || now.Sub(si.LastActive) < SessionLiveWindow
}

// SessionHub is the port to this instance's MCP sessions, implemented by
// the MCP adapter.
type SessionHub interface {
	// AgentSessions lists this instance's live sessions of the agent.
	AgentSessions(agentID string) []SessionInfo
	// Notify queues a channel notification on one session without blocking;
	// an error means it was not queued (full buffer, gone, not initialized).
	Notify(sessionID string, m domain.ChannelMessage) error
	// CloseAgentSessions closes the agent's sessions: all when creds is nil,
	// otherwise those bound to one of the credential ids.
	CloseAgentSessions(agentID string, creds []string)
	// AgentsWithSessions lists the agents with at least one session here.
	AgentsWithSessions() []string
}

// The hub's owner also tells the engine when an agent gains its first open
// notification stream on this instance (Engine.StreamOpened, through the
// use cases) and hands back the doorbells a session queued but never wrote
// when it closes or loses its stream (Engine.Redeliver).

// ToldReporter is optionally implemented by a SessionHub whose streams can
// deliver doorbells on their own when they open: queued ones written to
// the new stream, and replayed ones after a resume (SSE Last-Event-ID).
// ToldOnOpen lists the todo ids the session's stream opening right now
// delivers that way; a reconnect digest does not count them again, so no
// todo is told twice (design: Connect and reconnect digests).
type ToldReporter interface {
	ToldOnOpen(sessionID string) []string
}
