-- name: InsertAgent :exec
-- The presence and liveness columns of a new agent take their defaults: no
-- shift, no override, seen "in", state "unknown".
INSERT INTO agents (id, handle, owner_id, name, active, revoked_at, queues, verbs,
    billing_mode, billing_modes, tool_class, created_at, updated_at, handoff)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14);

-- name: InsertCredential :exec
INSERT INTO credentials (id, agent_id, hash, created_at) VALUES ($1, $2, $3, $4);

-- name: GetAgent :one
-- By id or by handle: the caller passes one and leaves the other empty (no
-- agent has an empty id or handle). Each term is a unique index lookup.
SELECT * FROM agents WHERE id = sqlc.arg(id) OR handle = sqlc.arg(handle);

-- name: ListAgents :many
-- An empty owner lists every agent.
SELECT * FROM agents WHERE sqlc.arg(owner_id)::text = '' OR owner_id = sqlc.arg(owner_id) ORDER BY handle;

-- name: LockAgent :one
-- Locks the agent's row for the rest of the transaction.
SELECT revoked_at FROM agents WHERE id = $1 FOR UPDATE;

-- name: UpdateAgent :one
-- NULL arguments keep the column's value; revoking sets revoked_at and
-- active = false.
UPDATE agents SET
    name = coalesce(sqlc.narg(name), name),
    billing_mode = coalesce(sqlc.narg(billing_mode), billing_mode),
    billing_modes = coalesce(sqlc.narg(billing_modes), billing_modes),
    tool_class = coalesce(sqlc.narg(tool_class), tool_class),
    active = coalesce(sqlc.narg(active), active),
    owner_id = coalesce(sqlc.narg(owner_id), owner_id),
    revoked_at = coalesce(sqlc.narg(revoked_at), revoked_at),
    updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) RETURNING *;

-- name: MoveAgentHooks :exec
-- A hand-over moves the agent's hooks with it: a hook belongs to whoever
-- owns the agent it feeds.
UPDATE hooks SET owner_id = sqlc.arg(owner_id), updated_at = sqlc.arg(now) WHERE agent_id = sqlc.arg(agent_id);

-- name: RevokeCredentials :many
-- Every live credential of the agent; the ids revoked.
UPDATE credentials SET revoked_at = sqlc.arg(now)
WHERE agent_id = sqlc.arg(agent_id) AND revoked_at IS NULL RETURNING id;

-- name: AgentByCredentialHash :one
SELECT sqlc.embed(a), c.id AS credential_id
FROM credentials c JOIN agents a ON a.id = c.agent_id
WHERE c.hash = $1 AND c.revoked_at IS NULL;

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

-- name: ClaimTransition :execrows
-- The conditional update of presence_seen: of racing claims (on any
-- instance) one changes the row. updated_at is left alone.
-- A claim evaluated at an instant before the last claimed transition's is
-- refused: a clock a little behind another instance's cannot undo the
-- transition that instance claimed (design: Transition claim).
UPDATE agents SET presence_seen = sqlc.arg(seen), presence_changed_at = sqlc.arg(at)::timestamptz,
    presence_changed_by = sqlc.narg(by)
WHERE id = sqlc.arg(id) AND presence_seen <> sqlc.arg(seen)
    AND (presence_changed_at IS NULL OR presence_changed_at <= sqlc.arg(at)::timestamptz);

-- name: PendingDoorbellTodos :many
-- The agent's pending, push-eligible todos outside exclude_queues, and the
-- pooled ones rung at it (design: Pool routing), oldest first; a NULL
-- limit means none.
SELECT id, queue, created_at FROM todos
WHERE (agent_id = sqlc.arg(agent_id)::text OR (agent_id IS NULL AND ring_agent_id = sqlc.arg(agent_id)::text))
  AND state = 'pending' AND push_eligible
  AND queue <> ALL (sqlc.arg(exclude_queues)::text[])
ORDER BY created_at, id LIMIT sqlc.narg(lim)::bigint;

-- name: InsertTodo :one
-- ON CONFLICT repeats the todos_live_key predicate verbatim so it infers
-- that index: a live todo holding the key makes it insert nothing.
INSERT INTO todos (id, agent_id, queue, title, payload, kind, source, idempotency_key,
    push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
    ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
    finished_at, next_ring_at, pool_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
    $18, $19, $20, $21, $22, $23, $24, $25)
