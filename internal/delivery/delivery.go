// Package delivery takes webhook deliveries (design: Hook signatures,
// Failed-signature limit): the signature first, then the per-hook limits,
// decoding and the filter (internal/intake's rules), and the delivery's
// record with its todo in one transaction, ringing after commit.
package delivery

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/ratelimit"
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
// id or any header) at most refusalBurst at once per hook (then one per
// 10 s), so a flood of bad signatures cannot grow the table; every refusal
// is still logged and counted.
const (
	HookDeliveryRate  = 1.0
	HookDeliveryBurst = 60
	HookFailedChecks  = 60
	HookFailedWindow  = time.Minute
	refusalRate       = 0.1
	refusalBurst      = 10
)

// Store is what the Receiver reads and writes: the hook, its agent and the
// delivery log (with the delivery's todo, in one transaction).
type Store interface {
	GetHook(ctx context.Context, id string) (domain.Hook, error)
	GetAgent(ctx context.Context, ref store.AgentRef) (domain.Agent, error)
	RecordDelivery(ctx context.Context, p store.RecordDeliveryParams) (store.RecordDeliveryResult, error)
}

// Metrics counts hook deliveries by kind and outcome (created, duplicate,
// ignored, ping, refused, rate_limited).
type Metrics interface {
	HookDelivery(kind, outcome string)
}

// Config holds the Receiver's ports. Store, Now, NewID, Log and
// Publish are required; Sealer nil = hook secrets stored in plaintext;
// Metrics nil = not counted; Shared nil = failed checks counted on this
// instance only (design: Limits shared by instances).
type Config struct {
	Store   Store
	Sealer  *intake.Sealer
	Now     func() time.Time
	NewID   func() string
	Log     *slog.Logger
	Metrics Metrics
	Shared  ratelimit.Shared
	// Publish announces a created, push-eligible todo after its commit
	// (the doorbell rings through the bus, as for a pushed todo).
	Publish func(ctx context.Context, t domain.Todo)
}

// Receiver takes webhook deliveries: signature, limits, decoding, filter,
// and the delivery's record with its todo (see Deliver).
type Receiver struct {
	store          Store
	sealer         *intake.Sealer
	now            func() time.Time
	newID          func() string
	log            *slog.Logger
	metrics        Metrics
	publish        func(context.Context, domain.Todo)
	pass, refusals *ratelimit.Limiter
	fail           *ratelimit.Failures
}

// New builds a Receiver with the per-hook limits above.
func New(c Config) *Receiver {
	rc := &Receiver{store: c.Store, sealer: c.Sealer, now: c.Now, newID: c.NewID, log: c.Log, metrics: c.Metrics, publish: c.Publish,
		pass: ratelimit.New(HookDeliveryRate, HookDeliveryBurst), refusals: ratelimit.New(refusalRate, refusalBurst)}
	rc.fail = ratelimit.NewFailures(HookFailedChecks, HookFailedWindow, c.Shared, func(err error) {
		c.Log.Warn("counting a failed signature check in the database failed; counted on this instance", "err", err)
	})
	return rc
}

// PruneFailures drops this instance's spent failed-check windows.
func (rc *Receiver) PruneFailures(now time.Time) { rc.fail.Prune(now) }

