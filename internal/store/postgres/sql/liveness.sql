-- name: ListLiveAgents :many
-- Online or degraded agents after after_id in id order; a NULL limit
-- means none.
SELECT * FROM agents WHERE state IN ('online', 'degraded') AND id > sqlc.arg(after_id)
ORDER BY id LIMIT sqlc.narg(lim)::bigint;

-- name: LockReportedPair :one
SELECT reported_billing_mode, reported_tool_class FROM agents WHERE id = $1 FOR UPDATE;

-- name: ApplyReportedChange :exec
-- The heartbeat time only moves forward.
UPDATE agents SET reported_billing_mode = sqlc.narg(billing_mode), reported_tool_class = sqlc.narg(tool_class),
    reported_runtime_version = sqlc.narg(runtime_version), reported_state = sqlc.narg(reported_state),
    state = sqlc.arg(state), last_heartbeat_at = GREATEST(last_heartbeat_at, sqlc.arg(heartbeat_at)::timestamptz)
WHERE id = sqlc.arg(id);

-- name: DBNow :one
-- The real time, not the transaction's start.
SELECT clock_timestamp()::timestamptz;

-- name: ApplyProjectReadiness :execrows
UPDATE agents SET project_readiness = sqlc.narg(readiness), updated_at = sqlc.arg(now) WHERE id = sqlc.arg(id);

-- name: MarkFirstStream :execrows
-- One conditional UPDATE: of racing callers (on any instance) exactly one
-- changes the row.
UPDATE agents SET first_stream_at = sqlc.arg(now)::timestamptz WHERE id = sqlc.arg(id) AND first_stream_at IS NULL;
