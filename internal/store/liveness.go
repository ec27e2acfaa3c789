package store

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// LivenessStore is the part of the store port that serves heartbeat presence
// (design: Store contract, Billing-mode audit, Flush loop, Start rule, Project readiness). Both adapters
// implement it and the contract suite (storetest.RunLiveness) covers it.
//
// The liveness columns of an agent row (domain.Agent.Liveness) are written
// only through these methods, and only ApplyReportedChange writes the two
// audited columns reported_billing_mode and reported_tool_class.
type LivenessStore interface {
	// ListLiveAgents returns the agents whose stored state is online or
	// degraded (revoked and inactive ones included), ascending by id after
	// AfterID, at most Limit (<= 0: all): the tracker's start rule
	// (design: Start rule).
	ListLiveAgents(ctx context.Context, p ListLiveAgentsParams) ([]domain.Agent, error)

	// PersistHeartbeats writes the rows in ONE transaction, in ascending
	// agent id order whatever the order of p.Rows (so concurrent flushes of
	// several instances cannot deadlock), each with the monotone condition
	//
	//	… WHERE id = $id AND (last_heartbeat_at IS NULL OR last_heartbeat_at <= $hb)
	//
	// so a fresher heartbeat stored by another instance is never overwritten
	// (design: Flush loop). It writes state and last_heartbeat_at, and, when
	// HasReport, reported_runtime_version and reported_state. It never
	// writes reported_billing_mode or reported_tool_class and never bumps
	// updated_at (a heartbeat is not a change of the agent's
	// configuration). It returns how many rows it wrote; rows skipped by the
	// condition and unknown ids are not errors.
	PersistHeartbeats(ctx context.Context, p PersistHeartbeatsParams) (written int, err error)

	// ApplyReportedChange is the reported-change audit path
	// (design: Billing-mode audit), one transaction: lock the agent row (PostgreSQL
	// SELECT … FOR UPDATE; SQLite: the write transaction is already
	// exclusive), compare the stored reported_billing_mode and
	// reported_tool_class with p.BillingMode and p.ToolClass again, and
	// when they differ write both, the reported state (runtime version,
	// reported_state, state) and last_heartbeat_at (only moving forward),
	// and append ONE audit entry p.Audit(old). Equal after the lock: writes
	// nothing and returns false. It does not bump updated_at.
	// Errors: ErrNotFound for an unknown agent.
	ApplyReportedChange(ctx context.Context, p ApplyReportedChangeParams) (wrote bool, err error)

	// ApplyReportedChanges runs ApplyReportedChange for every element of ps
	// in ONE transaction (a group commit: the heartbeats of many agents
	// reporting at once — e.g. the first reports after a restart — share
	// one row-lock pass in ascending agent id order and one acquisition of
	// the audit chain's lock instead of queueing one by one behind it).
	// Each element is compared again under the lock and audited on its
	// own, in the order of ps; wrote[i] says whether ps[i] wrote. At most
	// one element per agent id. An unknown agent id is wrote[i] = false
	// and not an error (the agent was deleted meanwhile); any other error
	// fails the whole batch and writes nothing.
	ApplyReportedChanges(ctx context.Context, ps []ApplyReportedChangeParams) (wrote []bool, err error)

	// DBNow returns the database's clock (PostgreSQL clock_timestamp(); for
	// SQLite, which runs inside the process, the operating system's clock).
	// The liveness tracker compares and stores cross-instance times on this
	// clock, never on one instance's wall clock (design: Database clock).
	DBNow(ctx context.Context) (time.Time, error)

	// ApplyProjectReadiness writes project_readiness (a JSON array, stored
	// byte for byte) and bumps updated_at to p.Now, in its own transaction,
	// so the presence caches of every instance pick the change up
	// (design: Project readiness). Errors: ErrNotFound for an unknown
	// agent.
	ApplyProjectReadiness(ctx context.Context, p ApplyProjectReadinessParams) error
}

// ListLiveAgentsParams pages ListLiveAgents.
type ListLiveAgentsParams struct {
	AfterID string // "" = from the first id
	Limit   int    // <= 0 = no limit
}

// PersistHeartbeatsParams is one flush pass of the tracker.
type PersistHeartbeatsParams struct {
	Rows []HeartbeatRow
}

// HeartbeatRow is what one flush writes for one agent.
type HeartbeatRow struct {
	AgentID string
	// State is the liveness state to store: online, degraded or offline.
	State string
	// LastHeartbeatAt is the server-clock time of the last heartbeat (for an
	// offline write: the entry's last heartbeat; design: Flush loop).
	LastHeartbeatAt time.Time
	// HasReport says whether RuntimeVersion and ReportedState are written;
	// false keeps the stored ones (an agent loaded at start that went
	// offline without a heartbeat here).
	HasReport bool
	// RuntimeVersion is reported_runtime_version; nil = not reported.
	RuntimeVersion *string
	// ReportedState is the last full heartbeat body (canonical JSON).
	ReportedState []byte
}

// ReportedPair is the pair of audited reported values (nil = not reported).
type ReportedPair struct {
	BillingMode *string
	ToolClass   *string
}

// Equal reports whether r and o hold the same values (nil only equals nil).
func (r ReportedPair) Equal(o ReportedPair) bool {
	return SamePtr(r.BillingMode, o.BillingMode) && SamePtr(r.ToolClass, o.ToolClass)
}

// SamePtr reports whether a and b hold the same string (nil only equals
// nil).
func SamePtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ApplyReportedChangeParams is one reported-change unit of work.
type ApplyReportedChangeParams struct {
	AgentID string
	// BillingMode and ToolClass are the newly reported values (nil = not
	// reported).
	BillingMode *string
	ToolClass   *string
	// RuntimeVersion, ReportedState and State are the rest of the reported
	// state written with them.
	RuntimeVersion *string
	ReportedState  []byte
	State          string
	// HeartbeatAt is the server-clock time of the heartbeat: the audit
	// entry's time and the candidate last_heartbeat_at.
	HeartbeatAt time.Time
	// Audit builds the one audit entry from the values read under the lock
	// (called at most once, inside the transaction; it must not block).
	Audit func(old ReportedPair) domain.AuditRecord
}

// Reported is the pair p reports. The change is written and audited only
// when it differs from the stored pair (design: Billing-mode audit).
func (p ApplyReportedChangeParams) Reported() ReportedPair {
	return ReportedPair{BillingMode: p.BillingMode, ToolClass: p.ToolClass}
}

// ApplyProjectReadinessParams writes an agent's project readiness.
type ApplyProjectReadinessParams struct {
	AgentID string
	// Readiness is the JSON array [{queue, ready, reason?}] as applied.
	Readiness []byte
	Now       time.Time
}
