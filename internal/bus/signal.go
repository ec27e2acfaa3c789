package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
func Send[S Signal](ctx context.Context, b Bus, s S) error {
	return b.Publish(ctx, s.Channel(), s.Encode())
}

// Post sends s like Send, but on a bus that can queue it (a Queuer) it
// returns before the signal has gone out; failed, if not nil, is called
// with the error when it could not be sent. On other buses it publishes at
// once and calls failed on an error. For signals after a commit whose
// sender would only log a failure: the request that committed need not
// wait for the signal's own round trip (design: Bus delivery).
func Post[S Signal](b Bus, s S, failed func(error)) {
	if q, ok := b.(Queuer); ok {
		q.Enqueue(s.Channel(), s.Encode(), failed)
		return
	}
	if err := b.Publish(context.Background(), s.Channel(), s.Encode()); err != nil && failed != nil {
		failed(err)
	}
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
// presence inputs or configuration: every instance refreshes its cached
// copy. Cause names the write: "" for the agent's configuration (vend,
// update, hand-over, clock-in cap), else a presence write ("clock_in",
// "clock_out", "operator") or "readiness" (project readiness), which
// change no configuration. Origin, when set, is the instance that made the
// write and already cached the row it wrote: its presence cache skips the
// refresh. Config, when set (with Origin), is the configuration the write
// stored, so a liveness tracker needs no read. Wire form:
// "<agent_id>:<cause>", "<agent_id>:<cause>:<origin>" or
// "<agent_id>:<cause>:<origin>:<config>" (AgentConfig's form); an instance
// that knows no config reads the last part as part of the origin, which is
// then not its own, and refreshes by reading the row.
type Presence struct {
	AgentID string
	Cause   string
	Origin  string
	Config  *AgentConfig
}

// AgentConfig is what a liveness tracker keeps of an agent's configuration
// (the agent row after a configuration write). Wire form:
// "<handle>,<0|1>,<billing_mode>,<tool_class>,<updated_at unix µs>"; the
// handle, the billing mode and the tool class are names (no "," or ":").
type AgentConfig struct {
	Handle                 string
	Active                 bool // active and not revoked
	BillingMode, ToolClass string
	UpdatedAt              time.Time
}

// ConfigOf returns the configuration of an agent row.
func ConfigOf(a *domain.Agent) *AgentConfig {
	return &AgentConfig{Handle: a.Handle, Active: a.Active && !a.Revoked(), BillingMode: a.BillingMode, ToolClass: a.ToolClass, UpdatedAt: a.UpdatedAt}
}

func (c AgentConfig) encode() string {
	active := "0"
	if c.Active {
		active = "1"
	}
	return c.Handle + "," + active + "," + c.BillingMode + "," + c.ToolClass + "," + strconv.FormatInt(c.UpdatedAt.UnixMicro(), 10)
}

func decodeAgentConfig(s string) (*AgentConfig, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 5 || (parts[1] != "0" && parts[1] != "1") {
		return nil, fmt.Errorf("agent config %q: want <handle>,<0|1>,<billing_mode>,<tool_class>,<unix_micro>", s)
	}
	us, err := strconv.ParseInt(parts[4], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("agent config %q: %w", s, err)
	}
	return &AgentConfig{Handle: parts[0], Active: parts[1] == "1", BillingMode: parts[2], ToolClass: parts[3], UpdatedAt: time.UnixMicro(us).UTC()}, nil
}

// ConfigChanged reports whether the write may have changed the agent's
// configuration (handle, active, billing), not only its presence inputs:
// a cache of configuration refreshes on these signals only.
func (s Presence) ConfigChanged() bool { return s.Cause == "" }

// Channel implements Signal.
func (Presence) Channel() string { return ChannelPresence }

// Encode implements Signal.
func (s Presence) Encode() string {
	switch {
	case s.Config != nil && s.Origin != "":
		return s.AgentID + ":" + s.Cause + ":" + s.Origin + ":" + s.Config.encode()
	case s.Origin != "":
		return s.AgentID + ":" + s.Cause + ":" + s.Origin
	}
	return s.AgentID + ":" + s.Cause
}

// Decode parses "<agent_id>:<cause>[:<origin>[:<config>]]" (a payload
// without ":" has no cause; a config that does not parse stays part of the
// origin).
func (s *Presence) Decode(payload string) error {
	agentID, rest, _ := strings.Cut(payload, ":")
	if agentID == "" {
		return errEmpty
	}
	cause, rest, _ := strings.Cut(rest, ":")
	*s = Presence{AgentID: agentID, Cause: cause, Origin: rest}
	if origin, cfg, ok := strings.Cut(rest, ":"); ok {
		// A configuration that does not parse (a later release's form) is
		// read as part of the origin, as an earlier release reads it: the
		// signal still refreshes, by reading the row.
		if c, err := decodeAgentConfig(cfg); err == nil {
			s.Origin, s.Config = origin, c
		}
	}
	return nil
}

// PresenceTransition (ChannelPresenceTransition) comes from the one
// instance that claimed an in/out transition (design:
// Transition claim). Wire form: "<agent_id>:<in|out>:<reason>".
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

// Team (ChannelTeam) ends open streams and sessions on every instance
// after a person or token change, drops cached lookups of a person whose
// role or name changed, or moves an agent's events to its new owner. Wire
// form: "token:<token_id>", "person:<person_id>",
// "person_updated:<person_id>" or "owner:<agent_id>:<owner_id>:<handle>".
type Team struct {
	Kind string // TeamToken, TeamPerson, TeamPersonUpdated or TeamOwner
	// ID is the token id (TeamToken), the person id (TeamPerson, the
	// person was deactivated; TeamPersonUpdated, the person changed and
	// is active) or the agent id (TeamOwner).
	ID string
	// OwnerID and Handle are the agent's new owner and its handle
	// (TeamOwner only).
	OwnerID, Handle string
}

// Team kinds.
const (
	TeamToken         = "token"
	TeamPerson        = "person"
	TeamPersonUpdated = "person_updated"
	TeamOwner         = "owner"
)

// Channel implements Signal.
func (Team) Channel() string { return ChannelTeam }

// Encode implements Signal.
func (s Team) Encode() string {
	if s.Kind == TeamOwner {
		return s.Kind + ":" + s.ID + ":" + s.OwnerID + ":" + s.Handle
	}
	return s.Kind + ":" + s.ID
}

// Decode parses the three forms; another kind is an error.
func (s *Team) Decode(payload string) error {
	kind, rest, _ := strings.Cut(payload, ":")
	switch kind {
	case TeamToken, TeamPerson, TeamPersonUpdated:
		*s = Team{Kind: kind, ID: rest}
		return nil
	case TeamOwner:
		parts := strings.SplitN(rest, ":", 3)
		if len(parts) == 3 {
			*s = Team{Kind: kind, ID: parts[0], OwnerID: parts[1], Handle: parts[2]}
			return nil
		}
	}
	return fmt.Errorf("team signal %q: want token:<id>, person:<id>, person_updated:<id> or owner:<agent>:<owner>:<handle>", payload)
}

// LivenessClaim is one heartbeat ownership claim: Instance holds a
// heartbeat of the agent at Heartbeat (design:
// Deadline ownership).
type LivenessClaim struct {
	AgentID, Instance string
	Heartbeat         time.Time
}

// LivenessClaims (ChannelLiveness) carries claims, one a line. Wire form:
// "<agent_id>:<instance_id>:<unix_micro>" lines joined by "\n".
type LivenessClaims struct{ Claims []LivenessClaim }

// Channel implements Signal.
func (LivenessClaims) Channel() string { return ChannelLiveness }

// Encode implements Signal.
func (s LivenessClaims) Encode() string {
	var b strings.Builder
	for i, c := range s.Claims {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.AgentID + ":" + c.Instance + ":" + strconv.FormatInt(c.Heartbeat.UnixMicro(), 10))
	}
	return b.String()
}

