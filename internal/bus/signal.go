package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rollcall/rollcall/internal/domain"
)

// Signal is one typed bus message: the channel it travels on and its
// payload. Every channel's payload is encoded and decoded by its signal
// type here, so no handler parses a payload by hand.
type Signal interface {
	// Channel names the channel the signal travels on.
	Channel() string
	// Encode returns the payload (at most 8000 bytes on PostgreSQL).
	Encode() string
}

// decoder is a signal type whose pointer decodes a payload into it.
type decoder[S any] interface {
	*S
	Signal
	// Decode parses payload; an error means it is not a signal of this type.
	Decode(payload string) error
}

// Send publishes s on its channel to every instance (the publisher's own
// included). Errors: the bus's.
func Send(ctx context.Context, b Bus, s Signal) error {
	return b.Publish(ctx, s.Channel(), s.Encode())
}

// Listen subscribes fn to the signals of type S on their channel until the
// returned func is called. A payload that does not decode is passed to bad
// with the decoding error (nil bad = dropped). fn runs on the bus's
// delivery goroutine and must not block for long.
func Listen[S any, P decoder[S]](b Bus, fn func(S), bad func(payload string, err error)) (unsubscribe func()) {
	var zero S
	return b.Subscribe(P(&zero).Channel(), func(payload string) {
		var s S
		if err := P(&s).Decode(payload); err != nil {
			if bad != nil {
				bad(payload, err)
			}
			return
		}
		fn(s)
	})
}

var errEmpty = errors.New("empty payload")

// TodoReady (ChannelTodoReady) says a push-eligible todo was committed:
// ring its doorbell. Wire form: the JSON of domain.TodoReady.
type TodoReady struct{ domain.TodoReady }

// Channel implements Signal.
func (TodoReady) Channel() string { return ChannelTodoReady }

// Encode implements Signal.
func (s TodoReady) Encode() string {
	b, _ := json.Marshal(s.TodoReady) // strings only
	return string(b)
}

// Decode parses the JSON of a domain.TodoReady.
func (s *TodoReady) Decode(payload string) error {
	return json.Unmarshal([]byte(payload), &s.TodoReady)
}

// AgentSessions (ChannelAgentSessions) closes an agent's sessions and
// connections on every instance after a revoke or a credential rotation:
// all of them when Credentials is empty, else those bound to one of the
// credential ids. Wire form: "<agent_id>" or "<agent_id>:<cred>,<cred>…".
type AgentSessions struct {
	AgentID     string
	Credentials []string
}

// Channel implements Signal.
func (AgentSessions) Channel() string { return ChannelAgentSessions }

// Encode implements Signal.
func (s AgentSessions) Encode() string {
	if len(s.Credentials) == 0 {
		return s.AgentID
	}
	return s.AgentID + ":" + strings.Join(s.Credentials, ",")
}

// Decode parses "<agent_id>[:<cred>,…]".
func (s *AgentSessions) Decode(payload string) error {
	agentID, creds, _ := strings.Cut(payload, ":")
	if agentID == "" {
		return errEmpty
	}
	*s = AgentSessions{AgentID: agentID}
	if creds != "" {
		s.Credentials = strings.Split(creds, ",")
	}
	return nil
}

// Presence (ChannelPresence) says a write may have changed an agent's
// presence inputs or configuration (override, shift, readiness, vend,
// update): every instance refreshes its cached copy. Cause names the write
// ("" = none), e.g. "clock_in", "operator", "readiness". Wire form:
// "<agent_id>:<cause>".
type Presence struct {
	AgentID string
	Cause   string
}

// Channel implements Signal.
func (Presence) Channel() string { return ChannelPresence }

// Encode implements Signal.
func (s Presence) Encode() string { return s.AgentID + ":" + s.Cause }

// Decode parses "<agent_id>:<cause>" (a payload without ":" has no cause).
func (s *Presence) Decode(payload string) error {
	agentID, cause, _ := strings.Cut(payload, ":")
	if agentID == "" {
		return errEmpty
	}
	*s = Presence{AgentID: agentID, Cause: cause}
	return nil
}

// PresenceTransition (ChannelPresenceTransition) comes from the one
// instance that claimed an in/out transition (design: Presence
// evaluation). Wire form: "<agent_id>:<in|out>:<reason>".
type PresenceTransition struct {
	AgentID  string
	Presence string // "in" or "out"
	Reason   string
}

// Channel implements Signal.
func (PresenceTransition) Channel() string { return ChannelPresenceTransition }

// Encode implements Signal.
func (s PresenceTransition) Encode() string { return s.AgentID + ":" + s.Presence + ":" + s.Reason }

// Decode parses "<agent_id>:<presence>:<reason>".
func (s *PresenceTransition) Decode(payload string) error {
	parts := strings.SplitN(payload, ":", 3)
	if len(parts) != 3 || parts[0] == "" {
		return fmt.Errorf("presence transition %q: want <agent_id>:<presence>:<reason>", payload)
	}
	*s = PresenceTransition{AgentID: parts[0], Presence: parts[1], Reason: parts[2]}
	return nil
}
