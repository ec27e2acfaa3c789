-- name: AuditTail :one
SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1;

-- name: InsertAudit :exec
INSERT INTO audit (seq, at, actor, action, agent_id, decision, data, prev_hash, hash)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: ListAudit :many
-- An empty agent lists every entry; a negative limit means none.
SELECT * FROM audit
WHERE seq > sqlc.arg(after_seq) AND (sqlc.arg(agent_id) = '' OR agent_id = sqlc.arg(agent_id))
ORDER BY seq LIMIT sqlc.arg(lim);