// Decode parses the claim lines, skipping lines that do not parse; a sync
// request ("?:" prefix) is an error.
func (s *LivenessClaims) Decode(payload string) error {
	if strings.HasPrefix(payload, "?:") {
		return errors.New("a liveness sync request, not claims")
	}
	*s = LivenessClaims{}
	for line := range strings.SplitSeq(payload, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		us, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			continue
		}
		s.Claims = append(s.Claims, LivenessClaim{AgentID: parts[0], Instance: parts[1], Heartbeat: time.UnixMicro(us).UTC()})
	}
	return nil
}

// Batches splits the claims into signals whose payloads each hold at most
// maxBytes bytes (a single claim longer than that travels alone), in
// order: under PostgreSQL's NOTIFY limit with maxBytes < 8000.
func (s LivenessClaims) Batches(maxBytes int) []LivenessClaims {
	var out []LivenessClaims
	var cur LivenessClaims
	size := 0
	for _, c := range s.Claims {
		n := len(c.AgentID) + len(c.Instance) + 2 + len(strconv.FormatInt(c.Heartbeat.UnixMicro(), 10))
		if len(cur.Claims) > 0 && size+1+n > maxBytes {
			out = append(out, cur)
			cur, size = LivenessClaims{}, 0
		}
		if len(cur.Claims) > 0 {
			size++ // the newline
		}
		size += n
		cur.Claims = append(cur.Claims, c)
	}
	if len(cur.Claims) > 0 {
		out = append(out, cur)
	}
	return out
}

// LivenessSync (ChannelLiveness) is sent by a starting (or reconnected)
// instance: every other instance answers with the claims of the fresh
// heartbeats it holds. Wire form: "?:<instance_id>".
type LivenessSync struct{ Instance string }

// Channel implements Signal.
func (LivenessSync) Channel() string { return ChannelLiveness }

// Encode implements Signal.
func (s LivenessSync) Encode() string { return "?:" + s.Instance }

// Decode parses "?:<instance_id>"; claims are an error.
func (s *LivenessSync) Decode(payload string) error {
	inst, ok := strings.CutPrefix(payload, "?:")
	if !ok {
		return errors.New("liveness claims, not a sync request")
	}
	*s = LivenessSync{Instance: inst}
	return nil
}

// Event (ChannelEvents) is one operator event for the event hubs of every
// instance (internal/events; design: Operator event stream). Data is the
// kind's JSON data; OwnerID, the owner of AgentID, picks the subscribers.
// Wire form: the JSON object {"id","kind","at","agent_id"?,"owner_id"?,"data"}.
type Event struct {
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	At      time.Time       `json:"at"`
	AgentID string          `json:"agent_id,omitempty"`
	OwnerID string          `json:"owner_id,omitempty"`
	Data    json.RawMessage `json:"data"`
}

// Channel implements Signal.
func (Event) Channel() string { return ChannelEvents }

// Encode implements Signal.
func (s Event) Encode() string {
	b, _ := json.Marshal(s) // strings, a time and raw JSON (valid, or null when empty)
	return string(b)
}

// Decode parses the JSON object; one without an id is an error.
func (s *Event) Decode(payload string) error {
	var e Event
	if err := json.Unmarshal([]byte(payload), &e); err != nil {
		return err
	}
	if e.ID == "" {
		return errors.New("event without an id")
	}
	*s = e
	return nil
}
