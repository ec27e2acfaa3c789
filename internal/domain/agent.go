package domain

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Handle form of an agent and of queue names (design: Agents and handles).
var handleRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// MaxHandleLen bounds handles and queue names (bytes).
const MaxHandleLen = 64

// ValidName reports whether s has the name form `^[a-z0-9][a-z0-9._-]*$`
// (at most MaxHandleLen bytes) used by agent handles and queue names.
func ValidName(s string) bool { return len(s) <= MaxHandleLen && handleRE.MatchString(s) }

// Scope verbs an agent may be granted (design: MCP sessions).
const (
	VerbListTodos = "list_todos"
	VerbClaim     = "claim"
	VerbClaimNext = "claim_next"
	VerbRenew     = "renew"
	VerbComplete  = "complete"
	VerbFail      = "fail"
	// VerbHandOff pushes a todo to another agent of the same owner; it is
	// granted by the scope's handoff grants, never by the verb list alone
	// (design: Handoff).
	VerbHandOff = "hand_off"
)

// ScopeVerbs lists the grantable verbs in the order tools/list shows them.
// hand_off is not among them: handoff grants grant it (Scope.HasVerb).
var ScopeVerbs = []string{VerbListTodos, VerbClaim, VerbClaimNext, VerbRenew, VerbComplete, VerbFail}

// Scope is what an agent may do: the queues it may see and the verbs it may
// call. It is fixed at vend time (design: Immutable scope).
type Scope struct {
	Queues []string `json:"queues"`
	Verbs  []string `json:"verbs"`
	// Handoff lists the agent/queue pairs the hand_off verb may push to
	// (design: Handoff); empty = none, and then hand_off is not granted.
	Handoff []HandoffGrant `json:"handoff,omitempty"`
}

// HasQueue reports whether q is a granted queue.
func (s Scope) HasQueue(q string) bool { return slices.Contains(s.Queues, q) }

// HasVerb reports whether v is a granted verb. hand_off is granted exactly
// when the scope has handoff grants.
func (s Scope) HasVerb(v string) bool {
	if v == VerbHandOff {
		return len(s.Handoff) > 0
	}
	return slices.Contains(s.Verbs, v)
}

// HandoffAllowed reports whether the scope grants handing a todo to the
// agent with id agentID in queue q.
func (s Scope) HandoffAllowed(agentID, q string) bool {
	return slices.ContainsFunc(s.Handoff, func(g HandoffGrant) bool { return g.AgentID == agentID && g.Queue == q })
}

// HandoffTarget returns the grant the hand_off verb uses for to (an agent
// id or handle) and queue. Errors, with the granted pairs listed:
// forbidden (no grants), invalid_argument with pointer /to (to missing or
// not granted) or /queue (queue not granted for to).
func (s Scope) HandoffTarget(to, queue string) (HandoffGrant, error) {
	if len(s.Handoff) == 0 {
		return HandoffGrant{}, Errorf(CodeForbidden, "this agent has no handoff grants")
	}
	granted := make([]string, 0, len(s.Handoff))
	for _, g := range s.Handoff {
		granted = append(granted, g.Handle+"/"+g.Queue)
	}
	list := strings.Join(granted, ", ")
	if to == "" {
		return HandoffGrant{}, Errorf(CodeInvalidArgument, "to is required; granted: %s", list).At("/to")
	}
	toKnown := false
	for _, g := range s.Handoff {
		if g.AgentID == to || g.Handle == to {
			toKnown = true
			if g.Queue == queue {
				return g, nil
			}
		}
	}
	if !toKnown {
		return HandoffGrant{}, Errorf(CodeInvalidArgument, "%q is not an agent this agent may hand off to; granted: %s", to, list).At("/to")
	}
	return HandoffGrant{}, Errorf(CodeInvalidArgument, "queue %q is not granted for %s; granted: %s", queue, to, list).At("/queue")
}