ON CONFLICT (agent_id, idempotency_key)
    WHERE pool_id IS NULL AND idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL))
    DO NOTHING
RETURNING *;

-- name: InsertPoolTodo :one
-- InsertTodo of a todo pushed to a pool: ON CONFLICT repeats the
-- todos_pool_key predicate verbatim (design: Pools).
INSERT INTO todos (id, agent_id, queue, title, payload, kind, source, idempotency_key,
    push_eligible, created_by, state, attempt, max_attempts, lease_expires_at, retry_at,
    ring_attempts, last_ringed_at, result, last_error, created_at, updated_at, claimed_at,
    finished_at, next_ring_at, pool_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
    $18, $19, $20, $21, $22, $23, $24, $25)
ON CONFLICT (pool_id, idempotency_key)
    WHERE pool_id IS NOT NULL AND idempotency_key <> ''
      AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL))
    DO NOTHING
RETURNING *;

-- name: LiveTodoByKey :one
SELECT * FROM todos
WHERE agent_id = sqlc.arg(agent_id)::text AND idempotency_key = sqlc.arg(idempotency_key)
  AND pool_id IS NULL AND idempotency_key <> ''
  AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));

-- name: LivePoolTodoByKey :one
SELECT * FROM todos
WHERE pool_id = sqlc.arg(pool_id)::text AND idempotency_key = sqlc.arg(idempotency_key)
  AND idempotency_key <> '' AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));

-- name: GetTodo :one
SELECT * FROM todos WHERE id = $1;

-- name: ListTodos :many
-- Empty filters match everything; a NULL limit means none. Oldest first,
-- after the todo after_id. with_pools adds the unclaimed todos of the
-- agent's pools; pool_id lists a pool's todos (design: Pools); live keeps the live ones (pending, claimed, or
-- failed with a retry scheduled: domain.Todo.Live).
SELECT * FROM todos
WHERE ((sqlc.arg(agent_id)::text = '' AND sqlc.arg(pool_id)::text = '')
       OR agent_id = sqlc.arg(agent_id)::text OR pool_id = sqlc.arg(pool_id)::text
       OR (sqlc.arg(with_pools)::boolean AND agent_id IS NULL
           AND pool_id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = sqlc.arg(agent_id)::text)))
  AND (cardinality(sqlc.arg(queues)::text[]) = 0 OR queue = ANY (sqlc.arg(queues)::text[]))
  AND (sqlc.arg(state)::text = '' OR state = sqlc.arg(state))
  AND (NOT sqlc.arg(live)::boolean OR state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL))
  AND (sqlc.arg(after_id)::text = '' OR created_at > (SELECT t.created_at FROM todos t WHERE t.id = sqlc.arg(after_id))
       OR (created_at = (SELECT t.created_at FROM todos t WHERE t.id = sqlc.arg(after_id)) AND id > sqlc.arg(after_id)))
ORDER BY created_at, id LIMIT sqlc.narg(lim)::bigint;

-- name: ClaimTodo :one
-- One conditional UPDATE, so of two racing claims the second re-checks the
-- row after the first commits and matches nothing. Claimable at now:
-- pending, or failed with a retry due; the first term is the todos_ready
-- index predicate, verbatim, so the planner uses that index. The agent's
-- own todo, or an unclaimed todo of one of its pools (design: Pools); the
-- claim takes the todo out of its pool and ends its ring.
UPDATE todos SET state = 'claimed', attempt = attempt + 1, lease_expires_at = sqlc.arg(lease_until)::timestamptz,
    retry_at = NULL, claimed_at = sqlc.arg(now)::timestamptz, updated_at = sqlc.arg(now),
    agent_id = sqlc.arg(agent_id)::text, ring_agent_id = NULL
WHERE id = sqlc.arg(id)
  AND (agent_id = sqlc.arg(agent_id)::text
       OR (agent_id IS NULL AND pool_id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = sqlc.arg(agent_id)::text)))
  AND queue = ANY (sqlc.arg(queues)::text[])
  AND ((state = 'pending' OR (state = 'failed' AND retry_at IS NOT NULL))
       AND (state = 'pending' OR retry_at <= sqlc.arg(now)))
RETURNING *;

