// Package wire holds the request and response bodies of Rollcall's REST API
// (api/openapi.yaml): what a client sends and gets back, with the JSON
// shapes the server speaks. It is the seed of a public Go client: the CLI
// and the public client package use it, and internal/app names the same types
// through aliases, so server and client cannot drift apart.
//
// The resources themselves (Agent, Todo, Person, Hook …) are the domain's
// types, re-exported here under the names a client reads.
//
//	in := wire.VendInput{Handle: "reviewer", Queues: []string{"reviews"}, Verbs: []string{"claim_next", "complete"}}
//	// POST /v1/agents with in as the body → 201 wire.VendResult
package wire

import (
	"encoding/json"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// Resources as the API returns them.
type (
	Agent             = domain.Agent
	Todo              = domain.Todo
	Person            = domain.Person
	PersonToken       = domain.PersonToken
	AuditEntry        = domain.AuditEntry
	AuditVerifyResult = domain.AuditVerifyResult
	Hook              = domain.Hook
	HookFilter        = domain.HookFilter
	HookDelivery      = domain.HookDelivery
	Pool              = domain.Pool
	PoolMember        = domain.PoolMember
	PoolGrant         = domain.PoolGrant
)

// --- agents ---

// VendInput is the body of POST /v1/agents.
type VendInput struct {
	Handle       string   `json:"handle"`
	Name         string   `json:"name,omitempty"`
	Queues       []string `json:"queues"`
	Verbs        []string `json:"verbs"`
	BillingMode  string   `json:"billing_mode,omitempty"`
	BillingModes []string `json:"billing_modes,omitempty"`
	ToolClass    string   `json:"tool_class,omitempty"`
	// Handoff grants the hand_off verb to these agent/queue pairs;
	// immutable like the rest of the scope.
	Handoff []HandoffInput `json:"handoff,omitempty"`
}

// HandoffInput is one grant in the vend body: `handoff: [{agent, queue}]`,
// agent an id or handle of another agent of the same owner, queue one of
// that agent's queues.
type HandoffInput struct {
	Agent string `json:"agent"`
	Queue string `json:"queue"`
}

// VendResult is the answer of POST /v1/agents: the credential is shown
// this once and never again.
type VendResult struct {
	Agent        domain.Agent `json:"agent"`
	Credential   string       `json:"credential"`
	MCPURL       string       `json:"mcp_url"`
	ClaudeMCPAdd string       `json:"claude_mcp_add"`
}

// UpdateInput is the body of PATCH /v1/agents/{ref}; nil = unchanged. The
// scope is immutable.
type UpdateInput struct {
	Name         *string   `json:"name,omitempty"`
	BillingMode  *string   `json:"billing_mode,omitempty"`
	BillingModes *[]string `json:"billing_modes,omitempty"`
	ToolClass    *string   `json:"tool_class,omitempty"`
	Active       *bool     `json:"active,omitempty"`
	// Owner hands the agent to another person (a person id). Admin only,
	// and alone in the body.
	Owner *string `json:"owner,omitempty"`
	// SelfClockInCap is how long the agent's own clock_in may keep it in
	// per off-shift stretch ("8h", "90m", "0").
	SelfClockInCap *string `json:"self_clock_in_cap,omitempty"`
}

// RotateResult is the answer of POST /v1/agents/{ref}/credentials: the new
// credential, shown once; the same members as VendResult.
type RotateResult VendResult

// --- todos ---

// PushInput is the body of POST /v1/agents/{ref}/todos.
type PushInput struct {
	Queue          string          `json:"queue"`
	Title          string          `json:"title"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	Kind           string          `json:"kind,omitempty"`
	Source         string          `json:"source,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	MaxAttempts    int             `json:"max_attempts,omitempty"`
}

// PoolInput is the body of POST /v1/pools (design: Pools): a name unique
// among the person's pools, the queues the pool takes, and its members
// (agent ids or handles).
type PoolInput struct {
	Name    string   `json:"name"`
	Queues  []string `json:"queues"`
	Members []string `json:"members"`
}

// PoolUpdate is the body of PATCH /v1/pools/{name} (design: Pools): the
// pool's members from now on (agent ids or handles); its name and queues
// stay.
type PoolUpdate struct {
	Members []string `json:"members"`
}

// PoolGrantInput is the body of POST /v1/agents/{ref}/pool-grants (design:
// Pool grants): the person (id) who may then make the agent a member of
// their pools.
type PoolGrantInput struct {
	Person string `json:"person"`
}

// TodoFilter filters todo listings (the query of GET
// /v1/agents/{ref}/todos); zero fields do not filter, Limit 0 is the
// server's default.
type TodoFilter struct {
	Queue string
	State string
	Limit int
}

// Check validates the filter and sets Limit 0 to domain.DefaultListLimit.
// Errors: invalid_argument with pointer /queue, /state or /limit (1 to
// domain.MaxListLimit).
func (f *TodoFilter) Check() error {
	if f.Queue != "" && !domain.ValidName(f.Queue) {
		return domain.Errorf(domain.CodeInvalidArgument, "queue %q must match ^[a-z0-9][a-z0-9._-]*$", f.Queue).At("/queue")
	}
	switch f.State {
	case "", domain.TodoPending, domain.TodoClaimed, domain.TodoDone, domain.TodoFailed:
	default:
		return domain.Errorf(domain.CodeInvalidArgument, "state %q must be one of pending, claimed, done, failed", f.State).At("/state")
	}
	if f.Limit < 0 || f.Limit > domain.MaxListLimit {
		return domain.Errorf(domain.CodeInvalidArgument, "limit must be between 1 and %d", domain.MaxListLimit).At("/limit")
	}
	if f.Limit == 0 {
		f.Limit = domain.DefaultListLimit
	}
	return nil
}

// --- audit ---

// AuditFilter pages the audit log (the query of GET /v1/audit): AgentRef
// an agent's id or handle ("" = the whole log, admin only), AfterSeq the
// last sequence number already read, Limit 0 the server's default.
type AuditFilter struct {
	AgentRef string
	AfterSeq int64
	Limit    int
}

// --- presence ---

// PresenceInput is the body of PUT /v1/agents/{ref}/presence: "in" or
// "out", until an optional end of the override.
type PresenceInput struct {
	Presence string     `json:"presence"`
	Until    *time.Time `json:"until"`
}

// PresenceView is an agent's effective in/out presence: where it comes
// from (source), when it next changes (until, null for no scheduled
// change), its shift and how many push-eligible todos are pending.
type PresenceView struct {
	Presence string     `json:"presence"`
	Source   string     `json:"source"`
	Until    *time.Time `json:"until"`
	Shift    *string    `json:"shift"`
	Pending  int        `json:"pending"`
}

// AgentPresence is GET /v1/agents/{ref}/presence: the view plus the todos
// held while the agent is out (and until when they are held).
type AgentPresence struct {
	PresenceView
	Agent     string     `json:"agent"`
	Held      []HeldTodo `json:"held"`
	HeldUntil *time.Time `json:"held_until"`
}

// HeldTodo is a push-eligible pending todo whose doorbell is held.
type HeldTodo struct {
	ID        string    `json:"id"`
	Queue     string    `json:"queue"`
	CreatedAt time.Time `json:"created_at"`
}

// --- runtime status ---

// AgentRuntimeStatus is the owner's view of an agent's runtime (GET
// /v1/agents/{ref}/status): liveness state, last heartbeat, what the
// runtime reported, the warnings, and the in/out presence.
type AgentRuntimeStatus struct {
	AgentID string `json:"agent_id"`
	Agent   string `json:"agent"` // handle
	// State is unknown, online, degraded or offline at the time of the read.
	State string `json:"state"`
	// LastHeartbeatAt is the server-clock time of the last heartbeat known
	// (null = never).
	LastHeartbeatAt *time.Time `json:"last_heartbeat_at"`
	// BillingMode and ToolClass are what the owner configured ("" = none).
	BillingMode string `json:"billing_mode,omitempty"`
	ToolClass   string `json:"tool_class,omitempty"`
	// ReportedBillingMode and ReportedToolClass are the last reported
	// values (null = not reported); the billing mode is kept while offline.
	ReportedBillingMode   *string  `json:"reported_billing_mode"`
	ReportedToolClass     *string  `json:"reported_tool_class"`
	BillingModesSupported []string `json:"billing_modes_supported,omitempty"`
	// BillingEvidence is how the runtime determined its billing mode (null
	// = not reported).
	BillingEvidence *BillingEvidence `json:"billing_evidence"`
	// Warnings are codes: billing_mode_mismatch, billing_mode_unsupported,
	// billing_evidence_unknown, tool_class_mismatch (never null).
	Warnings []string `json:"warnings"`
	// Runtime is the runtime the adapter drives (null = nothing reported).
	Runtime *RuntimeInfo `json:"runtime"`
	// Adapter is the adapter that sends the heartbeats (null = not reported).
	Adapter *AdapterInfo `json:"adapter"`
	// ProjectReadiness is the last list applied (null = never reported); a
	// queue with ready=false gets no doorbells and no sweep rings.
	ProjectReadiness []Readiness `json:"project_readiness"`
	// Presence is the in/out presence.
	Presence AgentPresence `json:"presence"`
}

// BillingEvidence is billing_evidence of a heartbeat.
type BillingEvidence struct {
	KeyType string `json:"key_type"`
	Method  string `json:"method"`
}

// RuntimeInfo names the runtime and its version (reported_runtime_version).
type RuntimeInfo struct {
	Name           string  `json:"name,omitempty"`
	RuntimeVersion *string `json:"runtime_version,omitempty"`
}

// AdapterInfo names the adapter and the adapter's own version.
type AdapterInfo struct {
	Name    string  `json:"name"`
	Version *string `json:"version,omitempty"`
}

// Readiness is one entry of project_readiness.
type Readiness struct {
	Queue  string `json:"queue"`
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

// --- hooks ---

// HookInput is the body of POST /v1/hooks.
type HookInput struct {
	Kind          string             `json:"kind"`
	Agent         string             `json:"agent"`
	Queue         string             `json:"queue"`
	Filter        *domain.HookFilter `json:"filter,omitempty"`
	TitleTemplate string             `json:"title_template,omitempty"`
	KindLabel     string             `json:"kind_label,omitempty"`
}

// HookView is a hook as the API shows it: never its secret; with its
// delivery URL, its agent's handle and (on show) its last deliveries.
type HookView struct {
	domain.Hook
	URL            string                `json:"url"`
	AgentHandle    string                `json:"agent_handle"`
	LastDeliveries []domain.HookDelivery `json:"last_deliveries,omitempty"`
}

// HookSecretResult is the answer of POST /v1/hooks and POST
// /v1/hooks/{id}/secret: the secret is shown this once.
type HookSecretResult struct {
	Hook   HookView `json:"hook"`
	URL    string   `json:"url"`
	Secret string   `json:"secret"`
}

// DeliveryResult is the body a webhook delivery (POST
// /v1/hooks/{id}/deliveries) is answered with: Outcome is one of
// domain.DeliveryCreated, DeliveryDuplicate, DeliveryIgnored,
// DeliveryPing; TodoID is the todo created (or found, for a duplicate).
type DeliveryResult struct {
	Outcome string `json:"outcome"`
	TodoID  string `json:"todo_id,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// --- persons and tokens ---

// PersonInput is the body of POST /v1/persons.
type PersonInput struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// PersonUpdate is the body of PATCH /v1/persons/{id}; nil = unchanged.
type PersonUpdate struct {
	Name   *string `json:"name,omitempty"`
	Role   *string `json:"role,omitempty"`
	Active *bool   `json:"active,omitempty"`
}

// PersonCreated is the answer of POST /v1/persons: the person and its first
// token (shown once).
type PersonCreated struct {
	Person domain.Person `json:"person"`
	Token  MintedToken   `json:"token"`
}

// TokenInput is the body of POST /v1/tokens.
type TokenInput struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// MintedToken is a personal token as minted: the secret (Token) is shown
// once, in the answer that created it.
type MintedToken struct {
	domain.PersonToken
	Token string `json:"token"`
}
