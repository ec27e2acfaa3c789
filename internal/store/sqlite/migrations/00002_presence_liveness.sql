-- Presence in/out (design: Presence columns, Digest on return, Sweep) and heartbeat liveness
-- (design: Liveness states) columns, SQLite dialect. Times are INTEGER unix
-- microseconds (UTC); JSON documents are TEXT stored byte for byte. The
-- defaults keep an agent with no shift and no override exactly as if
-- presence did not exist, and one that never sent a heartbeat "unknown".

-- +goose Up
ALTER TABLE agents ADD COLUMN shift TEXT;
ALTER TABLE agents ADD COLUMN presence_override TEXT CHECK (presence_override IN ('in', 'out'));
ALTER TABLE agents ADD COLUMN override_until INTEGER;
ALTER TABLE agents ADD COLUMN override_set_at INTEGER;
ALTER TABLE agents ADD COLUMN override_by TEXT;
ALTER TABLE agents ADD COLUMN presence_seen TEXT NOT NULL DEFAULT 'in' CHECK (presence_seen IN ('in', 'out'));
ALTER TABLE agents ADD COLUMN presence_changed_at INTEGER;
ALTER TABLE agents ADD COLUMN presence_changed_by TEXT;

ALTER TABLE agents ADD COLUMN state TEXT NOT NULL DEFAULT 'unknown'
    CHECK (state IN ('unknown', 'online', 'degraded', 'offline'));
ALTER TABLE agents ADD COLUMN last_heartbeat_at INTEGER;
ALTER TABLE agents ADD COLUMN reported_billing_mode TEXT;
ALTER TABLE agents ADD COLUMN reported_tool_class TEXT;
ALTER TABLE agents ADD COLUMN reported_runtime_version TEXT;
ALTER TABLE agents ADD COLUMN reported_state TEXT;
ALTER TABLE agents ADD COLUMN project_readiness TEXT;

-- The evaluator's "changed since" query (ListAgentsChangedSince).
CREATE INDEX agents_updated ON agents (updated_at);
-- The tracker's start rule (ListLiveAgents): only the few live rows.
CREATE INDEX agents_live ON agents (id) WHERE state IN ('online', 'degraded');

-- next_ring_at: when a pending todo is next due for a sweep ring,
-- domain.NextRingAt(ring_attempts, coalesce(last_ringed_at, created_at));
-- NULL once the ring budget (domain.MaxRings = 5) is spent.
ALTER TABLE todos ADD COLUMN next_ring_at INTEGER;
-- Backfill every todo that can still be (or become again) pending, with
-- the delays of domain.SweepDelays at the time of this migration.
UPDATE todos SET next_ring_at = coalesce(last_ringed_at, created_at) + CASE ring_attempts
        WHEN 0 THEN 300000000
        WHEN 1 THEN 300000000
        WHEN 2 THEN 1200000000
        WHEN 3 THEN 3600000000
        WHEN 4 THEN 21600000000
    END
WHERE state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL);
-- The sweep (SweepRing): per receiver, its due todos by next_ring_at. The
-- sweep repeats this predicate verbatim so the planner uses the index.
CREATE INDEX todos_sweep ON todos (agent_id, next_ring_at)
    WHERE state = 'pending' AND push_eligible AND ring_attempts < 5;

-- +goose Down
DROP INDEX todos_sweep;
ALTER TABLE todos DROP COLUMN next_ring_at;
DROP INDEX agents_live;
DROP INDEX agents_updated;
ALTER TABLE agents DROP COLUMN project_readiness;
ALTER TABLE agents DROP COLUMN reported_state;
ALTER TABLE agents DROP COLUMN reported_runtime_version;
ALTER TABLE agents DROP COLUMN reported_tool_class;
ALTER TABLE agents DROP COLUMN reported_billing_mode;
ALTER TABLE agents DROP COLUMN last_heartbeat_at;
ALTER TABLE agents DROP COLUMN state;
ALTER TABLE agents DROP COLUMN presence_changed_by;
ALTER TABLE agents DROP COLUMN presence_changed_at;
ALTER TABLE agents DROP COLUMN presence_seen;
ALTER TABLE agents DROP COLUMN override_by;
ALTER TABLE agents DROP COLUMN override_set_at;
ALTER TABLE agents DROP COLUMN override_until;
ALTER TABLE agents DROP COLUMN presence_override;
ALTER TABLE agents DROP COLUMN shift;