-- name: ClaimNext :many
-- ClaimTodo of the lim oldest claimable todos of the agent or of its pools
-- in queues (the oldest lim of the index walks' first lim each: the
-- agent's, and each of its pools'), each picked with FOR UPDATE SKIP
-- LOCKED so concurrent claimers take different rows. Each walk follows
-- its index (todos_ready, todos_pool_ready) in (created_at, id) order and
-- stops after lim rows, however many todos wait. With done_id set, CompleteTodo of done_id first, in the same
-- statement (design: Complete and claim the next): the claims are made
-- only if it matched (the picks wait on done), and the completed todo
-- comes back among the rows (its id is done_id; the statement's snapshot
-- still sees it claimed, so it is never picked). The rows come back in no
-- particular order.
WITH done AS (
    UPDATE todos SET state = 'done', result = sqlc.narg(result), lease_expires_at = NULL,
        updated_at = sqlc.arg(now)::timestamptz, finished_at = sqlc.arg(now)::timestamptz
    WHERE id = sqlc.narg(done_id)::text AND agent_id = sqlc.arg(done_agent_id)::text AND state = 'claimed'
      AND lease_expires_at > sqlc.arg(now)::timestamptz
    RETURNING *
), own AS MATERIALIZED (
    SELECT t.id, t.created_at FROM todos t
    WHERE (sqlc.narg(done_id)::text IS NULL OR EXISTS (SELECT 1 FROM done))
      AND t.agent_id = sqlc.arg(agent_id)::text AND t.queue = ANY (sqlc.arg(queues)::text[])
      AND ((t.state = 'pending' OR (t.state = 'failed' AND t.retry_at IS NOT NULL))
           AND (t.state = 'pending' OR t.retry_at <= sqlc.arg(now)::timestamptz))
    ORDER BY t.created_at, t.id LIMIT sqlc.arg(lim)::int FOR UPDATE OF t SKIP LOCKED
), pooled AS MATERIALIZED (
    SELECT w.id, w.created_at FROM pool_members m CROSS JOIN LATERAL (
        SELECT p.id, p.created_at FROM todos p
        WHERE (sqlc.narg(done_id)::text IS NULL OR EXISTS (SELECT 1 FROM done))
          AND p.pool_id = m.pool_id AND p.queue = ANY (sqlc.arg(queues)::text[])
          AND p.agent_id IS NULL AND (p.state = 'pending' OR (p.state = 'failed' AND p.retry_at IS NOT NULL))
          AND (p.state = 'pending' OR p.retry_at <= sqlc.arg(now)::timestamptz)
        ORDER BY p.created_at, p.id LIMIT sqlc.arg(lim)::int FOR UPDATE OF p SKIP LOCKED) AS w
    WHERE m.agent_id = sqlc.arg(agent_id)::text
), pick AS MATERIALIZED (
    SELECT b.id FROM (SELECT * FROM own UNION ALL SELECT * FROM pooled) AS b ORDER BY b.created_at, b.id LIMIT sqlc.arg(lim)::int
), claimed AS (
    UPDATE todos SET state = 'claimed', attempt = attempt + 1, lease_expires_at = sqlc.arg(lease_until)::timestamptz,
        retry_at = NULL, claimed_at = sqlc.arg(now)::timestamptz, updated_at = sqlc.arg(now)::timestamptz,
        agent_id = sqlc.arg(agent_id)::text, ring_agent_id = NULL
    WHERE id IN (SELECT pick.id FROM pick)
    RETURNING *
)
SELECT * FROM done UNION ALL SELECT * FROM claimed;

-- name: TodoOfAgent :one
-- Whether the todo is the agent's or one of its pools' (and, unless
-- queues is NULL, in one of queues).
SELECT EXISTS (SELECT 1 FROM todos
    WHERE id = sqlc.arg(id)
      AND (agent_id = sqlc.arg(agent_id)::text
           OR pool_id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = sqlc.arg(agent_id)::text))
      AND (sqlc.narg(queues)::text[] IS NULL OR queue = ANY (sqlc.narg(queues)::text[])));

-- name: RenewLease :one
-- Held: claimed by the agent, lease not expired at now.
UPDATE todos SET lease_expires_at = sqlc.arg(lease_until)::timestamptz, updated_at = sqlc.arg(now)::timestamptz
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id)::text AND state = 'claimed' AND lease_expires_at > sqlc.arg(now)
RETURNING *;

