// Package metrics is Rollcall's metrics adapter (design: Metrics):
// OpenTelemetry SDK instruments exported by the OpenTelemetry
// Prometheus exporter on a private registry, served at GET /metrics. It
// implements app.Metrics and app.HookMetrics.
//
//	m, err := metrics.New(metrics.Options{MismatchAges: svc.MismatchAges})
//	mux.Handle("GET /metrics", m.Handler())
//	svc := app.New(app.Options{Metrics: m, …})
//
// Instruments (Prometheus names after the exporter's translation):
//
//	rollcall.agent.billing_mode.mismatch_age  gauge, s, attribute agent.handle
//	    → rollcall_agent_billing_mode_mismatch_age_seconds{agent_handle}
//	    one series per active tracked agent: seconds since any difference of
//	    reported billing (design: Warnings) began, 0 without one
//	    (design: Mismatch age); the alert RollcallBillingModeMismatch reads it.
//	rollcall.heartbeats                       → rollcall_heartbeats_total
//	rollcall.liveness.persisted_rows          → rollcall_liveness_persisted_rows_total
//	rollcall.liveness.flushes                 → rollcall_liveness_flushes_total
//	rollcall.doorbells                        → rollcall_doorbells_total
//	rollcall.digests                          → rollcall_digests_total
//	rollcall.sweep.rings                      → rollcall_sweep_rings_total
//	rollcall.presence.transitions {presence}  → rollcall_presence_transitions_total
//	rollcall.hook.deliveries {kind, outcome} → rollcall_hook_deliveries_total
//	rollcall.pool.pushes                      → rollcall_pool_pushes_total
//	rollcall.store.commit_batch_size          histogram, writes
//	    → rollcall_store_commit_batch_size_{bucket,sum,count}
//	    the writes of each group commit of the store (design: Group commit)
package metrics

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Names of the instruments (OpenTelemetry names; see the package doc for
// the Prometheus names).
const (
	NameMismatchAge   = "rollcall.agent.billing_mode.mismatch_age"
	NameHeartbeats    = "rollcall.heartbeats"
	NamePersistedRows = "rollcall.liveness.persisted_rows"
	NameFlushes       = "rollcall.liveness.flushes"
	NameDoorbells     = "rollcall.doorbells"
	NameDigests       = "rollcall.digests"
	NameSweepRings    = "rollcall.sweep.rings"
	NameTransitions   = "rollcall.presence.transitions"
	NamePoolPushes    = "rollcall.pool.pushes"
	NameCommitBatch   = "rollcall.store.commit_batch_size"
	AttrAgentHandle   = "agent.handle"
	AttrPresence      = "presence"
	PromMismatchAge   = "rollcall_agent_billing_mode_mismatch_age_seconds"
	PromHeartbeats    = "rollcall_heartbeats_total"
	PromPersistedRows = "rollcall_liveness_persisted_rows_total"
	PromFlushes       = "rollcall_liveness_flushes_total"
	PromDoorbells     = "rollcall_doorbells_total"
	PromDigests       = "rollcall_digests_total"
	PromSweepRings    = "rollcall_sweep_rings_total"
	PromPoolPushes    = "rollcall_pool_pushes_total"
	PromCommitBatch   = "rollcall_store_commit_batch_size"
	PromTransitions   = "rollcall_presence_transitions_total"
	scopeName         = "github.com/rollcall/rollcall"
)

// Options configures the adapter.
type Options struct {
	// MismatchAges reports the gauge's values at each collection: one call
	// of yield per active tracked agent (app.Service.MismatchAges). nil =
	// no series.
	MismatchAges func(yield func(handle string, seconds float64))
}

// Metrics holds the instruments. Its methods are safe for concurrent use
// and never block.
type Metrics struct {
	provider *sdkmetric.MeterProvider
	registry *prometheus.Registry

	heartbeats, persisted, flushes, doorbells, digests, sweepRings, transitions metric.Int64Counter
	inAttr, outAttr                                                             metric.MeasurementOption
	hookDeliveries                                                              metric.Int64Counter // hooks.go
	poolPushes                                                                  metric.Int64Counter
	commitBatch                                                                 metric.Int64Histogram
}

// New builds the instruments on a fresh registry (with the Go runtime and
// process collectors). Errors: an instrument could not be created.
func New(o Options) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	meter := provider.Meter(scopeName)
	m := &Metrics{provider: provider, registry: reg,
		inAttr:  metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrPresence, "in"))),
		outAttr: metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrPresence, "out")))}
	counter := func(name, unit, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		return c
	}
	m.heartbeats = counter(NameHeartbeats, "{heartbeat}", "Heartbeats accepted by the heartbeat use case (REST and gateway member agent).")
	m.persisted = counter(NamePersistedRows, "{row}", "Agent rows written by the liveness flush loop (database writes of the heartbeat path).")
	m.flushes = counter(NameFlushes, "{pass}", "Flush passes of the liveness tracker that wrote rows (each one transaction, at most one per agent.heartbeat_persist_interval).")
	m.doorbells = counter(NameDoorbells, "{doorbell}", "Todo doorbells queued to an MCP session.")
	m.digests = counter(NameDigests, "{digest}", "Digests queued to an MCP session.")
	m.sweepRings = counter(NameSweepRings, "{ring}", "Todos re-rung by the doorbell sweep.")
	m.poolPushes = counter(NamePoolPushes, "{todo}", "Todos pushed to a pool (design: Pools).")
	m.transitions = counter(NameTransitions, "{transition}", "Claimed in/out presence transitions, by the presence entered.")
	if err == nil {
		err = m.newHookCounter(meter)
	}
	if err == nil {
		m.commitBatch, err = meter.Int64Histogram(NameCommitBatch, metric.WithUnit("{write}"),
			metric.WithDescription("Writes committed together by one group commit of the store (design: Group commit)."),
			metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64))
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if o.MismatchAges != nil {
		_, err = meter.Float64ObservableGauge(NameMismatchAge, metric.WithUnit("s"),
			metric.WithDescription("Seconds since the reported billing of an active agent began to differ from its configuration, 0 without a difference."),
			metric.WithFloat64Callback(func(_ context.Context, obs metric.Float64Observer) error {
				o.MismatchAges(func(handle string, seconds float64) {
					obs.Observe(seconds, metric.WithAttributeSet(attribute.NewSet(attribute.String(AttrAgentHandle, handle))))
				})
				return nil
			}))
		if err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return m, nil
}

