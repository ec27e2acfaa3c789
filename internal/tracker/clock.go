package tracker

import "time"

// The database's clock (design: Database clock: cross-instance time
// comparisons use the database's clock or owner leases, never one
// instance's wall clock). Every time the tracker stores (last_heartbeat_at),
// broadcasts (claims) or compares with what another instance stored is on
// the process's database clock (internal/dbclock, Options.Clock; the
// Service measures its offset). Deadlines still run on this process's
// timers (durations do not depend on any wall clock), so a clock that is
// 20 s ahead or behind on one instance moves nothing.

// extend is stall.Detector.Extend for times on the database's clock: the
// deadline of a wait of d from base, restarted by a stall that ended after
// base. The detector runs on the process's clock.
func (t *Tracker) extend(base time.Time, d time.Duration) time.Time {
	if t.stalls == nil {
		return base.Add(d)
	}
	off := t.clk.Offset()
	return t.stalls.Extend(base.Add(-off), d).Add(off)
}