// Input is one delivery as received: the hook id of the URL, the
// request headers and the raw body (at most intake.MaxBody bytes; the
// adapter answers 413 beyond).
type Input struct {
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
// rate_limited (*ratelimit.Error), unauthenticated (missing or bad
// signature; logged, counted, recorded — the body is never echoed),
// invalid_argument (stale Standard Webhooks timestamp, missing delivery
// headers, a body that is not the event it claims, a queue outside the
// agent's scope; Reason "unsupported_media_type" for a Content-Type other
// than JSON or form), conflict (the hook's agent is revoked).
func (rc *Receiver) Deliver(ctx context.Context, in Input) (wire.DeliveryResult, error) {
	nf := domain.Errorf(domain.CodeNotFound, "hook %q not found", in.HookID)
	if len(in.HookID) != 36 {
		return wire.DeliveryResult{}, nf
	}
	h, err := rc.store.GetHook(ctx, in.HookID)
	if errors.Is(err, domain.ErrNotFound) {
		return wire.DeliveryResult{}, nf
	}
	if err != nil {
		return wire.DeliveryResult{}, err
	}
	if h.Secret, err = rc.sealer.Open(h.ID, h.Secret); err != nil {
		rc.log.Error("hook secret does not open; deliveries to the hook fail until hooks.secret_key (or hooks.secret_key_previous) is its key", "hook_id", h.ID, "err", err)
		return wire.DeliveryResult{}, err
	}
	now := rc.now()
	payload, verr := intake.Verify(h, in.Header, in.Body, now)
	if verr != nil {
		if wait, over := rc.fail.Fail(ctx, "hook:"+h.ID, now); over {
			return rc.refuseAs(ctx, h, now, "rate_limited", "too many failed signature checks", &ratelimit.Error{RetryAfter: wait,
				Err: domain.Errorf(domain.CodeRateLimited, "hook %s refuses more than %d deliveries a minute that fail its signature check", h.ID, HookFailedChecks)})
		}
		if r, ok := intake.Refused(verr); ok {
			return rc.refuse(ctx, h, now, r)
		}
		return wire.DeliveryResult{}, verr
	}
	if ok, wait := rc.pass.Allow(h.ID, now); !ok {
		rc.countDelivery(h.Kind, "rate_limited")
		return wire.DeliveryResult{}, &ratelimit.Error{RetryAfter: wait,
			Err: domain.Errorf(domain.CodeRateLimited, "hook %s takes at most %d deliveries a minute", h.ID, int(HookDeliveryRate*60))}
	}
	switch h.Kind {
	case domain.HookGitHub:
		return rc.deliverGitHub(ctx, h, in, payload, now)
	default:
		return rc.deliverStandard(ctx, h, in, now)
	}
}

func (rc *Receiver) countDelivery(kind, outcome string) {
	if rc.metrics != nil {
		rc.metrics.HookDelivery(kind, outcome)
	}
}

// refuse logs, counts and (within the refusal budget) records a refused
// delivery and returns err. The body is never logged or echoed.
func (rc *Receiver) refuse(ctx context.Context, h domain.Hook, now time.Time, r intake.Refusal) (wire.DeliveryResult, error) {
	return rc.refuseAs(ctx, h, now, domain.DeliveryRefused, r.Reason, r.Err)
}

// refuseAs is refuse counted under outcome (refused or rate_limited).
func (rc *Receiver) refuseAs(ctx context.Context, h domain.Hook, now time.Time, outcome, reason string, err error) (wire.DeliveryResult, error) {
	rc.log.Warn("hook delivery refused", "hook_id", h.ID, "kind", h.Kind, "reason", reason)
	rc.countDelivery(h.Kind, outcome)
	if ok, _ := rc.refusals.Allow(h.ID, now); ok {
		_, rerr := rc.store.RecordDelivery(ctx, store.RecordDeliveryParams{Delivery: domain.HookDelivery{
			ID: rc.newID(), HookID: h.ID, Outcome: domain.DeliveryRefused, Reason: reason, ReceivedAt: now}})
		if rerr != nil && !errors.Is(rerr, domain.ErrNotFound) {
			rc.log.Warn("recording a refused delivery failed", "hook_id", h.ID, "err", rerr)
		}
	}
	return wire.DeliveryResult{}, err
}

func (rc *Receiver) deliverGitHub(ctx context.Context, h domain.Hook, in Input, payload []byte, now time.Time) (wire.DeliveryResult, error) {
	// Verified: from here on the sender is the repository's webhook.
	v, r := intake.ReadGitHub(h, in.Header, payload, now, rc.newID)
	if r != nil {
		return rc.refuse(ctx, h, now, *r)
	}
	if v.Todo != nil {
		if _, r, err := rc.hookAgent(ctx, h); r != nil || err != nil {
			return rc.refuseOr(ctx, h, now, r, err)
		}
	}
	return rc.record(ctx, h, v)
}

func (rc *Receiver) deliverStandard(ctx context.Context, h domain.Hook, in Input, now time.Time) (wire.DeliveryResult, error) {
	key, r := intake.StandardKey(in.Header)
	if r != nil {
		return rc.refuse(ctx, h, now, *r)
	}
	body, err := intake.DecodeStandard(in.Body)
	if err != nil {
		return rc.refuse(ctx, h, now, intake.Refusal{Reason: "bad body", Err: domain.Errorf(domain.CodeInvalidArgument, "the body must be a JSON object {title, queue?, kind?, payload?}: %v", errors.Unwrap(err))})
	}
	a, r, err := rc.hookAgent(ctx, h)
	if r != nil || err != nil {
		return rc.refuseOr(ctx, h, now, r, err)
	}
	v, r := intake.ReadStandard(h, a, key, body, now, rc.newID)
	if r != nil {
		return rc.refuse(ctx, h, now, *r)
	}
	return rc.record(ctx, h, v)
}

// hookAgent reads the hook's agent; a revoked one refuses the delivery.
func (rc *Receiver) hookAgent(ctx context.Context, h domain.Hook) (domain.Agent, *intake.Refusal, error) {
	a, err := rc.store.GetAgent(ctx, store.AgentRef{ID: h.AgentID})
	if err == nil && a.Revoked() {
		return a, &intake.Refusal{Reason: "agent revoked", Err: domain.Errorf(domain.CodeConflict, "the hook's agent is revoked; it takes no todos")}, nil
	}
	return a, nil, err
}

// refuseOr refuses the delivery for r, or fails it with err.
func (rc *Receiver) refuseOr(ctx context.Context, h domain.Hook, now time.Time, r *intake.Refusal, err error) (wire.DeliveryResult, error) {
	if r != nil {
		return rc.refuse(ctx, h, now, *r)
	}
	return wire.DeliveryResult{}, err
}

// record writes the delivery (and its todo) and rings after commit.
func (rc *Receiver) record(ctx context.Context, h domain.Hook, v intake.Verified) (wire.DeliveryResult, error) {
	d := v.Delivery
	res, err := rc.store.RecordDelivery(ctx, store.RecordDeliveryParams{Delivery: d, Todo: v.Todo})
	if errors.Is(err, domain.ErrNotFound) {
		return wire.DeliveryResult{}, domain.Errorf(domain.CodeNotFound, "hook %q not found", h.ID) // deleted meanwhile
	}
	if err != nil {
		return wire.DeliveryResult{}, err
	}
	if res.Duplicate {
		rc.countDelivery(h.Kind, domain.DeliveryDuplicate)
		rc.log.Info("hook delivery duplicate", "hook_id", h.ID, "key", d.Key)
		return wire.DeliveryResult{Outcome: domain.DeliveryDuplicate, TodoID: res.Delivery.TodoID}, nil
	}
	rc.countDelivery(h.Kind, d.Outcome)
	rc.log.Info("hook delivery", "hook_id", h.ID, "key", d.Key, "event", d.Event, "action", d.Action, "outcome", d.Outcome, "reason", d.Reason, "todo_id", res.Todo.ID)
	if res.Created && res.Todo.PushEligible {
		rc.publish(ctx, res.Todo)
	}
	return wire.DeliveryResult{Outcome: d.Outcome, TodoID: res.Delivery.TodoID, Reason: d.Reason}, nil
}
