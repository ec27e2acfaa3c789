package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/store"
)

// Per-hook delivery limits (design: Hooks, Failed-signature limit). The
// signature is checked first, before any limit, so a correctly signed
// delivery is never refused for what forgers did:
//   - a delivery that passes it takes from the hook's delivery bucket:
//     HookDeliveryBurst refilled at HookDeliveryRate per second, i.e. 60 a
//     minute on each instance (past it: 429);
//   - one that fails it (unsigned, bad signature, stale timestamp,
//     unsupported Content-Type) counts against the hook's failed-check
//     limit: HookFailedChecks per HookFailedWindow, a fixed window; past it
//     the delivery is answered 429 instead of 401/400/415, without a
//     database statement once this instance knows the window is spent. On
//     PostgreSQL the window is counted in the database, so all instances
//     together allow HookFailedChecks (design: Limits shared by instances).
//
// So a flood of forged deliveries never uses up what the real sender
// needs, and it is bounded per hook, not per client address (senders such
// as GitHub share addresses). Refused deliveries are recorded in the
// delivery log (outcome refused, the reason, never the body, the delivery
// id or any header) at most hookRefusalBurst at once per hook (then one per
// 10 s), so a flood of bad signatures cannot grow the table; every refusal
// is still logged and counted.
const (
	HookDeliveryRate  = 1.0
	HookDeliveryBurst = 60
	HookFailedChecks  = 60
	HookFailedWindow  = time.Minute
	hookRefusalRate   = 0.1
	hookRefusalBurst  = 10
)

// The delivery log's retention (design: Delivery log retention): every
// instance deletes, every DeliveryPruneInterval and once when its loops
// start, the deliveries received more than the retention ago
// (hooks.delivery_retention, default DefaultDeliveryRetention).
const (
	DefaultDeliveryRetention = 7 * 24 * time.Hour
	DeliveryPruneInterval    = 10 * time.Minute
)

// HookMetrics is an optional extension of Metrics: a Metrics that also
// implements it counts hook deliveries by kind and outcome (created,
// duplicate, ignored, ping, refused, rate_limited).
type HookMetrics interface {
	HookDelivery(kind, outcome string)
}

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

// DeliveryInput is one delivery as received: the hook id of the URL, the
// request headers and the raw body (at most intake.MaxBody bytes; the
// adapter answers 413 beyond).
type DeliveryInput struct {
	HookID string
	Header http.Header
	Body   []byte
}

// Deliver handles one webhook delivery (design: Hook signatures): the signature
// (before anything of the body is parsed), then the hook's rate limit for
// verified deliveries (a delivery that fails the check takes from a
// separate per-hook bucket instead), then decoding, the filter, and the
// todo — created in the same transaction that records the delivery,
// attributed hook:<id>, push-eligible. A redelivery (the same delivery id
// for the same hook) creates nothing; the todo's idempotency key is
// intake.TodoKey's. The doorbell rings after commit through the bus, as
// for a pushed todo.
//
// Errors (nothing is created by any of them): not_found (unknown hook),
// rate_limited (*RateLimitedError), unauthenticated (missing or bad
// signature; logged, counted, recorded — the body is never echoed),
// invalid_argument (stale Standard Webhooks timestamp, missing delivery
// headers, a body that is not the event it claims, a queue outside the
// agent's scope; Reason "unsupported_media_type" for a Content-Type other
// than JSON or form), conflict (the hook's agent is revoked).
func (s *Service) Deliver(ctx context.Context, in DeliveryInput) (DeliveryResult, error) {
	nf := domain.Errorf(domain.CodeNotFound, "hook %q not found", in.HookID)
	if len(in.HookID) != 36 {
		return DeliveryResult{}, nf
	}
	h, err := s.store.GetHook(ctx, in.HookID)
	if errors.Is(err, domain.ErrNotFound) {
		return DeliveryResult{}, nf
	}
	if err != nil {
		return DeliveryResult{}, err
	}
	if h.Secret, err = s.sealer.Open(h.ID, h.Secret); err != nil {
		s.log.Error("hook secret does not open; deliveries to the hook fail until hooks.secret_key (or hooks.secret_key_previous) is its key", "hook_id", h.ID, "err", err)
		return DeliveryResult{}, err
	}
	now := s.now()
	payload, verr := intake.Verify(h, in.Header, in.Body, now)
	if verr != nil {
		if wait, over := s.hookFail.Fail(ctx, "hook:"+h.ID, now); over {
			return s.refuseAs(ctx, h, now, "rate_limited", "too many failed signature checks", &RateLimitedError{RetryAfter: wait,
				Err: domain.Errorf(domain.CodeRateLimited, "hook %s refuses more than %d deliveries a minute that fail its signature check", h.ID, HookFailedChecks)})
		}
		if r, ok := intake.Refused(verr); ok {
			return s.refuse(ctx, h, now, r)
		}
		return DeliveryResult{}, verr
	}
	if ok, wait := s.hookPass.Allow(h.ID, now); !ok {
		s.countDelivery(h.Kind, "rate_limited")
		return DeliveryResult{}, &RateLimitedError{RetryAfter: wait,
			Err: domain.Errorf(domain.CodeRateLimited, "hook %s takes at most %d deliveries a minute", h.ID, int(HookDeliveryRate*60))}
	}
	switch h.Kind {
	case domain.HookGitHub:
		return s.deliverGitHub(ctx, h, in, payload, now)
	default:
		return s.deliverStandard(ctx, h, in, now)
	}
}

