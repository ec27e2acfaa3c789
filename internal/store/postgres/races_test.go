package postgres

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// Races of a pool push with other writers, on PostgreSQL's row and
// advisory locks (design: Group commit, Pools). Each test holds a lock in
// a transaction of its own, waits until the store's statement waits for
// it (pg_locks), then lets it go.

// raceFixture is an agent in two pools, p and q, on queue build.
func raceFixture(t *testing.T) (s *Store, agent, p, q string) {
	t.Helper()
	s = openT(t, pgtest.FreshDatabase(t))
	agent, p, q = "race-agent", "race-pool-p", "race-pool-q"
	pgExec(t, s.pool, `INSERT INTO agents (id, handle, owner_id, name, queues, verbs, created_at, updated_at)
		VALUES ($1, 'race', 'race-owner', 'race', '{build}', $2::text[], now(), now())`, agent, domain.ScopeVerbs)
	for _, id := range []string{p, q} {
		pgExec(t, s.pool, `INSERT INTO pools (id, owner_id, name, created_at) VALUES ($1, 'race-owner', $1, now())`, id)
		pgExec(t, s.pool, `INSERT INTO pool_queues (pool_id, queue) VALUES ($1, 'build')`, id)
		pgExec(t, s.pool, `INSERT INTO pool_members (pool_id, agent_id) VALUES ($1, $2)`, id, agent)
	}
	return s, agent, p, q
}

func pgExec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// holdTx runs sql in a transaction of its own connection and keeps it
// open; the returned function commits it.
func holdTx(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) (commit func()) {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			_ = tx.Rollback(context.Background())
		}
	})
	return func() {
		done = true
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// waitForLockWait returns once some backend waits for a lock of kind
// (pg_locks.locktype), failing t after 20 s.
func waitForLockWait(t *testing.T, pool *pgxpool.Pool, kind string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = $1`, kind).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backend waited for a %s lock within 20 s", kind)
		}
		time.Sleep(5 * time.Millisecond) // polling for a state, not waiting for one to arrive
	}
}

func raceTodo(id, poolID, key string) domain.Todo {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return domain.Todo{ID: id, PoolID: poolID, Queue: "build", Title: id, IdempotencyKey: key,
		State: domain.TodoPending, MaxAttempts: 5, CreatedAt: now, UpdatedAt: now}
}

// TestDeletePoolCountsAPushThatCommitsWhileItWaits: a push that commits
// while the delete waits for the pool row's lock is counted, so the
// delete is refused (conflict: live todos) instead of orphaning the todo
// (a check violation, answered 500, before).
func TestDeletePoolCountsAPushThatCommitsWhileItWaits(t *testing.T) {
	s, _, p, _ := raceFixture(t)
	ctx := t.Context()
	commit := holdTx(t, s.pool, `INSERT INTO todos (id, queue, title, state, max_attempts, created_at, updated_at, pool_id)
		VALUES ('race-todo', 'build', 'racing push', 'pending', 5, now(), now(), $1)`, p)
	errc := make(chan error, 1)
	go func() {
		errc <- s.DeletePool(ctx, store.DeletePoolParams{ID: p, Now: time.Now(),
			Audit: domain.AuditRecord{Actor: "operator:race-owner", Action: "pool.delete"}})
	}()
	waitForLockWait(t, s.pool, "transactionid") // the delete waits for the push's key-share lock on the pool row
	commit()
	if err := <-errc; !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("DeletePool while a push commits = %v, want a conflict (the pool has a live todo)", err)
	}
	var poolID *string
	if err := s.pool.QueryRow(ctx, `SELECT pool_id FROM todos WHERE id = 'race-todo'`).Scan(&poolID); err != nil || poolID == nil || *poolID != p {
		t.Fatalf("the pushed todo's pool = %v, %v; want %s", poolID, err, p)
	}
}

// TestGroupCommitItemRefusedLateFailsAlone: an item whose key a live todo
// held when its insert ran, and whose pool is deleted (its holder done)
// before the batch writes it again, is refused alone; its batch-mate is
// created and audited (design: Group commit).
func TestGroupCommitItemRefusedLateFailsAlone(t *testing.T) {
	s, agent, p, q := raceFixture(t)
	ctx := t.Context()
	holder, created, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: raceTodo("race-holder", p, "k")})
	if err != nil || !created {
		t.Fatalf("holder: %v %v", created, err)
	}
	release := holdTx(t, s.pool, `SELECT pg_advisory_xact_lock($1)`, lockAudit) // the batch stops at the chain's lock
	audit := func(td domain.Todo) store.CreateTodoParams {
		return store.CreateTodoParams{Todo: td, Audit: &domain.AuditRecord{Actor: "operator:race-owner", Action: "todo.push_pool",
			Data: map[string]any{"pool_id": td.PoolID, "todo_id": td.ID}}}
	}
	late := &storeutil.TodoItem{Ctx: ctx, In: audit(raceTodo("race-late", p, "k"))} // key held by holder
	mate := &storeutil.TodoItem{Ctx: ctx, In: audit(raceTodo("race-mate", q, "k2"))}
	done := make(chan struct{})
	go func() { defer close(done); s.writeTodos(ctx, []*storeutil.TodoItem{late, mate}) }()
	waitForLockWait(t, s.pool, "advisory")
	// Meanwhile the holder is claimed and done, and its pool deleted.
	pgExec(t, s.pool, `UPDATE todos SET state = 'done', agent_id = $2 WHERE id = $1`, holder.ID, agent)
	pgExec(t, s.pool, `DELETE FROM pools WHERE id = $1`, p)
	release()
	<-done

	if !errors.Is(late.Err, domain.ErrNotFound) {
		t.Errorf("the late item: created=%v err=%v, want its pool not found", late.Out.Created, late.Err)
	}
	if mate.Err != nil || !mate.Out.Created || mate.Out.Todo.ID != "race-mate" {
		t.Errorf("its batch-mate: %+v, err %v; want created", mate.Out, mate.Err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM audit WHERE data::jsonb ->> 'todo_id' = 'race-mate'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("audit entries of the batch-mate = %d, %v; want 1", n, err)
	}
	if v, err := s.VerifyAudit(ctx, store.VerifyAuditParams{}); err != nil || !v.OK {
		t.Errorf("VerifyAudit = %+v, %v", v, err)
	}
	var live int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'`).Scan(&live); err != nil || live != 0 {
		t.Errorf("connections idle in transaction = %d, %v", live, err)
	}
}

