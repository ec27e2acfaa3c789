package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// The OAuth statements (design: Sign-in for MCP clients) are shared with
// SQLite in storeutil.OAuth; this is their PostgreSQL connection: writes
// run in one READ COMMITTED transaction, times are timestamptz.

type oauthDB struct{ s *Store }

type oauthRunner struct{ q querier }

// querier is what a pool and a transaction both offer.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (r oauthRunner) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	rows, err := r.q.Query(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	rows.Close()
	return rows.CommandTag().RowsAffected(), rows.Err()
}

func (r oauthRunner) QueryRow(ctx context.Context, q string, args ...any) storeutil.Scanner {
	return r.q.QueryRow(ctx, q, args...)
}

func (r oauthRunner) Query(ctx context.Context, q string, args ...any) (storeutil.Rows, func(), error) {
	rows, err := r.q.Query(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	return rows, rows.Close, nil
}

func (d oauthDB) Reads() storeutil.SQLRunner { return oauthRunner{q: d.s.pool} }

func (d oauthDB) Write(ctx context.Context, fn func(storeutil.SQLRunner) error) error {
	return d.s.tx(ctx, func(tx pgx.Tx) error { return fn(oauthRunner{q: tx}) })
}

func (oauthDB) TimeArg(t time.Time) any { return micro(t) }

func (oauthDB) NullTime() storeutil.NullTimeDest { return &nullTime{} }

func (oauthDB) MapErr(what string, err error) error { return mapErr(what, err) }

type nullTime struct{ v *time.Time }

func (n *nullTime) Dest() any { return &n.v }

func (n *nullTime) Get() *time.Time { return utcPtr(n.v) }
