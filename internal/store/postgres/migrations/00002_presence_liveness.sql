-- Presence in/out (design: Presence columns, Digest on return, Sweep) and heartbeat liveness
-- (design: Liveness states) columns, PostgreSQL dialect. Times are timestamptz (us);
-- JSON documents are text stored byte for byte. The defaults keep an agent
-- with no shift and no override exactly as if presence did not exist, and
-- one that never sent a heartbeat "unknown".

-- +goose Up
ALTER TABLE agents
    ADD COLUMN shift                    text,
    ADD COLUMN presence_override        text CHECK (presence_override IN ('in', 'out')),
    ADD COLUMN override_until           timestamptz,
    ADD COLUMN override_set_at          timestamptz,
    ADD COLUMN override_by              text,
    ADD COLUMN presence_seen            text NOT NULL DEFAULT 'in' CHECK (presence_seen IN ('in', 'out')),
    ADD COLUMN presence_changed_at      timestamptz,
    ADD COLUMN presence_changed_by      text,
    ADD COLUMN state                    text NOT NULL DEFAULT 'unknown'
        CHECK (state IN ('unknown', 'online', 'degraded', 'offline')),
    ADD COLUMN last_heartbeat_at        timestamptz,
    ADD COLUMN reported_billing_mode    text,
    ADD COLUMN reported_tool_class      text,
    ADD COLUMN reported_runtime_version text,
    ADD COLUMN reported_state           text,
    ADD COLUMN project_readiness        text;

-- The evaluator's "changed since" query (ListAgentsChangedSince).
CREATE INDEX agents_updated ON agents (updated_at);
-- The tracker's start rule (ListLiveAgents): only the few live rows.
CREATE INDEX agents_live ON agents (id) WHERE state IN ('online', 'degraded');

-- next_ring_at: when a pending todo is next due for a sweep ring,
-- domain.NextRingAt(ring_attempts, coalesce(last_ringed_at, created_at));
-- NULL once the ring budget (domain.MaxRings = 5) is spent.
ALTER TABLE todos ADD COLUMN next_ring_at timestamptz;
-- Backfill every todo that can still be (or become again) pending, with
-- the delays of domain.SweepDelays at the time of this migration.
UPDATE todos SET next_ring_at = coalesce(last_ringed_at, created_at) + CASE ring_attempts
        WHEN 0 THEN interval '5 minutes'
        WHEN 1 THEN interval '5 minutes'
        WHEN 2 THEN interval '20 minutes'
        WHEN 3 THEN interval '1 hour'
        WHEN 4 THEN interval '6 hours'
    END
WHERE state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL);
-- The sweep (SweepRing): per receiver, an index range scan over its due
-- todos by next_ring_at. The sweep repeats this predicate verbatim.
CREATE INDEX todos_sweep ON todos (agent_id, next_ring_at)
    WHERE state = 'pending' AND push_eligible AND ring_attempts < 5;

-- +goose Down
DROP INDEX todos_sweep;
ALTER TABLE todos DROP COLUMN next_ring_at;
DROP INDEX agents_live;
DROP INDEX agents_updated;
ALTER TABLE agents
    DROP COLUMN project_readiness,
    DROP COLUMN reported_state,
    DROP COLUMN reported_runtime_version,
    DROP COLUMN reported_tool_class,
    DROP COLUMN reported_billing_mode,
    DROP COLUMN last_heartbeat_at,
    DROP COLUMN state,
    DROP COLUMN presence_changed_by,
    DROP COLUMN presence_changed_at,
    DROP COLUMN presence_seen,
    DROP COLUMN override_by,
    DROP COLUMN override_set_at,
    DROP COLUMN override_until,
    DROP COLUMN presence_override,
    DROP COLUMN shift;
