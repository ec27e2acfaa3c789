package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/delivery"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/store"
)

// Per-hook delivery limits (design: Hooks, Failed-signature limit): see
// delivery.HookDeliveryRate and the rest.
const (
	HookDeliveryRate  = delivery.HookDeliveryRate
	HookDeliveryBurst = delivery.HookDeliveryBurst
	HookFailedChecks  = delivery.HookFailedChecks
	HookFailedWindow  = delivery.HookFailedWindow
)

// The delivery log's retention (design: Delivery log retention): every
// instance deletes, every DeliveryPruneInterval and once when its loops
// start, the deliveries received more than the retention ago
// (hooks.delivery_retention, default DefaultDeliveryRetention).
const (
	DefaultDeliveryRetention = 7 * 24 * time.Hour
	DeliveryPruneInterval    = 10 * time.Minute
)

// HookMetrics is an optional extension of Metrics that counts hook
// deliveries (delivery.Metrics).
type HookMetrics = delivery.Metrics

func hookMetrics(m Metrics) delivery.Metrics {
	if hm, ok := m.(HookMetrics); ok {
		return hm
	}
	return nil
}

// DeliveryInput is one delivery as received (delivery.Input).
type DeliveryInput = delivery.Input

func (s *Service) hookURL(id string) string { return s.publicURL + "/v1/hooks/" + id + "/deliveries" }

func (s *Service) hookView(h domain.Hook, handle string) HookView {
	h.Secret = "" // a view never carries the secret
	return HookView{Hook: h, URL: s.hookURL(h.ID), AgentHandle: handle}
}

// CreateHook creates a webhook endpoint for one of the person's agents and
// queues (design: Hooks) and returns it with its URL and secret (shown
// once). kind "github" takes filter, title_template and kind_label;
// "standard" takes kind_label (the todo kind when a delivery names none).
// Audited as hook.create. Errors: invalid_argument (with pointer),
// not_found (agent), conflict (revoked agent).
func (s *Service) CreateHook(ctx context.Context, by domain.Person, in HookInput) (HookSecretResult, error) {
	if in.Kind != domain.HookGitHub && in.Kind != domain.HookStandard {
		return HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "kind must be github or standard, got %q", in.Kind).At("/kind")
	}
	if in.Agent == "" {
		return HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "agent is required (id or handle)").At("/agent")
	}
	a, err := s.OwnedAgent(ctx, by, in.Agent)
	if err != nil {
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.CodeNotFound {
			return HookSecretResult{}, de.At("/agent")
		}
		return HookSecretResult{}, err
	}
	if a.Revoked() {
		return HookSecretResult{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it takes no hooks", a.Handle)
	}
	if in.Queue == "" {
		return HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "queue is required").At("/queue")
	}
	if !a.Scope.HasQueue(in.Queue) {
		return HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "queue %q is not in agent %s's scope (queues %v)", in.Queue, a.Handle, a.Scope.Queues).At("/queue")
	}
	var filter domain.HookFilter
	if in.Filter != nil {
		filter = *in.Filter
	}
	if in.Kind == domain.HookStandard {
		if in.Filter != nil {
			return HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "filter applies to github hooks only").At("/filter")
		}
		if in.TitleTemplate != "" {
			return HookSecretResult{}, domain.Errorf(domain.CodeInvalidArgument, "title_template applies to github hooks only; a standard delivery carries its title").At("/title_template")
		}
	}
	if err := intake.ValidateFilter(filter); err != nil {
		return HookSecretResult{}, err
	}
	if err := intake.ValidateTemplate(in.TitleTemplate); err != nil {
		return HookSecretResult{}, err
	}
	if err := domain.ValidateCode("kind_label", in.KindLabel); err != nil {
		return HookSecretResult{}, err
	}
	now := s.now()
	h := domain.Hook{ID: newID(), OwnerID: by.ID, AgentID: a.ID, Kind: in.Kind, Queue: in.Queue, Filter: filter,
		TitleTemplate: in.TitleTemplate, KindLabel: in.KindLabel, Secret: intake.NewSecret(), CreatedAt: now, UpdatedAt: now}
	stored := h
	stored.Secret = s.sealer.Seal(h.ID, h.Secret) // (design: Hook secrets sealed at rest)
	err = s.store.CreateHook(ctx, store.CreateHookParams{Hook: stored, Audit: domain.AuditRecord{
		Actor: "operator:" + by.ID, Action: "hook.create", AgentID: a.ID,
		Data: map[string]any{"hook_id": h.ID, "kind": h.Kind, "queue": h.Queue, "filter": h.Filter, "title_template": h.TitleTemplate, "kind_label": h.KindLabel},
	}})
	if err != nil {
		return HookSecretResult{}, storeErr(err, fmt.Sprintf("agent %q not found", in.Agent), "")
	}
	s.log.Info("hook created", "hook_id", h.ID, "kind", h.Kind, "agent_id", a.ID, "queue", h.Queue, "by", by.ID)
	v := s.hookView(h, a.Handle)
	return HookSecretResult{Hook: v, URL: v.URL, Secret: h.Secret}, nil // shown once
}

