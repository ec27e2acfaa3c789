// Package doorbell holds the doorbell engine of one instance (design:
// Ring on create, Doorbell dedup, Doorbell failover): it rings a todo's doorbell on exactly one of
// this instance's sessions of its agent, deduplicated per todo, fails a
// ring over to another session when it goes unanswered, hands doorbells of
// a closing session to another, sends digests to returning agents (design:
// Digest on return), runs the sweep that re-rings pending todos
// and rings, after a bus outage, what the outage hid. It is built from
// narrow ports (Store, Presence, SessionHub, bus.Bus, Metrics, a clock and
// a logger) and knows nothing of the use cases.
package doorbell

import (
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// Config holds the engine's ports. Store, Bus and Presence are required;
// the session hub is attached later (SetSessionHub).
type Config struct {
	Store Store
	// Bus delivers bus.TodoReady, on which the engine rings.
	Bus      bus.Bus
	Presence Presence
	Clock    clockwork.Clock // nil = real clock
	Log      *slog.Logger    // nil = slog.Default()
	Metrics  Metrics         // nil = counts nothing
	// FailoverAfter is doorbell.failover_after (0 = DefaultFailoverAfter):
	// a todo rung on one of several sessions of its agent here and still
	// unclaimed this long after is rung on another.
	FailoverAfter time.Duration
}

type nopMetrics struct{}

func (nopMetrics) DoorbellRung() {}
func (nopMetrics) DigestSent()   {}
func (nopMetrics) SweepRung(int) {}

// New builds the engine and subscribes it to bus.TodoReady.
func New(c Config) *Engine {
	workgroup.Defaults(&c.Clock, &c.Log)
	if c.Metrics == nil {
		c.Metrics = nopMetrics{}
	}
	if c.FailoverAfter <= 0 {
		c.FailoverAfter = DefaultFailoverAfter
	}
	d := &Engine{store: c.Store, presence: c.Presence, clock: c.Clock, log: c.Log, metrics: c.Metrics,
		recent: newDedup(DedupTTL), rr: map[string]int{}, records: records{wake: make(chan struct{}, 1), full: make(chan struct{}, 1)},
		failoverAfter: c.FailoverAfter, suspect: map[string]time.Time{}, reconnect: map[string]time.Time{}, pooling: pooling{bus: c.Bus}}
	bus.Listen(c.Bus, func(sig bus.TodoReady) {
		if sig.PoolID != "" {
			d.onPooledSignal(sig.TodoReady)
			return
		}
		d.Ring(sig.TodoReady)
	}, func(_ string, err error) {
		d.log.Warn("malformed todo-ready signal dropped", "err", err)
	})
	return d
}
