// Package presence decides whether an agent is in or out: the one place that
// holds the presence rules (design: Presence: in and out).
//
// It has three parts, all pure (no I/O, no clock of its own; every function
// that depends on time takes now or t as an argument):
//
//   - [ParseShift] and [Shift.In]: the shift grammar and its membership
//     test, which also yields the next boundary, the first instant the
//     answer changes (design: Shift grammar, Daylight-saving time).
//   - [Effective]: the precedence rule — override, then shift, then default
//     in (design: Effective presence). The doorbell filter, the sweep, the
//     self verbs, the API, the console and the evaluator all call it.
//   - [ClockIn], [ClockOut], [ParseFor], [OperatorOverride] and [Budget]:
//     what the self verbs and the operator routes write into the override
//     columns, returned as a [Change] for the caller to store, and the self
//     clock-in cap they keep (design: Self verbs, Owner's word,
//     Self clock-in cap, Operator overrides).
//
// A minimal use:
//
//	sh, err := presence.ParseShift("TZ=America/Los_Angeles Mon-Fri 09:00-13:00")
//	if err != nil { … } // *domain.Error, invalid_argument, pointer /shift
//	p, src, until := presence.Effective(presence.Inputs{Shift: sh}, now)
//	// p == "in" or "out"; src == "shift"; until == next change or nil
//
// # Daylight-saving time
//
// Windows are written in wall-clock time of the shift's zone, so DST
// shortens or lengthens them. Each window edge (a start or an end) is an
// instant: the first instant at which the zone's clock reads that local time
// or later. Two consequences follow:
//
//   - A local time skipped by a spring-forward gap happens at the instant the
//     clock jumps over it (e.g. 02:30 on the day Los Angeles springs from
//     02:00 to 03:00 is 03:00 PDT). A window lying wholly inside the gap is
//     empty that day.
//   - A local time repeated by a fall-back happens at its first occurrence,
//     like cron: an edge never fires twice. While the clock replays the
//     repeated interval the answer stays what it was just before the clock
//     went back. So `01:30-03:00` on the night Los Angeles falls back from
//     02:00 PDT to 01:00 PST runs from 01:30 PDT to 03:00 PST (2 h 30 min),
//     and a window ending at 01:30 ends at 01:30 PDT and does not resume
//     at 01:00 PST.
//
// Equivalently: t is in the shift when the highest local clock reading
// reached at or before t lies in one of the windows.
//
// # Zones
//
// No prefix means UTC: Rollcall is a server and the host zone must not
// matter, so `Local` is rejected. Zones load with [time.LoadLocation]; the
// zone database is embedded (time/tzdata) and used when the host has none.
// Locations are cached per name, so a zone is loaded at most once per process.
package presence
