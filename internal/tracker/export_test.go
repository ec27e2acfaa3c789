package tracker

import (
	"context"
	"time"
)

// Test-only views of the tracker's state.

// Flush runs one flush pass now (the loop runs one per persist interval).
func (t *Tracker) Flush(ctx context.Context) (int, error) { return t.flush(ctx) }

// RowsWritten returns how many agent rows the flush passes wrote so far.
func (t *Tracker) RowsWritten() int64 { return t.written.Load() }

// LivenessState returns the agent's state as this instance knows it, and
// whether it tracks the agent.
func (t *Tracker) LivenessState(agentID string) (string, bool) { return t.livenessState(agentID) }

// Owns reports whether this instance owns the agent's deadline, and
// whether it tracks the agent.
func (t *Tracker) Owns(agentID string) (owned, tracked bool) { return t.owns(agentID) }

// AuditsWaiting returns how many reported changes wait for the next group
// commit.
func (t *Tracker) AuditsWaiting() int { return t.audits.waiting() }

// ClockOffset returns the measured offset of the database's clock.
func (t *Tracker) ClockOffset() time.Duration { return t.clk.Offset() }

// TransitionsIdle reports whether the transition writer has nothing queued
// and is not running.
func (t *Tracker) TransitionsIdle() bool {
	t.urgentMu.Lock()
	defer t.urgentMu.Unlock()
	return !t.urgentRun && len(t.urgent) == 0
}

// Instance returns the id naming this process in liveness claims.
func (t *Tracker) Instance() string { return t.instance }

// CheckLeases runs one pass of the owner-lease loop now (renew, take
// expired leases over) and returns how many agents it took over.
func (t *Tracker) CheckLeases(ctx context.Context) (int, error) { return t.checkLeases(ctx) }

// FlushAgents runs one flush pass of the given agents only.
func (t *Tracker) FlushAgents(ctx context.Context, ids ...string) (int, error) {
	var es []*lvEntry
	for _, id := range ids {
		if e := t.lookup(id); e != nil {
			es = append(es, e)
		}
	}
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	return t.flushLocked(ctx, es)
}
