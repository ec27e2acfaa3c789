// Package liveness holds the pure rules of heartbeat presence (design: Heartbeat
// body, Liveness states): the one decoder of the heartbeat body, the liveness state an
// agent has at an instant, the start rule, the reported-change audit data,
// the publish pair, and the warnings with their mismatch age. Nothing here
// does I/O or reads a clock: every rule that depends on time takes `now`.
//
// # The heartbeat body (design: Heartbeat body, Value forms)
//
// [DecodeHeartbeat] is the ONE decoder of `agent_heartbeat.v1`; the REST
// route and the WebSocket gateway both call it, and it checks every rule
// itself. The body is closed at every level: a member not in the table of
// (design: Heartbeat body) is `unknown_member` with the RFC 6901 pointer of that member.
// [Heartbeat.Canonical] re-encodes a checked body (the REST handler stores
// and forwards it; design: Heartbeat body).
//
//	h, err := liveness.DecodeHeartbeat(body)
//	if err != nil {
//		var de *domain.Error
//		errors.As(err, &de) // de.Code, de.Pointer
//	}
//	stored := h.Canonical()
//
// # Rules — (design: Liveness states)
//
//   - [StateAt]: offline at and after last heartbeat + timeout (design: Liveness states).
//   - [StartRule]: the state and deadline of an agent loaded at start
//     (design: Start rule).
//   - [ReportedChanged] and [AuditData]: the reported-change audit path
//     (design: Billing-mode audit).
//   - [PublishPair]: agent.presence_changed is published exactly when the
//     pair (state, reported_billing_mode) differs (design: Presence-changed events).
//   - [Assess]: the warnings and the difference behind the gauge
//     rollcall.agent.billing_mode.mismatch_age (design: Warnings, Mismatch age).
//
// Where docs/design.md is silent, the choice made is documented on
// the function or type concerned.
package liveness
