package metrics

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Hook delivery counter (design: Hook rate limit): every delivery a hook
// receives, by hook kind and outcome (created, duplicate, ignored, ping,
// refused, rate_limited). Refused deliveries (bad or missing signature, stale
// timestamp, bad body) are the ones to alert on.
const (
	NameHookDeliveries = "rollcall.hook.deliveries"
	PromHookDeliveries = "rollcall_hook_deliveries_total"
	AttrHookKind       = "kind"
	AttrHookOutcome    = "outcome"
)

func (m *Metrics) newHookCounter(meter metric.Meter) error {
	c, err := meter.Int64Counter(NameHookDeliveries, metric.WithUnit("{delivery}"),
		metric.WithDescription("Webhook deliveries received, by hook kind and outcome (refused = bad or missing signature, stale timestamp or bad body)."))
	m.hookDeliveries = c
	return err
}

// HookDelivery implements app.HookMetrics.
func (m *Metrics) HookDelivery(kind, outcome string) {
	m.hookDeliveries.Add(bg, 1, metric.WithAttributes(attribute.String(AttrHookKind, kind), attribute.String(AttrHookOutcome, outcome)))
}