// Bounds of a vend or update body (design: Input bounds; api/openapi.yaml
// maxItems).
const (
	MaxQueues       = 100 // queues of one agent's scope
	MaxBillingModes = 20  // billing_modes of one agent
)

// Validate checks queue names and verbs: one to MaxQueues queues, every
// queue of the name form, every verb a known scope verb, no duplicates.
// Errors are invalid_argument with pointers /queues, /queues/N or /verbs/N.
func (s Scope) Validate() error {
	if len(s.Queues) == 0 {
		return Errorf(CodeInvalidArgument, "at least one queue is required").At("/queues")
	}
	if len(s.Queues) > MaxQueues {
		return Errorf(CodeInvalidArgument, "at most %d queues, got %d", MaxQueues, len(s.Queues)).At("/queues")
	}
	if len(s.Verbs) > len(ScopeVerbs) {
		return Errorf(CodeInvalidArgument, "at most %d verbs (each scope verb once), got %d", len(ScopeVerbs), len(s.Verbs)).At("/verbs")
	}
	seen := map[string]bool{}
	for i, q := range s.Queues {
		if !ValidName(q) {
			return Errorf(CodeInvalidArgument, "queue %q must match ^[a-z0-9][a-z0-9._-]*$ (at most %d bytes)", q, MaxHandleLen).At(ptrIndex("/queues", i))
		}
		if seen[q] {
			return Errorf(CodeInvalidArgument, "queue %q is listed twice", q).At(ptrIndex("/queues", i))
		}
		seen[q] = true
	}
	seen = map[string]bool{}
	for i, v := range s.Verbs {
		if v == VerbHandOff && len(s.Handoff) == 0 {
			return Errorf(CodeInvalidArgument, "verb hand_off is granted by handoff grants; add handoff: [{agent, queue}]").At(ptrIndex("/verbs", i))
		}
		if v != VerbHandOff && !slices.Contains(ScopeVerbs, v) {
			return Errorf(CodeInvalidArgument, "verb %q is not a scope verb (one of %v)", v, ScopeVerbs).At(ptrIndex("/verbs", i))
		}
		if seen[v] {
			return Errorf(CodeInvalidArgument, "verb %q is listed twice", v).At(ptrIndex("/verbs", i))
		}
		seen[v] = true
	}
	pairs := map[HandoffGrant]bool{}
	for i, g := range s.Handoff {
		if !ValidName(g.Queue) {
			return Errorf(CodeInvalidArgument, "handoff queue %q must match ^[a-z0-9][a-z0-9._-]*$", g.Queue).At(ptrIndex("/handoff", i) + "/queue")
		}
		k := HandoffGrant{AgentID: g.AgentID, Queue: g.Queue}
		if pairs[k] {
			return Errorf(CodeInvalidArgument, "handoff to %s in queue %q is listed twice", g.Handle, g.Queue).At(ptrIndex("/handoff", i))
		}
		pairs[k] = true
	}
	return nil
}

