// Package hooks holds the use cases of webhook endpoints (design: Hooks):
// creating, listing, reading, rotating and deleting a person's hooks, the
// delivery log's retention (design: Delivery log retention) and hook
// secrets sealed at rest (sealing.go; design: Hook secrets sealed at
// rest). internal/app embeds Hooks, so its Service answers these
// operations as its own; the deliveries themselves are taken by the
// webhook receiver (internal/delivery).
package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/store"
)

// The delivery log's retention (design: Delivery log retention): every
// instance deletes, every DeliveryPruneInterval and once when its loops
// start, the deliveries received more than the retention ago
// (hooks.delivery_retention, default DefaultDeliveryRetention).
const (
	DefaultDeliveryRetention = 7 * 24 * time.Hour
	DeliveryPruneInterval    = 10 * time.Minute
)

// Agents is what the hook use cases need of internal/app's Service, which
// embeds them: the person's own agent.
type Agents interface {
	OwnedAgent(ctx context.Context, by domain.Person, ref string) (domain.Agent, error)
}

// Config is what Hooks are built from.
type Config struct {
	Store     store.Store
	Agents    Agents
	Sealer    *intake.Sealer // nil = hook secrets in plaintext
	Now       func() time.Time
	NewID     func() string
	PublicURL func() string // the base URL of a hook's delivery URL
	Log       *slog.Logger
	Retention time.Duration // hooks.delivery_retention
}

// Hooks holds the hook use cases. It is safe for concurrent use.
type Hooks struct {
	store     store.Store
	agents    Agents
	sealer    *intake.Sealer
	now       func() time.Time
	newID     func() string
	publicURL func() string
	log       *slog.Logger
	retention time.Duration
}

// New builds the hook use cases.
func New(c Config) *Hooks {
	return &Hooks{store: c.Store, agents: c.Agents, sealer: c.Sealer, now: c.Now, newID: c.NewID, publicURL: c.PublicURL, log: c.Log, retention: c.Retention}
}

func (k *Hooks) hookURL(id string) string { return k.publicURL() + "/v1/hooks/" + id + "/deliveries" }

func (k *Hooks) hookView(h domain.Hook, handle string) wire.HookView {
	h.Secret = "" // a view never carries the secret
	return wire.HookView{Hook: h, URL: k.hookURL(h.ID), AgentHandle: handle}
}

// CreateHook creates a webhook endpoint for one of the person's agents and
// queues (design: Hooks) and returns it with its URL and secret (shown
// once). kind "github" takes filter, title_template and kind_label;
// "standard" takes kind_label (the todo kind when a delivery names none).
// Audited as hook.create. Errors: invalid_argument (with pointer),
// not_found (agent), conflict (revoked agent).
func (k *Hooks) CreateHook(ctx context.Context, by domain.Person, in wire.HookInput) (wire.HookSecretResult, error) {
	if in.Kind != domain.HookGitHub && in.Kind != domain.HookStandard {
		return wire.HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "kind must be github or standard, got %q", in.Kind).At("/kind")
	}
	if in.Agent == "" {
		return wire.HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "agent is required (id or handle)").At("/agent")
	}
	a, err := k.agents.OwnedAgent(ctx, by, in.Agent)
	if err != nil {
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.CodeNotFound {
			return wire.HookSecretResult{}, de.At("/agent")
		}
		return wire.HookSecretResult{}, err
	}
	if a.Revoked() {
		return wire.HookSecretResult{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it takes no hooks", a.Handle)
	}
	if in.Queue == "" {
		return wire.HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "queue is required").At("/queue")
	}
	if !a.Scope.HasQueue(in.Queue) {
		return wire.HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "queue %q is not in agent %s's scope (queues %v)", in.Queue, a.Handle, a.Scope.Queues).At("/queue")
	}
	var filter domain.HookFilter
	if in.Filter != nil {
		filter = *in.Filter
	}
	if in.Kind == domain.HookStandard {
		if in.Filter != nil {
			return wire.HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "filter applies to github hooks only").At("/filter")
		}
		if in.TitleTemplate != "" {
			return wire.HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "title_template applies to github hooks only; a standard delivery carries its title").At("/title_template")
		}
	}
	if err := intake.ValidateFilter(filter); err != nil {
		return wire.HookSecretResult{}, err
	}
	if err := intake.ValidateTemplate(in.TitleTemplate); err != nil {
		return wire.HookSecretResult{}, err
	}
	if err := domain.ValidateCode("kind_label", in.KindLabel); err != nil {
		return wire.HookSecretResult{}, err
	}
	now := k.now()
	h := domain.Hook{ID: k.newID(), OwnerID: by.ID, AgentID: a.ID, Kind: in.Kind, Queue: in.Queue, Filter: filter,
		TitleTemplate: in.TitleTemplate, KindLabel: in.KindLabel, Secret: intake.NewSecret(), CreatedAt: now, UpdatedAt: now}
	stored := h
	stored.Secret = k.sealer.Seal(h.ID, h.Secret) // (design: Hook secrets sealed at rest)
	err = k.store.CreateHook(ctx, store.CreateHookParams{Hook: stored, Audit: domain.AuditRecord{
		Actor: "operator:" + by.ID, Action: "hook.create", AgentID: a.ID,
		Data: map[string]any{"hook_id": h.ID, "kind": h.Kind, "queue": h.Queue, "filter": h.Filter, "title_template": h.TitleTemplate, "kind_label": h.KindLabel},
	}})
	if err != nil {
		return wire.HookSecretResult{}, domain.StoreError(err, fmt.Sprintf("agent %q not found", in.Agent), "")
	}
	k.log.Info("hook created", "hook_id", h.ID, "kind", h.Kind, "agent_id", a.ID, "queue", h.Queue, "by", by.ID)
	v := k.hookView(h, a.Handle)
	return wire.HookSecretResult{Hook: v, URL: v.URL, Secret: h.Secret}, nil // shown once
}

