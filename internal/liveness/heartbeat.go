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

// DecodeHeartbeat decodes and checks one `agent_heartbeat.v1` body
// (design: Heartbeat body, Value forms). It is the one decoder both transports use.
//
// Errors are *domain.Error with Code domain.CodeUnknownMember (a member not
// in the body table (design: Heartbeat body), at any level; Pointer is the RFC 6901 pointer of that member) or
// domain.CodeInvalidArgument (Pointer is the offending member or list
// element). In detail:
//
//   - A body longer than MaxBodyBytes, or one that is not exactly one
//     well-formed JSON value (RFC 8259; whitespace around it is allowed, any
//     other trailing data is not), is invalid_argument with Pointer "" and a
//     Detail naming the byte offset. This is reported whatever else is wrong
//     with the body.
//   - Otherwise the first violation in document order is reported, read left
//     to right: a member is judged at its key (unknown, duplicate key) and
//     then at its value (type, form, duplicate list element); rules that need
//     a whole object (required members, the state/degraded_reasons rule) are
//     judged at its closing brace. The result is deterministic.
//   - A top level that is not an object: invalid_argument, Pointer "".
//   - A JSON null is never accepted, also not for optional members: omit the
//     member instead. (For project_readiness, null would be ambiguous
//     between "unchanged" and "clear".)
//   - A key that appears twice in one object is invalid_argument at the
//     second occurrence (keys are compared after unescaping).
//   - A missing required member is invalid_argument pointing at where it
//     belongs (e.g. /state, /billing_evidence/method).
//   - state is "online" or "degraded"; "degraded" without non-empty
//     details.degraded_reasons, or "online" with them, is invalid_argument at
//     /state.
//   - Strings must have the form of their member: name
//     ^[a-z0-9][a-z0-9._-]*$ (≤ MaxNameLen bytes), version
//     ^[0-9A-Za-z][0-9A-Za-z.+_-]*$ (≤ MaxVersionLen), code
//     ^[a-z0-9][a-z0-9_.:-]*$ (≤ MaxCodeLen), UUID 8-4-4-4-12 hex. The
//     rejected value is not echoed in Detail (it may be a secret).
//   - A repeated list element is invalid_argument at the repeated element
//     (e.g. /details/degraded_reasons/2); a repeated readiness queue at
//     /project_readiness (design: Heartbeat body).
//   - details.protocol_version is a JSON integer literal without fraction
//     or exponent, 1 ≤ n ≤ MaxProtocolVersion.
//
// Nesting: the decoder walks only members (design: Heartbeat body) describes (at most three
// levels deep) and rejects any other value at its first byte, so nesting is
// bounded by the schema; the well-formedness check of a rejected body is
// iterative (encoding/json, itself bounded at 10000 levels).
//
// Strings of the returned value may share one copy of body when the body is
// small; body itself is not retained and may be reused by the caller.
func DecodeHeartbeat(body []byte) (Heartbeat, error) {
	h, err := decode(body)
	if err != nil {
		return Heartbeat{}, err
	}
	return h, nil
}

// UnmarshalJSON decodes b with DecodeHeartbeat.
func (h *Heartbeat) UnmarshalJSON(b []byte) error {
	v, err := DecodeHeartbeat(b)
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// MarshalJSON returns h.Canonical().
func (h Heartbeat) MarshalJSON() ([]byte, error) { return h.Canonical(), nil }

// Reported returns the two audited reported values of h (design: Billing-mode audit).
func (h Heartbeat) Reported() Reported {
	return Reported{BillingMode: h.BillingMode, ToolClass: h.ToolClass}
}