func (s *Service) countDelivery(kind, outcome string) {
	if m, ok := s.metrics.(HookMetrics); ok {
		m.HookDelivery(kind, outcome)
	}
}

// refuse logs, counts and (within the refusal budget) records a refused
// delivery and returns err. The body is never logged or echoed.
func (s *Service) refuse(ctx context.Context, h domain.Hook, now time.Time, r intake.Refusal) (DeliveryResult, error) {
	return s.refuseAs(ctx, h, now, domain.DeliveryRefused, r.Reason, r.Err)
}

// refuseAs is refuse counted under outcome (refused or rate_limited).
func (s *Service) refuseAs(ctx context.Context, h domain.Hook, now time.Time, outcome, reason string, err error) (DeliveryResult, error) {
	s.log.Warn("hook delivery refused", "hook_id", h.ID, "kind", h.Kind, "reason", reason)
	s.countDelivery(h.Kind, outcome)
	if ok, _ := s.hookRefusals.Allow(h.ID, now); ok {
		_, rerr := s.store.RecordDelivery(ctx, store.RecordDeliveryParams{Delivery: domain.HookDelivery{
			ID: newID(), HookID: h.ID, Outcome: domain.DeliveryRefused, Reason: reason, ReceivedAt: now}})
		if rerr != nil && !errors.Is(rerr, domain.ErrNotFound) {
			s.log.Warn("recording a refused delivery failed", "hook_id", h.ID, "err", rerr)
		}
	}
	return DeliveryResult{}, err
}

func (s *Service) deliverGitHub(ctx context.Context, h domain.Hook, in DeliveryInput, payload []byte, now time.Time) (DeliveryResult, error) {
	// Verified: from here on the sender is the repository's webhook.
	v, r := intake.ReadGitHub(h, in.Header, payload, now, newID)
	if r != nil {
		return s.refuse(ctx, h, now, *r)
	}
	if v.Todo != nil {
		if _, r, err := s.hookAgent(ctx, h); r != nil || err != nil {
			return s.refuseOr(ctx, h, now, r, err)
		}
	}
	return s.record(ctx, h, v)
}

func (s *Service) deliverStandard(ctx context.Context, h domain.Hook, in DeliveryInput, now time.Time) (DeliveryResult, error) {
	key, r := intake.StandardKey(in.Header)
	if r != nil {
		return s.refuse(ctx, h, now, *r)
	}
	body, err := intake.DecodeStandard(in.Body)
	if err != nil {
		return s.refuse(ctx, h, now, intake.Refusal{Reason: "bad body", Err: domain.Errorf(domain.CodeInvalidArgument, "the body must be a JSON object {title, queue?, kind?, payload?}: %v", errors.Unwrap(err))})
	}
	a, r, err := s.hookAgent(ctx, h)
	if r != nil || err != nil {
		return s.refuseOr(ctx, h, now, r, err)
	}
	v, r := intake.ReadStandard(h, a, key, body, now, newID)
	if r != nil {
		return s.refuse(ctx, h, now, *r)
	}
	return s.record(ctx, h, v)
}

// hookAgent reads the hook's agent; a revoked one refuses the delivery.
func (s *Service) hookAgent(ctx context.Context, h domain.Hook) (domain.Agent, *intake.Refusal, error) {
	a, err := s.store.GetAgent(ctx, store.AgentRef{ID: h.AgentID})
	if err == nil && a.Revoked() {
		return a, &intake.Refusal{Reason: "agent revoked", Err: domain.Errorf(domain.CodeConflict, "the hook's agent is revoked; it takes no todos")}, nil
	}
	return a, nil, err
}

// refuseOr refuses the delivery for r, or fails it with err.
func (s *Service) refuseOr(ctx context.Context, h domain.Hook, now time.Time, r *intake.Refusal, err error) (DeliveryResult, error) {
	if r != nil {
		return s.refuse(ctx, h, now, *r)
	}
	return DeliveryResult{}, err
}

// record writes the delivery (and its todo) and rings after commit.
func (s *Service) record(ctx context.Context, h domain.Hook, v intake.Verified) (DeliveryResult, error) {
	d := v.Delivery
	res, err := s.store.RecordDelivery(ctx, store.RecordDeliveryParams{Delivery: d, Todo: v.Todo})
	if errors.Is(err, domain.ErrNotFound) {
		return DeliveryResult{}, domain.Errorf(domain.CodeNotFound, "hook %q not found", h.ID) // deleted meanwhile
	}
	if err != nil {
		return DeliveryResult{}, err
	}
	if res.Duplicate {
		s.countDelivery(h.Kind, domain.DeliveryDuplicate)
		s.log.Info("hook delivery duplicate", "hook_id", h.ID, "key", d.Key)
		return DeliveryResult{Outcome: domain.DeliveryDuplicate, TodoID: res.Delivery.TodoID}, nil
	}
	s.countDelivery(h.Kind, d.Outcome)
	s.log.Info("hook delivery", "hook_id", h.ID, "key", d.Key, "event", d.Event, "action", d.Action, "outcome", d.Outcome, "reason", d.Reason, "todo_id", res.Todo.ID)
	if res.Created && res.Todo.PushEligible {
		s.publishTodoReady(ctx, res.Todo)
	}
	return DeliveryResult{Outcome: d.Outcome, TodoID: res.Delivery.TodoID, Reason: d.Reason}, nil
}