-- name: CompleteTodo :one
UPDATE todos SET state = 'done', result = sqlc.narg(result), lease_expires_at = NULL,
    updated_at = sqlc.arg(now)::timestamptz, finished_at = sqlc.arg(now)::timestamptz
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id)::text AND state = 'claimed' AND lease_expires_at > sqlc.arg(now)::timestamptz
RETURNING *;

-- name: LockHeldAttempts :one
SELECT attempt, max_attempts FROM todos
WHERE id = sqlc.arg(id) AND agent_id = sqlc.arg(agent_id)::text AND state = 'claimed'
  AND lease_expires_at > sqlc.arg(now)::timestamptz
FOR UPDATE;

-- name: FailTodo :one
-- A pooled todo that will be retried goes back to its pool (design: Pools).
UPDATE todos SET state = 'failed', last_error = sqlc.arg(reason), retry_at = sqlc.narg(retry_at),
    lease_expires_at = NULL, updated_at = sqlc.arg(now), finished_at = sqlc.narg(finished_at),
    agent_id = CASE WHEN pool_id IS NOT NULL AND sqlc.narg(retry_at)::timestamptz IS NOT NULL THEN NULL ELSE agent_id END
WHERE id = sqlc.arg(id) RETURNING *;

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

-- name: InsertHook :exec
INSERT INTO hooks (id, owner_id, agent_id, kind, queue, filter, title_template, kind_label, secret, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11);

-- name: GetHook :one
SELECT * FROM hooks WHERE id = $1;

-- name: ListHooks :many
-- Empty filters match everything; oldest first.
SELECT * FROM hooks
WHERE (sqlc.arg(owner_id)::text = '' OR owner_id = sqlc.arg(owner_id))
  AND (sqlc.arg(agent_id)::text = '' OR agent_id = sqlc.arg(agent_id))
ORDER BY created_at, id;

-- name: RotateHookSecret :one
UPDATE hooks SET secret = sqlc.arg(secret), updated_at = sqlc.arg(now) WHERE id = sqlc.arg(id) RETURNING *;

-- name: DeleteHook :execrows
DELETE FROM hooks WHERE id = $1;

-- name: InsertDelivery :one
-- A keyed delivery inserts once: ON CONFLICT makes a racing redelivery
-- wait for the first one and then insert nothing (no row returned).
INSERT INTO hook_deliveries (id, hook_id, key, event, action, outcome, reason, todo_id, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, '', $8)
ON CONFLICT (hook_id, key) WHERE key <> '' DO NOTHING
RETURNING id;

-- name: DeliveryByKey :one
SELECT * FROM hook_deliveries WHERE hook_id = $1 AND key = $2;

-- name: SetDeliveryTodo :exec
UPDATE hook_deliveries SET todo_id = $2 WHERE id = $1;

-- name: ListDeliveries :many
-- Newest first.
SELECT * FROM hook_deliveries WHERE hook_id = $1 ORDER BY received_at DESC, id DESC LIMIT $2;

-- name: PruneDeliveries :execrows
-- One batch of the delivery log's pruning: at most lim deliveries received
-- before the cutoff, found through hook_deliveries_age. = ANY (ARRAY(...))
-- deletes them by primary key; IN (SELECT ...) let the planner hash-join a
-- scan of the whole table.
DELETE FROM hook_deliveries WHERE id = ANY (ARRAY(
    SELECT old.id FROM hook_deliveries AS old WHERE old.received_at < sqlc.arg(before) LIMIT sqlc.arg(lim)
));

-- name: AdvisoryXactLock :exec
-- Holds the advisory lock key until the transaction ends.
SELECT pg_advisory_xact_lock($1);

-- name: AnyPerson :one
SELECT EXISTS (SELECT 1 FROM persons);

-- name: InsertPerson :exec
INSERT INTO persons (id, name, admin, created_at, updated_at) VALUES ($1, $2, $3, $4, $4);

-- name: InsertToken :exec
INSERT INTO person_tokens (id, person_id, name, hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6);

-- name: GetPerson :one
SELECT * FROM persons WHERE id = $1;

-- name: ListPersons :many
SELECT * FROM persons ORDER BY created_at, id;

-- name: CountOtherActiveAdmins :one
SELECT count(*) FROM persons WHERE admin AND deactivated_at IS NULL AND id <> $1;

-- name: UpdatePerson :one
-- A NULL name keeps the name.
UPDATE persons SET name = coalesce(sqlc.narg(name), name), admin = sqlc.arg(admin),
    deactivated_at = sqlc.narg(deactivated_at), updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) RETURNING *;

