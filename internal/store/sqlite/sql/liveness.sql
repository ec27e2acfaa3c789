-- name: ListLiveAgents :many
-- Online or degraded agents after after_id in id order; a negative limit
-- means none.
SELECT * FROM agents WHERE state IN ('online', 'degraded') AND id > sqlc.arg(after_id)
ORDER BY id LIMIT sqlc.arg(lim);

-- name: PersistHeartbeatReport :execrows
-- Monotone: an older heartbeat never overwrites a newer one.
UPDATE agents SET state = sqlc.arg(state), last_heartbeat_at = CAST(sqlc.arg(heartbeat_at) AS INTEGER),
    reported_runtime_version = sqlc.narg(runtime_version), reported_state = sqlc.narg(reported_state)
WHERE id = sqlc.arg(id) AND (last_heartbeat_at IS NULL OR last_heartbeat_at <= sqlc.arg(heartbeat_at));

-- name: PersistHeartbeatState :execrows
UPDATE agents SET state = sqlc.arg(state), last_heartbeat_at = CAST(sqlc.arg(heartbeat_at) AS INTEGER)
WHERE id = sqlc.arg(id) AND (last_heartbeat_at IS NULL OR last_heartbeat_at <= sqlc.arg(heartbeat_at));

-- name: ReportedPair :one
SELECT reported_billing_mode, reported_tool_class FROM agents WHERE id = ?;

-- name: ApplyReportedChange :exec
UPDATE agents SET reported_billing_mode = sqlc.narg(billing_mode), reported_tool_class = sqlc.narg(tool_class),
    reported_runtime_version = sqlc.narg(runtime_version), reported_state = sqlc.narg(reported_state),
    state = sqlc.arg(state),
    last_heartbeat_at = max(coalesce(last_heartbeat_at, CAST(sqlc.arg(heartbeat_at) AS INTEGER)), sqlc.arg(heartbeat_at))
WHERE id = sqlc.arg(id);

-- name: ApplyProjectReadiness :execrows
UPDATE agents SET project_readiness = sqlc.narg(readiness), updated_at = sqlc.arg(now) WHERE id = sqlc.arg(id);

-- name: MarkFirstStream :execrows
-- One conditional UPDATE: of racing callers exactly one changes the row.
UPDATE agents SET first_stream_at = CAST(sqlc.arg(now) AS INTEGER) WHERE id = sqlc.arg(id) AND first_stream_at IS NULL;