// Handler serves the Prometheus text exposition of every instrument
// (GET /metrics).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// Shutdown stops the meter provider.
func (m *Metrics) Shutdown(ctx context.Context) error { return m.provider.Shutdown(ctx) }

var bg = context.Background()

// Heartbeat implements app.Metrics.
func (m *Metrics) Heartbeat() { m.heartbeats.Add(bg, 1) }

// HeartbeatRowsPersisted implements app.Metrics: one call per flush pass.
func (m *Metrics) HeartbeatRowsPersisted(n int) {
	m.persisted.Add(bg, int64(n))
	m.flushes.Add(bg, 1)
}

// DoorbellRung implements app.Metrics.
func (m *Metrics) DoorbellRung() { m.doorbells.Add(bg, 1) }

// DigestSent implements app.Metrics.
func (m *Metrics) DigestSent() { m.digests.Add(bg, 1) }

// SweepRung implements app.Metrics.
func (m *Metrics) SweepRung(n int) { m.sweepRings.Add(bg, int64(n)) }

// PoolPushed implements app.Metrics.
func (m *Metrics) PoolPushed() { m.poolPushes.Add(bg, 1) }

// CommitBatch records the size of one group commit of the store (the
// stores' ObserveCommitBatches).
func (m *Metrics) CommitBatch(n int) { m.commitBatch.Record(bg, int64(n)) }

// PresenceTransition implements app.Metrics; to is "in" or "out".
func (m *Metrics) PresenceTransition(to string) {
	if to == "in" {
		m.transitions.Add(bg, 1, m.inAttr)
		return
	}
	m.transitions.Add(bg, 1, m.outAttr)
}
