package app

// Metrics is the port through which the use cases count what Rollcall does
// (design: Metrics). The OpenTelemetry adapter in
// internal/metrics implements it; NopMetrics is the default. Every method
// is cheap, never blocks and is safe for concurrent use.
type Metrics interface {
	// Heartbeat counts one heartbeat accepted by the heartbeat use case
	// (REST or gateway member agent).
	Heartbeat()
	// HeartbeatRowsPersisted counts agent rows written by one flush pass of
	// the liveness tracker (design: Flush loop; database writes); it is called once
	// per pass that wrote rows.
	HeartbeatRowsPersisted(n int)
	// DoorbellRung counts one todo doorbell queued to a session.
	DoorbellRung()
	// DigestSent counts one digest queued to a session.
	DigestSent()
	// SweepRung counts n todos rung by one sweep pass.
	SweepRung(n int)
	// PresenceTransition counts one claimed in/out transition; to is "in"
	// or "out".
	PresenceTransition(to string)
	// PoolPushed counts one todo created by a push to a pool (design: Pools).
	PoolPushed()
}

// NopMetrics counts nothing.
type NopMetrics struct{}

// Heartbeat implements Metrics.
func (NopMetrics) Heartbeat() {}

// HeartbeatRowsPersisted implements Metrics.
func (NopMetrics) HeartbeatRowsPersisted(int) {}

// DoorbellRung implements Metrics.
func (NopMetrics) DoorbellRung() {}

// DigestSent implements Metrics.
func (NopMetrics) DigestSent() {}

// SweepRung implements Metrics.
func (NopMetrics) SweepRung(int) {}

// PresenceTransition implements Metrics.
func (NopMetrics) PresenceTransition(string) {}

// PoolPushed implements Metrics.
func (NopMetrics) PoolPushed() {}
