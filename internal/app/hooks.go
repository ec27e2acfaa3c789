package app

import (
	"context"

	"github.com/rollcall/rollcall/internal/delivery"
	"github.com/rollcall/rollcall/internal/hooks"
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
	DefaultDeliveryRetention = hooks.DefaultDeliveryRetention
	DeliveryPruneInterval    = hooks.DeliveryPruneInterval
)

// UnopenedSecretsError is SealHookSecrets' error for stored hook secrets
// that open with neither configured key (hooks.UnopenedSecretsError).
type UnopenedSecretsError = hooks.UnopenedSecretsError

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

// Deliver takes one webhook delivery through this instance's receiver:
// the signature, the per-hook limits, decoding, the filter, then the
// delivery's record with its todo (design: Hook signatures). Steps and
// errors: delivery.Receiver.Deliver (rate_limited is *RateLimitedError).
func (s *Service) Deliver(ctx context.Context, in DeliveryInput) (DeliveryResult, error) {
	return s.receiver.Deliver(ctx, in)
}