-- name: EndPersonSessions :exec
UPDATE console_sessions SET ended_at = sqlc.arg(now)::timestamptz WHERE person_id = sqlc.arg(person_id) AND ended_at IS NULL;

-- name: ListTokens :many
-- The live tokens of the person.
SELECT * FROM person_tokens WHERE person_id = $1 AND revoked_at IS NULL ORDER BY created_at, id;

-- name: RevokeToken :one
UPDATE person_tokens SET revoked_at = sqlc.arg(now)::timestamptz
WHERE id = sqlc.arg(id) AND person_id = sqlc.arg(person_id) AND revoked_at IS NULL RETURNING *;

-- name: EndTokenSessions :exec
UPDATE console_sessions SET ended_at = sqlc.arg(now)::timestamptz WHERE token_id = sqlc.arg(token_id) AND ended_at IS NULL;

-- name: TokenWithPerson :one
-- By hash or by id: the caller passes one and leaves the other empty. Each
-- term is a unique index lookup.
SELECT sqlc.embed(t), sqlc.embed(p) FROM person_tokens t JOIN persons p ON p.id = t.person_id
WHERE t.hash = sqlc.arg(hash) OR t.id = sqlc.arg(id);

-- name: TouchToken :exec
-- At most one write per token per interval: only when the last use is
-- older than not_after.
UPDATE person_tokens SET last_used_at = sqlc.arg(at)::timestamptz
WHERE id = sqlc.arg(id) AND (last_used_at IS NULL OR last_used_at <= sqlc.arg(not_after)::timestamptz);

-- name: InsertConsoleSession :exec
INSERT INTO console_sessions (id, person_id, token_id, created_at, expires_at) VALUES ($1, $2, $3, $4, $5);

-- name: ConsoleSessionByID :one
SELECT sqlc.embed(s), sqlc.embed(t), sqlc.embed(p)
FROM console_sessions s JOIN person_tokens t ON t.id = s.token_id JOIN persons p ON p.id = s.person_id
WHERE s.id = $1;

-- name: EndConsoleSession :exec
UPDATE console_sessions SET ended_at = sqlc.arg(at)::timestamptz WHERE id = sqlc.arg(id) AND ended_at IS NULL;

-- name: LiveCredentials :many
-- The ids among ids of live credentials of active, unrevoked agents.
SELECT c.id FROM credentials c JOIN agents a ON a.id = c.agent_id
WHERE c.id = ANY (sqlc.arg(ids)::text[]) AND c.revoked_at IS NULL AND a.revoked_at IS NULL AND a.active;

-- intake hardening: shared failure windows (design: Limits shared by instances)

-- name: CountFailures :many
-- One failure of each key at now, in one statement: a key without a row, or
-- whose window started at or before expired (now minus the window), starts
-- a window at now with 1; any other adds 1 (capped, so a flood cannot
-- overflow). Returns each key's window after the count.
INSERT INTO rate_windows AS w (key, window_start, count)
SELECT k, sqlc.arg(now)::timestamptz, 1 FROM unnest(sqlc.arg(keys)::text[]) AS k
ON CONFLICT (key) DO UPDATE SET
    window_start = CASE WHEN w.window_start <= sqlc.arg(expired)::timestamptz THEN excluded.window_start ELSE w.window_start END,
    count = CASE WHEN w.window_start <= sqlc.arg(expired)::timestamptz THEN 1 ELSE LEAST(w.count + 1, 1000000000) END
RETURNING w.key, w.window_start, w.count;

-- name: PruneRateWindows :execrows
-- Windows that started before the cutoff are over: a failure there starts a
-- new one anyway.
DELETE FROM rate_windows WHERE window_start < sqlc.arg(before)::timestamptz;

-- intake hardening: hook secrets sealed at rest (design: Hook secrets sealed at rest)

-- name: ResealHookSecret :execrows
-- Only while the secret is still the one read: a rotation or another
-- instance's reseal in between wins.
UPDATE hooks SET secret = sqlc.arg(secret) WHERE id = sqlc.arg(id) AND secret = sqlc.arg(old);