// Agent is one registered agent: one row, one MCP endpoint, one owner
// (design: Agents and handles). Times are UTC with microsecond precision.
type Agent struct {
	ID           string     `json:"id"`
	Handle       string     `json:"handle"`
	OwnerID      string     `json:"owner_id"`
	Name         string     `json:"name"`
	Active       bool       `json:"active"`
	RevokedAt    *time.Time `json:"revoked_at"`
	Scope        Scope      `json:"scope"`
	BillingMode  string     `json:"billing_mode,omitempty"`
	BillingModes []string   `json:"billing_modes"`
	ToolClass    string     `json:"tool_class,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	// SelfClockInCap is the owner's self_clock_in_cap
	// (design: Self clock-in cap): how much of one off-shift stretch the
	// agent's own clock_in may cover.
	SelfClockInCap ClockInCap `json:"self_clock_in_cap"`

	// Presence holds the in/out columns (design: Presence columns).
	Presence PresenceColumns `json:"-"`
	// Liveness holds the heartbeat columns (design: Liveness states).
	Liveness LivenessColumns `json:"-"`
}

// PresenceColumns are the stored in/out presence columns
// (design: Presence columns). The zero value (no shift, no override, seen "in"
// after defaulting) keeps an agent exactly as if presence did not exist.
type PresenceColumns struct {
	Shift         string     // "" = no shift; otherwise the shift grammar (design: Shift grammar)
	Override      string     // "", "in" or "out"
	OverrideUntil *time.Time // nil = no end
	OverrideSetAt *time.Time
	OverrideBy    string // "agent" or "operator:<person_id>"
	Seen          string // last claimed transition: "in" (default) or "out"
	ChangedAt     *time.Time
	ChangedBy     string
	// SelfInStretch and SelfInUsed are the self clock-in ledger
	// (design: Self clock-in cap): how much of the off-shift stretch that ends
	// at SelfInStretch (nil = none yet) the agent's own in overrides were
	// granted.
	SelfInStretch *time.Time
	SelfInUsed    time.Duration
}

// ClockInCap is a duration written as Go duration text without zero units:
// "8h", "1h30m", "0" (JSON: a string).
type ClockInCap time.Duration

// String writes c as "8h", "1h30m", "45s" or "0".
func (c ClockInCap) String() string { return FormatDuration(time.Duration(c)) }

// MarshalJSON writes c as a JSON string (String).
func (c ClockInCap) MarshalJSON() ([]byte, error) { return []byte(`"` + c.String() + `"`), nil }

// UnmarshalJSON reads a JSON string in Go duration syntax ("8h", "0").
func (c *ClockInCap) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("self_clock_in_cap: %w", err)
	}
	*c = ClockInCap(d)
	return nil
}

// FormatDuration writes d like time.Duration.String without zero units:
// 8h0m0s as "8h", 1h30m0s as "1h30m", and 0 as "0".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// LivenessColumns are the stored heartbeat columns (design: Liveness states).
type LivenessColumns struct {
	State                  string     // unknown (default), online, degraded, offline
	LastHeartbeatAt        *time.Time // server clock
	ReportedBillingMode    *string    // nil = not reported
	ReportedToolClass      *string    // nil = not reported
	ReportedRuntimeVersion *string
	ReportedState          []byte // the last full heartbeat body (canonical JSON), nil = none
	ProjectReadiness       []byte // JSON array of {queue, ready, reason?}, nil = never reported
}

// Revoked reports whether the agent was revoked (permanent).
func (a *Agent) Revoked() bool { return a.RevokedAt != nil }

// Person is a human operator who owns agents and authenticates with personal
// API tokens (design: Persons and roles). Role is RoleAdmin or RoleMember;
// Admin mirrors it. A deactivated person (Active false) cannot authenticate;
// its agents keep working.
type Person struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Role          string     `json:"role"`
	Admin         bool       `json:"admin"`
	Active        bool       `json:"active"`
	DeactivatedAt *time.Time `json:"deactivated_at"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`

	// TokenID is the personal token this request authenticated with (set
	// by authentication, never stored or sent): event streams re-check it.
	TokenID string `json:"-"`
	// SessionID is the console session of this request, if any.
	SessionID string `json:"-"`
}

// Principal is who made a request: a person (operator) or an agent.
type Principal struct {
	Person *Person
	Agent  *Agent
	// CredentialID identifies the agent credential used, for session binding.
	CredentialID string
}

// Actor renders the principal for audit entries and presence_changed_by:
// "operator:<person_id>" or "agent:<agent_id>".
func (p Principal) Actor() string {
	switch {
	case p.Person != nil:
		return "operator:" + p.Person.ID
	case p.Agent != nil:
		return "agent:" + p.Agent.ID
	}
	return "system"
}

func ptrIndex(base string, i int) string { return base + "/" + itoa(i) }

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	n := len(b)
	neg := i < 0
	if neg {
		i = -i
	}
	for i > 0 {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
	}
	if neg {
		n--
		b[n] = '-'
	}
	return string(b[n:])
}