// ownedHook loads a hook the person owns; another person's hook and an
// unknown id both answer not_found.
func (k *Hooks) ownedHook(ctx context.Context, by domain.Person, id string) (domain.Hook, error) {
	nf := domain.Errorf(domain.CodeNotFound, "hook %q not found", id)
	if len(id) != 36 {
		return domain.Hook{}, nf
	}
	h, err := k.store.GetHook(ctx, id)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && h.OwnerID != by.ID) {
		return domain.Hook{}, nf
	}
	return h, err
}

func (k *Hooks) handleOf(ctx context.Context, agentID string) string {
	a, err := k.store.GetAgent(ctx, store.AgentRef{ID: agentID})
	if err != nil {
		return ""
	}
	return a.Handle
}

// ListHooks lists the person's hooks, oldest first; with agentRef only
// that agent's (not_found when the person does not own it).
func (k *Hooks) ListHooks(ctx context.Context, by domain.Person, agentRef string) ([]wire.HookView, error) {
	p := store.ListHooksParams{OwnerID: by.ID}
	handles := map[string]string{}
	if agentRef != "" {
		a, err := k.agents.OwnedAgent(ctx, by, agentRef)
		if err != nil {
			return nil, err
		}
		p.AgentID = a.ID
		handles[a.ID] = a.Handle
	}
	hs, err := k.store.ListHooks(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]wire.HookView, 0, len(hs))
	for _, h := range hs {
		if _, ok := handles[h.AgentID]; !ok {
			handles[h.AgentID] = k.handleOf(ctx, h.AgentID)
		}
		out = append(out, k.hookView(h, handles[h.AgentID]))
	}
	return out, nil
}

// GetHook returns one of the person's hooks with its last 20 deliveries,
// newest first. Errors: not_found.
func (k *Hooks) GetHook(ctx context.Context, by domain.Person, id string) (wire.HookView, error) {
	h, err := k.ownedHook(ctx, by, id)
	if err != nil {
		return wire.HookView{}, err
	}
	ds, err := k.store.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: h.ID, Limit: 20})
	if err != nil {
		return wire.HookView{}, err
	}
	v := k.hookView(h, k.handleOf(ctx, h.AgentID))
	v.LastDeliveries = ds
	return v, nil
}