// cutAfterCommit relays PostgreSQL connections to target; once armed, the
// first server answer "COMMIT" it relays is the last thing that connection
// carries (the ReadyForQuery behind it is not sent, the connection is
// closed): the backend committed, then the connection failed.
type cutAfterCommit struct {
	addr  string
	armed atomic.Bool
	cut   atomic.Int32
}

func newCutAfterCommit(t *testing.T, target string) *cutAfterCommit {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &cutAfterCommit{addr: ln.Addr().String()}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go r.serverToClient(up, c)
		}
	}()
	return r
}

// serverToClient copies the server's messages (a type byte and a length;
// sslmode=disable, so no unframed SSL answer comes first).
func (r *cutAfterCommit) serverToClient(up, c net.Conn) {
	defer func() { _ = c.Close(); _ = up.Close() }()
	br := bufio.NewReader(up)
	for {
		head := make([]byte, 5)
		if _, err := io.ReadFull(br, head); err != nil {
			return
		}
		body := make([]byte, int(binary.BigEndian.Uint32(head[1:]))-4)
		if _, err := io.ReadFull(br, body); err != nil {
			return
		}
		if _, err := c.Write(append(head, body...)); err != nil {
			return
		}
		if head[0] == 'C' && string(body) == "COMMIT\x00" && r.armed.CompareAndSwap(true, false) {
			r.cut.Add(1)
			return
		}
	}
}

// TestGroupCommitAnsweredCommitIsCommitted: a group commit whose COMMIT
// the server answered is reported committed even when the connection
// fails right after (its callers were answered 503 for todos that exist,
// and a retry without an idempotency key duplicated them).
func TestGroupCommitAnsweredCommitIsCommitted(t *testing.T) {
	direct, _, p, _ := raceFixture(t)
	u, err := url.Parse(pgtest.AdminURL(t))
	if err != nil {
		t.Fatal(err)
	}
	relay := newCutAfterCommit(t, u.Host)
	var db string
	if err := direct.pool.QueryRow(t.Context(), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	s := openT(t, "postgres://postgres@"+relay.addr+"/"+db+"?sslmode=disable")
	ctx := t.Context()
	push := func(id string) (domain.Todo, bool, error) {
		return s.CreateTodo(ctx, store.CreateTodoParams{Todo: raceTodo(id, p, id), Audit: &domain.AuditRecord{
			Actor: "operator:race-owner", Action: "todo.push_pool", Data: map[string]any{"pool_id": p, "todo_id": id}}})
	}
	if _, _, err := push("race-warm"); err != nil { // the commit pool's connection is open
		t.Fatal(err)
	}
	relay.armed.Store(true)
	got, created, err := push("race-cut")
	if relay.cut.Load() != 1 {
		t.Fatalf("the relay cut %d connections after a COMMIT, want 1", relay.cut.Load())
	}
	if err != nil || !created || got.ID != "race-cut" {
		t.Fatalf("audited create whose COMMIT was answered, then the connection cut = %+v, %v, %v; want created", got, created, err)
	}
	if _, err := direct.GetTodo(ctx, "race-cut"); err != nil {
		t.Fatalf("the todo reported created: %v", err)
	}
	if _, created, err := push("race-after"); err != nil || !created {
		t.Fatalf("the next audited create = %v, %v", created, err)
	}
	if v, err := direct.VerifyAudit(ctx, store.VerifyAuditParams{}); err != nil || !v.OK || v.Checked != 3 {
		t.Errorf("VerifyAudit = %+v, %v; want ok over 3 entries", v, err)
	}
}
