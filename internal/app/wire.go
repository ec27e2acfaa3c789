package app

import "github.com/rollcall/rollcall/api/wire"

// The REST bodies live in api/wire, shared with the client; the use cases
// name them here.
type (
	VendInput          = wire.VendInput
	HandoffInput       = wire.HandoffInput
	VendResult         = wire.VendResult
	UpdateInput        = wire.UpdateInput
	RotateResult       = wire.RotateResult
	PushInput          = wire.PushInput
	PoolInput          = wire.PoolInput
	PoolGrantInput     = wire.PoolGrantInput
	TodoFilter         = wire.TodoFilter
	AuditFilter        = wire.AuditFilter
	PresenceInput      = wire.PresenceInput
	PresenceView       = wire.PresenceView
	AgentPresence      = wire.AgentPresence
	HeldTodo           = wire.HeldTodo
	AgentRuntimeStatus = wire.AgentRuntimeStatus
	BillingEvidence    = wire.BillingEvidence
	RuntimeInfo        = wire.RuntimeInfo
	AdapterInfo        = wire.AdapterInfo
	Readiness          = wire.Readiness
	HookInput          = wire.HookInput
	HookView           = wire.HookView
	HookSecretResult   = wire.HookSecretResult
	DeliveryResult     = wire.DeliveryResult
	PersonInput        = wire.PersonInput
	PersonUpdate       = wire.PersonUpdate
	PersonCreated      = wire.PersonCreated
	TokenInput         = wire.TokenInput
	MintedToken        = wire.MintedToken
)
