// Package liveness holds the pure rules of heartbeat presence (DESIGN.md §5,
// seed 000): the one decoder of the heartbeat body, the liveness state an
// agent has at an instant, the start rule, the reported-change audit data,
// the publish pair, and the warnings with their mismatch age. Nothing here
// does I/O or reads a clock: every rule that depends on time takes `now`.
//
// # The heartbeat body — DESIGN.md §5.1 (D-M2-20-1, D-M2-20-2)
//
// [DecodeHeartbeat] is the ONE decoder of `agent_heartbeat.v1`; the REST
// route and the WebSocket gateway both call it, and it checks every rule
// itself. The body is closed at every level: a member not in the table of
// §5.1 is `unknown_member` with the RFC 6901 pointer of that member.
// [Heartbeat.Canonical] re-encodes a checked body (the REST handler stores
// and forwards it; D-M2-20-1).
//
//	h, err := liveness.DecodeHeartbeat(body)
//	if err != nil {
//		var de *domain.Error
//		errors.As(err, &de) // de.Code, de.Pointer
//	}
//	stored := h.Canonical()
//
// # Rules — DESIGN.md §5.2
//
//   - [StateAt]: offline at and after last heartbeat + timeout (D-M2-20-4).
//   - [StartRule]: the state and deadline of an agent loaded at start
//     (D-M2-20-6).
//   - [ReportedChanged] and [AuditData]: the reported-change audit path
//     (D-M2-20-3).
//   - [PublishPair]: agent.presence_changed is published exactly when the
//     pair (state, reported_billing_mode) differs (D-M2-20-4).
//   - [Assess]: the warnings and the difference behind the gauge
//     rollcall.agent.billing_mode.mismatch_age (D-M2-20-7, D-M2-20-8).
//
// Where DESIGN.md and the seed were silent, the choice made is documented on
// the function or type concerned.
package liveness
