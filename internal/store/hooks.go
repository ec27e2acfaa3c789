package store

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// HookStore is the part of the store port that serves intake
// (design: Hooks): hooks and their deliveries. Both adapters implement it and the
// contract suite covers it.
type HookStore interface {
	// CreateHook inserts the hook and appends the audit record. An unknown
	// agent returns ErrNotFound.
	CreateHook(ctx context.Context, p CreateHookParams) error
	// GetHook returns a hook by id (secret included); ErrNotFound when none.
	GetHook(ctx context.Context, id string) (domain.Hook, error)
	// ListHooks lists hooks oldest first, of one owner and/or one agent
	// ("" = any).
	ListHooks(ctx context.Context, p ListHooksParams) ([]domain.Hook, error)
	// RotateHookSecret replaces the hook's secret, bumps updated_at and
	// appends the audit record; ErrNotFound when the hook is gone.
	RotateHookSecret(ctx context.Context, p RotateHookSecretParams) (domain.Hook, error)
	// ResealHookSecret replaces the stored form of the hook's secret (the
	// same secret, sealed anew: design: Hook secrets sealed at rest) when it
	// is still p.Old, without touching updated_at or the audit log; false
	// when the hook is gone or its secret changed meanwhile.
	ResealHookSecret(ctx context.Context, p ResealHookSecretParams) (bool, error)
	// DeleteHook deletes the hook and its deliveries and appends the audit
	// record; ErrNotFound when the hook is gone.
	DeleteHook(ctx context.Context, p DeleteHookParams) error
	// RecordDelivery records one delivery in one transaction: when
	// Delivery.Key is set and the hook already recorded that key, it
	// returns the recorded delivery with Duplicate true and changes
	// nothing; otherwise, when Todo is set, it creates the todo as
	// CreateTodo does (a live todo of the agent with the same idempotency
	// key is returned instead) and records the delivery with its todo id.
	RecordDelivery(ctx context.Context, p RecordDeliveryParams) (RecordDeliveryResult, error)
	// ListDeliveries returns a hook's deliveries, newest first, at most
	// Limit (<= 0: 20).
	ListDeliveries(ctx context.Context, p ListDeliveriesParams) ([]domain.HookDelivery, error)
	// PruneDeliveries deletes the deliveries of every hook received before
	// p.Before (design: Delivery log retention), p.Batch rows per statement
	// (<= 0: DefaultPruneBatch), each batch committed on its own so no
	// statement holds its locks long, until a batch deletes fewer than
	// p.Batch; it returns how many it deleted. Idempotent: two instances
	// pruning at once delete each row once. A ctx that ends stops it
	// between batches with ctx's error and the count so far.
	PruneDeliveries(ctx context.Context, p PruneDeliveriesParams) (int64, error)
}

// CreateHookParams inserts a hook.
type CreateHookParams struct {
	Hook  domain.Hook
	Audit domain.AuditRecord
}

// ListHooksParams filters ListHooks.
type ListHooksParams struct {
	OwnerID string
	AgentID string
}

// RotateHookSecretParams replaces a hook's secret.
type RotateHookSecretParams struct {
	ID     string
	Secret string
	Now    time.Time
	Audit  domain.AuditRecord
}

// ResealHookSecretParams replaces the stored form Old of a hook's secret
// by New.
type ResealHookSecretParams struct {
	ID       string
	Old, New string
}

// DeleteHookParams deletes a hook.
type DeleteHookParams struct {
	ID    string
	Now   time.Time
	Audit domain.AuditRecord
}

// RecordDeliveryParams records one delivery (ID, HookID, ReceivedAt set by
// the use case) and, optionally, the todo it makes.
type RecordDeliveryParams struct {
	Delivery domain.HookDelivery
	Todo     *domain.Todo
}

// RecordDeliveryResult is what RecordDelivery did.
type RecordDeliveryResult struct {
	Delivery  domain.HookDelivery // as recorded (the earlier one when Duplicate)
	Duplicate bool                // the key was recorded before: nothing changed
	Todo      domain.Todo         // the todo created or found (zero without one)
	Created   bool                // a new todo row was inserted
}

// DefaultPruneBatch is PruneDeliveries' batch size when p.Batch <= 0.
const DefaultPruneBatch = 10000

// PruneDeliveriesParams selects the deliveries PruneDeliveries deletes:
// those received strictly before Before, Batch at a time.
type PruneDeliveriesParams struct {
	Before time.Time
	Batch  int
}

// ListDeliveriesParams pages a hook's deliveries.
type ListDeliveriesParams struct {
	HookID string
	Limit  int
}