-- failed-auth limit: could this hash authenticate
-- name: CredentialMayAuthenticate :one
-- Whether an unrevoked credential has the hash and its agent is not revoked
-- (an inactive agent is the handler's to refuse). One probe of the unique
-- hash index; no row is returned.
SELECT EXISTS (SELECT 1 FROM credentials c JOIN agents a ON a.id = c.agent_id
WHERE c.hash = $1 AND c.revoked_at IS NULL AND a.revoked_at IS NULL) AS ok;

-- name: TokenMayAuthenticate :one
-- Whether an unrevoked token unexpired at now has the hash and its person is
-- active. One probe of the unique hash index; no row is returned.
SELECT EXISTS (SELECT 1 FROM person_tokens t JOIN persons p ON p.id = t.person_id
WHERE t.hash = sqlc.arg(hash) AND t.revoked_at IS NULL
  AND (t.expires_at IS NULL OR t.expires_at > sqlc.arg(now)::timestamptz)
  AND p.deactivated_at IS NULL) AS ok;

-- Pools (design: Pools).

-- name: InsertPool :exec
INSERT INTO pools (id, owner_id, name, created_at) VALUES ($1, $2, $3, $4);

-- name: InsertPoolQueue :exec
INSERT INTO pool_queues (pool_id, queue) VALUES ($1, $2);

-- name: InsertPoolMember :execrows
-- An agent of another person than the pool's owner joins through that
-- owner's grant (design: Pool grants): granted_to is the pool's owner, and
-- the foreign key to pool_grants refuses it without the grant (its check
-- locks the grant row, so a revocation waits for this transaction). No
-- row: the agent or the pool is unknown.
INSERT INTO pool_members (pool_id, agent_id, granted_to)
SELECT p.id, a.id, CASE WHEN a.owner_id = p.owner_id THEN NULL ELSE p.owner_id END
FROM pools p JOIN agents a ON a.id = sqlc.arg(agent_id)::text
WHERE p.id = sqlc.arg(pool_id)::text;

-- name: GetPool :one
-- By id, or (id empty) by owner and name.
SELECT * FROM pools
WHERE (sqlc.arg(id)::text <> '' AND id = sqlc.arg(id)::text)
   OR (sqlc.arg(id)::text = '' AND owner_id = sqlc.arg(owner_id)::text AND name = sqlc.arg(name)::text);

-- name: ListPools :many
-- Empty filters match everything; by owner, then name.
SELECT * FROM pools
WHERE (sqlc.arg(owner_id)::text = '' OR owner_id = sqlc.arg(owner_id)::text)
  AND (sqlc.arg(member_id)::text = '' OR id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = sqlc.arg(member_id)::text))
ORDER BY owner_id, name, id;

-- name: ListPoolsOfMembers :many
-- The pools with a member among member_ids, by owner, then name: one read
-- for all of a sweep's receivers (design: Pool routing).
SELECT * FROM pools
WHERE id IN (SELECT m.pool_id FROM pool_members m WHERE m.agent_id = ANY (sqlc.arg(member_ids)::text[]))
ORDER BY owner_id, name, id;

-- name: PoolPartsOf :many
-- The queues (part 'queue') and members (part 'member', with last_rung_at)
-- of the pool GetPool reads with the same arguments, by id or by owner and
-- name: with GetPool, one round trip reads a whole pool.
SELECT 'member'::text AS part, m.agent_id AS name, m.last_rung_at
FROM pool_members m JOIN pools p ON p.id = m.pool_id
WHERE (sqlc.arg(id)::text <> '' AND p.id = sqlc.arg(id)::text)
   OR (sqlc.arg(id)::text = '' AND p.owner_id = sqlc.arg(owner_id)::text AND p.name = sqlc.arg(name)::text)
UNION ALL
SELECT 'queue'::text, q.queue, NULL::timestamptz
FROM pool_queues q JOIN pools p ON p.id = q.pool_id
WHERE (sqlc.arg(id)::text <> '' AND p.id = sqlc.arg(id)::text)
   OR (sqlc.arg(id)::text = '' AND p.owner_id = sqlc.arg(owner_id)::text AND p.name = sqlc.arg(name)::text)
ORDER BY part, name;

-- name: LockPool :one
-- Locks the pool row: a push racing the delete (whose foreign key check
-- holds a key-share lock on it) has committed or aborted once this returns.
SELECT id FROM pools WHERE id = sqlc.arg(id)::text FOR UPDATE;

