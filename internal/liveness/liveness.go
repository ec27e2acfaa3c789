package liveness

import "time"

// Liveness states of an agent (design: Liveness states). StateOnline and
// StateDegraded are also the two values a heartbeat may report.
const (
	StateUnknown  = "unknown"  // no heartbeat ever
	StateOnline   = "online"   // fresh heartbeat reporting online
	StateDegraded = "degraded" // fresh heartbeat reporting degraded
	StateOffline  = "offline"  // the last heartbeat is too old
)

// Deadline returns the instant at which an agent whose last heartbeat
// arrived at lastHeartbeat becomes offline: lastHeartbeat + timeout
// (timeout is agent.presence_timeout). Offline holds at and after it.
func Deadline(lastHeartbeat time.Time, timeout time.Duration) time.Time {
	return lastHeartbeat.Add(timeout)
}

// StateAt returns the liveness state at now of an agent whose last
// heartbeat, received at lastHeartbeat (the server's clock, never the
// sender's), reported the state reported (StateOnline or StateDegraded).
// (design: Billing-mode audit), (design: Liveness states).
//
//   - StateOffline at and after lastHeartbeat + timeout (inclusive): at
//     exactly the deadline the agent is offline, 1 µs before it is not.
//   - StateUnknown when lastHeartbeat is the zero time (never heartbeated).
//   - Otherwise reported; a reported value other than StateOnline or
//     StateDegraded yields StateUnknown.
//
// A lastHeartbeat after now (another instance's clock) counts as fresh.
func StateAt(reported string, lastHeartbeat time.Time, timeout time.Duration, now time.Time) string {
	if lastHeartbeat.IsZero() {
		return StateUnknown
	}
	if !now.Before(Deadline(lastHeartbeat, timeout)) {
		return StateOffline
	}
	switch reported {
	case StateOnline, StateDegraded:
		return reported
	}
	return StateUnknown
}

// StartRule decides, when the server starts at start, the state of an agent
// stored with storedState and last_heartbeat_at lastHeartbeat (nil = NULL),
// and the deadline at which it becomes offline unless a heartbeat arrives
// (design: Liveness states, Start rule). timeout is agent.presence_timeout,
// persistInterval agent.heartbeat_persist_interval.
//
//   - storedState online or degraded, lastHeartbeat present and
//     start < lastHeartbeat + timeout + persistInterval: the stored state,
//     with deadline start + timeout (the grace that lets adapters reconnect
//     after 4013; a restart is not an agent going offline).
//   - storedState online or degraded, lastHeartbeat nil or
//     start ≥ lastHeartbeat + timeout + persistInterval: StateOffline at once,
//     zero deadline. The stored time lags the real last heartbeat by at most
//     persistInterval, so at that age the real one is at least timeout old;
//     the boundary is inclusive like StateAt's.
//   - any other storedState (the tracker does not load it): StateOffline
//     for "offline", StateUnknown otherwise, zero deadline.
func StartRule(storedState string, lastHeartbeat *time.Time, timeout, persistInterval time.Duration, start time.Time) (state string, deadline time.Time) {
	switch storedState {
	case StateOnline, StateDegraded:
	case StateOffline:
		return StateOffline, time.Time{}
	default:
		return StateUnknown, time.Time{}
	}
	if lastHeartbeat == nil || !start.Before(lastHeartbeat.Add(timeout+persistInterval)) {
		return StateOffline, time.Time{}
	}
	return storedState, start.Add(timeout)
}

// Reported is the pair of reported values whose change is audited
// (design: Billing-mode audit): the reported billing mode and tool class,
// nil = not reported.
type Reported struct {
	BillingMode *string
	ToolClass   *string
}

// ReportedChanged reports whether next differs from stored in the billing
// mode or the tool class, counting nil ↔ value (first report, stop
// reporting) as a change. The audit path runs exactly when it is true, and
// again under the row lock (design: Billing-mode audit).
func ReportedChanged(stored, next Reported) bool {
	return !sameString(stored.BillingMode, next.BillingMode) || !sameString(stored.ToolClass, next.ToolClass)
}

func sameString(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Keys of the data of the audit entry agent.heartbeat (design: Billing-mode audit).
const (
	AuditBillingModeOld = "billing_mode_old"
	AuditBillingModeNew = "billing_mode_new"
	AuditToolClassOld   = "tool_class_old"
	AuditToolClassNew   = "tool_class_new"
	AuditKeyType        = "key_type"
	AuditMethod         = "method"
)

// AuditData returns the data of the audit entry agent.heartbeat (allow) for
// a change from old to next with the evidence ev of the heartbeat: only
// billing_mode_old, billing_mode_new, tool_class_old, tool_class_new, each
// when its value exists (non-nil, changed or not), and key_type and method
// when ev is non-nil. All values passed the code form of the decoder, so
// they enter the audit unchanged (design: Value forms, Billing-mode audit). The map is never
// nil.
func AuditData(old, next Reported, ev *BillingEvidence) map[string]string {
	m := make(map[string]string, 6)
	put := func(k string, v *string) {
		if v != nil {
			m[k] = *v
		}
	}
	put(AuditBillingModeOld, old.BillingMode)
	put(AuditBillingModeNew, next.BillingMode)
	put(AuditToolClassOld, old.ToolClass)
	put(AuditToolClassNew, next.ToolClass)
	if ev != nil {
		m[AuditKeyType] = ev.KeyType
		m[AuditMethod] = ev.Method
	}
	return m
}

// PublishPair is what decides whether agent.presence_changed is published:
// it is published exactly when the pair differs from the last published one
// (initially the stored values). ReportedBillingMode is the last reported
// mode, kept while offline; nil = not reported, left out of the payload
// (design: Billing-mode audit, Liveness states).
type PublishPair struct {
	State               string
	ReportedBillingMode *string
}

// Equal reports whether p and q have the same state and the same reported
// billing mode (by value; nil equals only nil).
func (p PublishPair) Equal(q PublishPair) bool {
	return p.State == q.State && sameString(p.ReportedBillingMode, q.ReportedBillingMode)
}

// SameReadiness reports whether two project_readiness lists say the same
// thing: the same queues with the same ready flag and reason, in any order
// (queues are distinct in a checked list). The tracker applies a list only
// when it differs from the last list applied (design: Billing-mode audit, Project readiness).
func SameReadiness(a, b []ReadinessEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a { // the common case: the same order
		if a[i] != b[i] {
			return sameReadinessUnordered(a, b)
		}
	}
	return true
}

func sameReadinessUnordered(a, b []ReadinessEntry) bool {
	m := make(map[string]ReadinessEntry, len(a))
	for _, e := range a {
		m[e.Queue] = e
	}
	for _, e := range b {
		if x, ok := m[e.Queue]; !ok || x != e {
			return false
		}
		delete(m, e.Queue)
	}
	return len(m) == 0
}

// Reported returns the two audited reported values of h (design: Billing-mode audit).
func (h Heartbeat) Reported() Reported {
	return Reported{BillingMode: h.BillingMode, ToolClass: h.ToolClass}
}