// HookDeliveries returns a hook's last deliveries (at most limit, 1..100,
// default 20), newest first, for the console. Errors: not_found.
func (k *Hooks) HookDeliveries(ctx context.Context, by domain.Person, id string, limit int) ([]domain.HookDelivery, error) {
	h, err := k.ownedHook(ctx, by, id)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	return k.store.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: h.ID, Limit: limit})
}

// PruneDeliveriesOnce deletes, in batches of store.DefaultPruneBatch, the
// deliveries of every hook received before now minus the retention, and
// returns how many it deleted. now is the database's clock, the clock
// Deliver stamps received_at with on every instance (design: Database
// clock). A redelivery within the retention stays a
// duplicate; a delivery id pruned is new again (design: Delivery log
// retention).
func (k *Hooks) PruneDeliveriesOnce(ctx context.Context) (int64, error) {
	n, err := k.store.PruneDeliveries(ctx, store.PruneDeliveriesParams{Before: k.now().Add(-k.retention)})
	if n > 0 {
		k.log.Info("delivery log pruned", "deleted", n, "retention", k.retention)
	}
	return n, err
}

// RotateHookSecret replaces the hook's secret and returns the new one
// (shown once); deliveries signed with the old secret are refused from now
// on. Audited as hook.rotate_secret. Errors: not_found.
func (k *Hooks) RotateHookSecret(ctx context.Context, by domain.Person, id string) (wire.HookSecretResult, error) {
	h, err := k.ownedHook(ctx, by, id)
	if err != nil {
		return wire.HookSecretResult{}, err
	}
	secret := intake.NewSecret()
	h, err = k.store.RotateHookSecret(ctx, store.RotateHookSecretParams{ID: h.ID, Secret: k.sealer.Seal(h.ID, secret), Now: k.now(),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "hook.rotate_secret", AgentID: h.AgentID, Data: map[string]any{"hook_id": h.ID}}})
	if err != nil {
		return wire.HookSecretResult{}, domain.StoreError(err, fmt.Sprintf("hook %q not found", id), "")
	}
	h.Secret = secret
	k.log.Info("hook secret rotated", "hook_id", h.ID, "by", by.ID)
	v := k.hookView(h, k.handleOf(ctx, h.AgentID))
	return wire.HookSecretResult{Hook: v, URL: v.URL, Secret: h.Secret}, nil
}

// RotateHookSecretsOf gives every hook of the agent a new secret that is
// not shown, before the agent changes hands: the previous owner knew the
// old secrets and could otherwise sign deliveries to the new owner's agent.
// Done first, so a failed hand-over leaves the hooks only safer.
func (k *Hooks) RotateHookSecretsOf(ctx context.Context, by domain.Person, a domain.Agent) error {
	hs, err := k.store.ListHooks(ctx, store.ListHooksParams{AgentID: a.ID})
	if err != nil {
		return err
	}
	for _, h := range hs {
		_, err := k.store.RotateHookSecret(ctx, store.RotateHookSecretParams{ID: h.ID, Secret: k.sealer.Seal(h.ID, intake.NewSecret()), Now: k.now(),
			Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "hook.rotate_secret", AgentID: a.ID,
				Data: map[string]any{"hook_id": h.ID, "reason": "agent.hand_over"}}})
		if err != nil && !errors.Is(err, domain.ErrNotFound) { // a hook deleted meanwhile needs no secret
			return err
		}
	}
	return nil
}

// DeleteHook deletes the hook and its delivery log and returns it as it
// was; later deliveries answer 404. Todos it created stay. Audited as
// hook.delete. Errors: not_found.
func (k *Hooks) DeleteHook(ctx context.Context, by domain.Person, id string) (wire.HookView, error) {
	h, err := k.ownedHook(ctx, by, id)
	if err != nil {
		return wire.HookView{}, err
	}
	err = k.store.DeleteHook(ctx, store.DeleteHookParams{ID: h.ID, Now: k.now(),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "hook.delete", AgentID: h.AgentID, Data: map[string]any{"hook_id": h.ID, "kind": h.Kind, "queue": h.Queue}}})
	if err != nil {
		return wire.HookView{}, domain.StoreError(err, fmt.Sprintf("hook %q not found", id), "")
	}
	k.log.Info("hook deleted", "hook_id", h.ID, "by", by.ID)
	return k.hookView(h, k.handleOf(ctx, h.AgentID)), nil
}
