package liveness

import (
	"github.com/rollcall/rollcall/internal/domain"
)

// Bounds of the heartbeat body (forms: design: Heartbeat body; the lengths
// are Rollcall's choice, generous for real adapters and small enough to keep
// stored state and audit entries bounded).
const (
	// MaxBodyBytes bounds the whole body. The transports bound it too; the
	// decoder rejects a longer body before reading it.
	MaxBodyBytes = 64 << 10
	// MaxNameLen bounds names (queue, adapter and runtime names), in bytes.
	// It equals domain.MaxHandleLen: a readiness queue is a queue name.
	MaxNameLen = domain.MaxHandleLen
	// MaxCodeLen bounds codes (billing modes, tool class, evidence, reasons),
	// in bytes.
	MaxCodeLen = 64
	// MaxVersionLen bounds versions (runtime_version, details.adapter.version),
	// in bytes.
	MaxVersionLen = 128
	// MaxProtocolVersion bounds details.protocol_version.
	MaxProtocolVersion = 1<<31 - 1
)

// Values of Capabilities.Followups. Heartbeat.State takes StateOnline or
// StateDegraded.
const (
	FollowupsSteer = "steer"
	FollowupsQueue = "queue"
)

// KeyTypeUnknown is the billing_evidence.key_type that raises the warning
// billing_evidence_unknown (design: Warnings).
const KeyTypeUnknown = "unknown"

// Heartbeat is one checked `agent_heartbeat.v1` body (design: Heartbeat body), as
// DecodeHeartbeat returns it. A nil pointer or nil slice means "not
// reported" (the member was absent); a non-nil empty slice means the member
// was sent as []. Each heartbeat replaces the whole reported state, except
// project_readiness, whose absence means "unchanged" (design: Full-state reports).
//
// Canonical and MarshalJSON encode it again; for every h returned by
// DecodeHeartbeat, DecodeHeartbeat(h.Canonical()) returns a value equal to
// h (reflect.DeepEqual).
type Heartbeat struct {
	// State is the reported state: StateOnline or StateDegraded (required).
	// It is StateDegraded exactly when Details.DegradedReasons is non-empty.
	State string
	// BillingMode is the reported billing mode (code), nil = not reported.
	BillingMode *string
	// BillingModesSupported lists the billing modes the runtime supports
	// (distinct codes); nil = not reported.
	BillingModesSupported []string
	// ToolClass is the reported tool class (code), nil = not reported.
	ToolClass *string
	// RuntimeVersion is the runtime's version (stored as
	// reported_runtime_version), nil = not reported.
	RuntimeVersion *string
	// BillingEvidence says how the billing mode was determined; nil = not
	// reported.
	BillingEvidence *BillingEvidence
	// Details holds the members of `details`; an absent `details` and an
	// empty one decode to the zero Details.
	Details Details
	// ProjectReadiness is the readiness per queue, meaningful only when
	// ProjectReadinessPresent is true. Queues are distinct.
	ProjectReadiness []ReadinessEntry
	// ProjectReadinessPresent reports whether project_readiness was sent;
	// false means "unchanged" (keep the last list applied).
	ProjectReadinessPresent bool
}

// BillingEvidence is `billing_evidence`: how the runtime determined its
// billing mode. Both members are required codes; KeyType values include
// api_key, oauth, cloud and unknown (design: Heartbeat body).
type BillingEvidence struct {
	KeyType string
	Method  string
}

// Details is the `details` member of a heartbeat. Every member is optional;
// nil means not reported.
type Details struct {
	// Capabilities of the adapter; nil = not reported.
	Capabilities *Capabilities
	// ActiveRuns are distinct UUIDs in the canonical 8-4-4-4-12 form. Either
	// letter case is accepted; the decoder lowercases them, and distinctness
	// is judged after lowercasing.
	ActiveRuns []string
	// DegradedReasons are distinct codes; non-empty exactly when State is
	// StateDegraded.
	DegradedReasons []string
	// Adapter names the runtime adapter; nil = not reported.
	Adapter *Adapter
	// Runtime names the runtime; nil = not reported.
	Runtime *Runtime
	// ProtocolVersion is a positive integer ≤ MaxProtocolVersion; nil = not
	// reported.
	ProtocolVersion *int
}

// Capabilities is `details.capabilities`. Every member is optional (nil = not
// reported); a capabilities object with no members is valid.
type Capabilities struct {
	// Followups is FollowupsSteer or FollowupsQueue.
	Followups  *string
	Components *bool
	VoiceInput *bool
	Title      *bool
	FilesOut   *bool
}

// Adapter is `details.adapter`: the adapter's name (required, name form) and
// its own version (optional, version form).
type Adapter struct {
	Name    string
	Version *string
}

// Runtime is `details.runtime`: the runtime's name (required, name form).
type Runtime struct {
	Name string
}

// ReadinessEntry is one element of `project_readiness`: whether the agent can
// act on work from Queue (name form). Reason is an optional code; "" means
// absent (a code is never empty). ReadinessEntry is comparable with ==.
type ReadinessEntry struct {
	Queue  string
	Ready  bool
	Reason string
}