-- name: CountPoolLiveTodos :one
-- The pool's live todos (pending, claimed, or waiting for a retry); after
-- LockPool, in a statement of its own, so its snapshot is taken after the
-- lock and sees a push that committed while the lock was awaited.
SELECT count(*) FROM todos
WHERE pool_id = sqlc.arg(id)::text
  AND (state IN ('pending', 'claimed') OR (state = 'failed' AND retry_at IS NOT NULL));

-- name: DeletePool :execrows
DELETE FROM pools WHERE id = $1;

-- name: ReleaseRing :execrows
-- Ends the ring of a pooled todo while it is still with the agent (design: Pool routing).
UPDATE todos SET ring_agent_id = NULL
WHERE id = sqlc.arg(id) AND ring_agent_id = sqlc.arg(agent_id)::text;

-- Pool grants (design: Pool grants).

-- name: InsertPoolGrant :execrows
-- No row: the agent has granted the person already.
INSERT INTO pool_grants (agent_id, person_id, granted_by, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (agent_id, person_id) DO NOTHING;

-- name: GetPoolGrant :one
SELECT * FROM pool_grants WHERE agent_id = $1 AND person_id = $2;

-- name: LockPoolGrant :one
-- The grant, locked: a member joining through it (whose foreign key check
-- holds a key-share lock) commits first, so what follows sees it.
SELECT * FROM pool_grants WHERE agent_id = $1 AND person_id = $2 FOR UPDATE;

-- name: ListPoolGrants :many
-- Empty filters match everything; by agent, then creation.
SELECT * FROM pool_grants
WHERE (sqlc.arg(agent_id)::text = '' OR agent_id = sqlc.arg(agent_id)::text)
  AND (sqlc.arg(person_id)::text = '' OR person_id = sqlc.arg(person_id)::text)
ORDER BY agent_id, created_at, person_id;

-- name: DeletePoolMember :execrows
DELETE FROM pool_members WHERE pool_id = sqlc.arg(pool_id)::text AND agent_id = sqlc.arg(agent_id)::text;

-- name: UnringPoolMember :many
-- Ends the rings at the agent of the pool's todos (pending, unclaimed):
-- they are held.
UPDATE todos SET ring_agent_id = NULL
WHERE pool_id = sqlc.arg(pool_id)::text AND ring_agent_id = sqlc.arg(agent_id)::text AND agent_id IS NULL
RETURNING id;

-- name: GrantedPools :many
-- The pools the agent joined through its grant to the person.
SELECT pool_id FROM pool_members WHERE agent_id = sqlc.arg(agent_id)::text AND granted_to = sqlc.arg(person_id)::text ORDER BY pool_id;

-- name: UnringGranted :many
-- Ends the rings at the agent of the pooled todos of the pools it joined
-- through its grant to the person (the todos are held).
UPDATE todos SET ring_agent_id = NULL
WHERE ring_agent_id = sqlc.arg(agent_id)::text AND agent_id IS NULL
  AND pool_id IN (SELECT m.pool_id FROM pool_members m
                  WHERE m.agent_id = sqlc.arg(agent_id)::text AND m.granted_to = sqlc.arg(person_id)::text)
RETURNING id;

-- name: DeletePoolGrant :execrows
-- Deletes the agent's memberships through the grant with it (ON DELETE CASCADE).
DELETE FROM pool_grants WHERE agent_id = $1 AND person_id = $2;

-- name: GrantPoolsOnHandOver :exec
-- A hand-over to owner_id (design: Pool grants): the agent stays in the
-- pools of other persons it was in as their own, through a grant to each
-- pool's owner made by the person handing it over.
INSERT INTO pool_grants (agent_id, person_id, granted_by, created_at)
SELECT DISTINCT m.agent_id, p.owner_id, sqlc.arg(granted_by)::text, sqlc.arg(at)::timestamptz
FROM pool_members m JOIN pools p ON p.id = m.pool_id
WHERE m.agent_id = sqlc.arg(agent_id)::text AND m.granted_to IS NULL AND p.owner_id <> sqlc.arg(owner_id)::text
ON CONFLICT (agent_id, person_id) DO NOTHING;

-- name: RegrantPoolMembers :exec
-- After a hand-over to owner_id: the agent's memberships in owner_id's
-- pools need no grant; in the others' they go through the grant to the
-- pool's owner.
UPDATE pool_members SET granted_to = NULLIF((SELECT p.owner_id FROM pools p WHERE p.id = pool_members.pool_id), sqlc.arg(owner_id)::text)
WHERE agent_id = sqlc.arg(agent_id)::text;