// ownedHook loads a hook the person owns; another person's hook and an
// unknown id both answer not_found.
func (s *Service) ownedHook(ctx context.Context, by domain.Person, id string) (domain.Hook, error) {
	nf := domain.Errorf(domain.CodeNotFound, "hook %q not found", id)
	if len(id) != 36 {
		return domain.Hook{}, nf
	}
	h, err := s.store.GetHook(ctx, id)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && h.OwnerID != by.ID) {
		return domain.Hook{}, nf
	}
	return h, err
}

func (s *Service) handleOf(ctx context.Context, agentID string) string {
	a, err := s.store.GetAgent(ctx, store.AgentRef{ID: agentID})
	if err != nil {
		return ""
	}
	return a.Handle
}

// ListHooks lists the person's hooks, oldest first; with agentRef only
// that agent's (not_found when the person does not own it).
func (s *Service) ListHooks(ctx context.Context, by domain.Person, agentRef string) ([]HookView, error) {
	p := store.ListHooksParams{OwnerID: by.ID}
	handles := map[string]string{}
	if agentRef != "" {
		a, err := s.OwnedAgent(ctx, by, agentRef)
		if err != nil {
			return nil, err
		}
		p.AgentID = a.ID
		handles[a.ID] = a.Handle
	}
	hs, err := s.store.ListHooks(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]HookView, 0, len(hs))
	for _, h := range hs {
		if _, ok := handles[h.AgentID]; !ok {
			handles[h.AgentID] = s.handleOf(ctx, h.AgentID)
		}
		out = append(out, s.hookView(h, handles[h.AgentID]))
	}
	return out, nil
}

// GetHook returns one of the person's hooks with its last 20 deliveries,
// newest first. Errors: not_found.
func (s *Service) GetHook(ctx context.Context, by domain.Person, id string) (HookView, error) {
	h, err := s.ownedHook(ctx, by, id)
	if err != nil {
		return HookView{}, err
	}
	ds, err := s.store.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: h.ID, Limit: 20})
	if err != nil {
		return HookView{}, err
	}
	v := s.hookView(h, s.handleOf(ctx, h.AgentID))
	v.LastDeliveries = ds
	return v, nil
}

// HookDeliveries returns a hook's last deliveries (at most limit, 1..100,
// default 20), newest first, for the console. Errors: not_found.
func (s *Service) HookDeliveries(ctx context.Context, by domain.Person, id string, limit int) ([]domain.HookDelivery, error) {
	h, err := s.ownedHook(ctx, by, id)
	if err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 100 {
		limit = 20
	}
	return s.store.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: h.ID, Limit: limit})
}

