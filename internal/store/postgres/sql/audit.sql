-- name: AuditTail :one
SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1;

-- name: InsertAudit :exec
INSERT INTO audit (seq, at, actor, action, agent_id, decision, data, prev_hash, hash)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: ListAudit :many
-- An empty agent lists every entry; a NULL limit means none.
SELECT * FROM audit
WHERE seq > sqlc.arg(after_seq) AND (sqlc.arg(agent_id)::text = '' OR agent_id = sqlc.arg(agent_id))
ORDER BY seq LIMIT sqlc.narg(lim)::bigint;
