package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtCache keeps prepared statements by SQL text. Parsing a statement costs
// about a third of a small write here, so hot queries are prepared once.
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

// txExec runs a statement without rows in tx with the cached statement
// when there is one.
func (s *Store) txExec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.ws.get(query); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// txQuery is txExec for statements returning rows.
func (s *Store) txQuery(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := s.ws.get(query); st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// readQuery runs a query on the read pool with a statement prepared on
// first use (database/sql re-prepares it on each pooled connection).
func (s *Store) readQuery(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st := s.rs.get(query)
	if st == nil {
		s.rs.prepareMissing(ctx, s.r)
		if st = s.rs.get(query); st == nil {
			return s.r.QueryContext(ctx, query, args...)
		}
	}
	return st.QueryContext(ctx, args...)
}
