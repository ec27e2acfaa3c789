package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtCache keeps prepared statements by SQL text, the generated queries'
// and the hand-written ones alike. Parsing a statement costs about a third
// of a small write here, so every statement is prepared once per handle.
//
// Write statements are prepared on the single write connection. A write
// transaction holds that connection, so a query seen for the first time
// inside one runs unprepared and is prepared after the transaction ends
// (prepareMissing); later transactions bind the prepared statement with
// Tx.StmtContext, which reuses it on the same connection.
type stmtCache struct {
	mu      sync.Mutex
	stmts   map[string]*sql.Stmt
	missing map[string]struct{}
}

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stmts[query]
	if st == nil {
		if c.missing == nil {
			c.missing = map[string]struct{}{}
		}
		c.missing[query] = struct{}{}
	}
	return st
}

// prepareMissing prepares the queries get has missed on db. Failures are
// ignored: the query keeps running unprepared and is retried later. The
// mutex is not held while preparing: preparing waits for a connection that a
// transaction calling get may hold.
func (c *stmtCache) prepareMissing(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	if len(c.missing) == 0 {
		c.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(c.missing))
	for q := range c.missing {
		queries = append(queries, q)
	}
	c.mu.Unlock()
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if c.stmts == nil {
			c.stmts = map[string]*sql.Stmt{}
		}
		if c.stmts[q] == nil {
			c.stmts[q], st = st, nil
		}
		delete(c.missing, q)
		c.mu.Unlock()
		if st != nil {
			_ = st.Close() // prepared concurrently by another caller
		}
	}
}

func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for q, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, q)
	}
	return errors.Join(errs...)
}

// txConn runs statements in one write transaction with the statements
// cached on the write connection: it is the dbsqlc.DBTX of the generated
// queries inside Store.write, and what the hand-written write statements
// run on. A statement not cached yet runs unprepared (see stmtCache).
type txConn struct {
	c  *stmtCache
	tx *sql.Tx
}

// ExecContext runs a statement without rows.
func (t txConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.c.get(query); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryContext runs a statement returning rows.
func (t txConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.c.get(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a statement returning at most one row.
func (t txConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.c.get(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}

// PrepareContext prepares a statement in the transaction, uncached.
func (t txConn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, query)
}

// poolConn runs reads on the read pool with statements prepared on first
// use (database/sql re-prepares a statement on each pooled connection): the
// dbsqlc.DBTX of the generated reads, and what the hand-written reads run on.
type poolConn struct {
	c  *stmtCache
	db *sql.DB
}

func (p poolConn) stmt(ctx context.Context, query string) *sql.Stmt {
	st := p.c.get(query)
	if st == nil {
		p.c.prepareMissing(ctx, p.db)
		st = p.c.get(query)
	}
	return st
}

// ExecContext runs a statement without rows (the pool is read-only: a
// write fails).
func (p poolConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return p.db.ExecContext(ctx, query, args...)
}

// QueryContext runs a query returning rows.
func (p poolConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return p.db.QueryContext(ctx, query, args...)
}

// QueryRowContext runs a query returning at most one row.
func (p poolConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := p.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

// PrepareContext prepares a statement on the pool, uncached.
func (p poolConn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.db.PrepareContext(ctx, query)
}