// PruneDeliveriesOnce deletes, in batches of store.DefaultPruneBatch, the
// deliveries of every hook received before now minus the retention, and
// returns how many it deleted. now is the database's clock, the clock
// Deliver stamps received_at with on every instance (design: Database
// clock). A redelivery within the retention stays a
// duplicate; a delivery id pruned is new again (design: Delivery log
// retention).
func (s *Service) PruneDeliveriesOnce(ctx context.Context) (int64, error) {
	n, err := s.store.PruneDeliveries(ctx, store.PruneDeliveriesParams{Before: s.now().Add(-s.deliveryRetention)})
	if n > 0 {
		s.log.Info("delivery log pruned", "deleted", n, "retention", s.deliveryRetention)
	}
	return n, err
}

// RotateHookSecret replaces the hook's secret and returns the new one
// (shown once); deliveries signed with the old secret are refused from now
// on. Audited as hook.rotate_secret. Errors: not_found.
func (s *Service) RotateHookSecret(ctx context.Context, by domain.Person, id string) (HookSecretResult, error) {
	h, err := s.ownedHook(ctx, by, id)
	if err != nil {
		return HookSecretResult{}, err
	}
	secret := intake.NewSecret()
	h, err = s.store.RotateHookSecret(ctx, store.RotateHookSecretParams{ID: h.ID, Secret: s.sealer.Seal(h.ID, secret), Now: s.now(),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "hook.rotate_secret", AgentID: h.AgentID, Data: map[string]any{"hook_id": h.ID}}})
	if err != nil {
		return HookSecretResult{}, storeErr(err, fmt.Sprintf("hook %q not found", id), "")
	}
	h.Secret = secret
	s.log.Info("hook secret rotated", "hook_id", h.ID, "by", by.ID)
	v := s.hookView(h, s.handleOf(ctx, h.AgentID))
	return HookSecretResult{Hook: v, URL: v.URL, Secret: h.Secret}, nil
}

// rotateHookSecretsOf gives every hook of the agent a new secret that is
// not shown, before the agent changes hands: the previous owner knew the
// old secrets and could otherwise sign deliveries to the new owner's agent.
// Done first, so a failed hand-over leaves the hooks only safer.
func (s *Service) rotateHookSecretsOf(ctx context.Context, by domain.Person, a domain.Agent) error {
	hs, err := s.store.ListHooks(ctx, store.ListHooksParams{AgentID: a.ID})
	if err != nil {
		return err
	}
	for _, h := range hs {
		_, err := s.store.RotateHookSecret(ctx, store.RotateHookSecretParams{ID: h.ID, Secret: s.sealer.Seal(h.ID, intake.NewSecret()), Now: s.now(),
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
func (s *Service) DeleteHook(ctx context.Context, by domain.Person, id string) (HookView, error) {
	h, err := s.ownedHook(ctx, by, id)
	if err != nil {
		return HookView{}, err
	}
	err = s.store.DeleteHook(ctx, store.DeleteHookParams{ID: h.ID, Now: s.now(),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "hook.delete", AgentID: h.AgentID, Data: map[string]any{"hook_id": h.ID, "kind": h.Kind, "queue": h.Queue}}})
	if err != nil {
		return HookView{}, storeErr(err, fmt.Sprintf("hook %q not found", id), "")
	}
	s.log.Info("hook deleted", "hook_id", h.ID, "by", by.ID)
	return s.hookView(h, s.handleOf(ctx, h.AgentID)), nil
}

// Deliver takes one webhook delivery through this instance's receiver:
// the signature, the per-hook limits, decoding, the filter, then the
// delivery's record with its todo (design: Hook signatures). Steps and
// errors: delivery.Receiver.Deliver (rate_limited is *RateLimitedError).
func (s *Service) Deliver(ctx context.Context, in DeliveryInput) (DeliveryResult, error) {
	return s.receiver.Deliver(ctx, in)
}
