// Package tracker is the liveness tracker: heartbeat presence (design:
// Liveness states). The rules themselves live in
// internal/liveness (pure); the tracker runs them on the injected clock and
// the ports it is built from (Options): a store sub-interface, the bus, the
// operator event hub, a logger, metrics and a presence signal. It never holds
// the use-case service; the heartbeat use case (authorization first) is
// app.Service.Heartbeat, which calls Arrive and Heartbeat.
//
// One Tracker per process keeps one entry per agent it has seen: the last
// heartbeat (database clock, clock.go), the last full report, the
// last published pair and the deadline timer. Steady heartbeats only touch
// memory; the flush loop writes dirty entries once per
// agent.heartbeat_persist_interval, so database writes are bounded by
// agents ÷ persist interval, not by the heartbeat rate. A transition of the
// liveness state (first heartbeat, coming back, offline) is written at once
// besides, and the reported-change audit (group-committed: audit.go) and
// project readiness write on the heartbeat path, only on a change.
// Deadlines are extended by stalls of the process (internal/stall).
//
// Several instances: the instance that receives an agent's heartbeat owns
// the agent's deadline. When it did not own it yet it broadcasts a claim on
// bus.ChannelLiveness carrying its heartbeat time; the others drop their
// timer without publishing (claims.go). So no instance reports an
// agent offline while another holds a heartbeat fresher than the timeout.
// An instance that dies releases its agents: its owner lease in the store
// expires, and the instance that takes it over publishes them offline one
// timeout after the take-over (lease.go; design: Owner lease).
package tracker
