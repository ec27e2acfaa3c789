package domain

import "time"

// Hook kinds (design: Hook signatures): how a delivery is signed and decoded.
const (
	HookGitHub   = "github"   // X-Hub-Signature-256, X-GitHub-Event, X-GitHub-Delivery
	HookStandard = "standard" // Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature
)

// Delivery outcomes recorded for each delivery a hook receives.
const (
	DeliveryCreated   = "created"   // a todo was created
	DeliveryDuplicate = "duplicate" // the delivery id was seen before: nothing created
	DeliveryIgnored   = "ignored"   // verified, but not an event/action the hook takes or filtered out
	DeliveryRefused   = "refused"   // bad or missing signature, stale timestamp, bad body: nothing created
	DeliveryPing      = "ping"      // GitHub's ping, answered
)

// HookFilter decides which verified GitHub deliveries make todos
// (design: Hooks). Empty lists do not filter. Repositories are "owner/name"
// (case folded); Labels match when the issue or pull request carries any of
// them; Actions are "event" or "event.action" (e.g. "pull_request",
// "issues.labeled").
type HookFilter struct {
	Repositories []string `json:"repositories,omitempty"`
	Labels       []string `json:"labels,omitempty"`
	Actions      []string `json:"actions,omitempty"`
}

// Hook is an owner's webhook endpoint for one agent and queue (design: Hooks).
// Secret is the HMAC key: shown once at creation and rotation, never rendered
// in JSON.
type Hook struct {
	ID            string     `json:"id"`
	OwnerID       string     `json:"owner_id"`
	AgentID       string     `json:"agent_id"`
	Kind          string     `json:"kind"`
	Queue         string     `json:"queue"`
	Filter        HookFilter `json:"filter"`
	TitleTemplate string     `json:"title_template,omitempty"`
	KindLabel     string     `json:"kind_label,omitempty"`
	Secret        string     `json:"-"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// HookDelivery is one delivery a hook received and what became of it.
// Key is the sender's delivery id (X-GitHub-Delivery or webhook-id) of a
// verified delivery, "" for a refused one; a hook dedupes on it.
type HookDelivery struct {
	ID         string    `json:"id"`
	HookID     string    `json:"hook_id"`
	Key        string    `json:"key,omitempty"`
	Event      string    `json:"event,omitempty"`
	Action     string    `json:"action,omitempty"`
	Outcome    string    `json:"outcome"`
	Reason     string    `json:"reason,omitempty"`
	TodoID     string    `json:"todo_id,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
}

// HandoffGrant is one agent/queue pair an agent may hand todos to with the
// hand_off verb (design: Handoff); granted at vend time, immutable.
type HandoffGrant struct {
	AgentID string `json:"agent_id"`
	Handle  string `json:"handle"`
	Queue   string `json:"queue"`
}
