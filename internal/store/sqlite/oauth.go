package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// The OAuth statements (design: Sign-in for MCP clients) are shared with
// PostgreSQL in storeutil.OAuth; this is their SQLite connection: $n
// placeholders become ?n, times are integer microseconds, and every write
// runs in the one write transaction.

type oauthDB struct{ s *Store }

type oauthRunner struct {
	exec  func(ctx context.Context, q string, args ...any) (sql.Result, error)
	row   func(ctx context.Context, q string, args ...any) *sql.Row
	query func(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func rebind(q string) string { return strings.ReplaceAll(q, "$", "?") }

func (r oauthRunner) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := r.exec(ctx, rebind(q), args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (r oauthRunner) QueryRow(ctx context.Context, q string, args ...any) storeutil.Scanner {
	return r.row(ctx, rebind(q), args...)
}

func (r oauthRunner) Query(ctx context.Context, q string, args ...any) (storeutil.Rows, func(), error) {
	rows, err := r.query(ctx, rebind(q), args...)
	if err != nil {
		return nil, nil, err
	}
	return rows, func() { _ = rows.Close() }, nil
}

func (d oauthDB) Reads() storeutil.SQLRunner {
	c := d.s.read()
	return oauthRunner{exec: c.ExecContext, row: c.QueryRowContext, query: c.QueryContext}
}

func (d oauthDB) Write(ctx context.Context, fn func(storeutil.SQLRunner) error) error {
	return d.s.write(ctx, func(tx *sql.Tx) error {
		c := d.s.in(tx)
		return fn(oauthRunner{exec: c.ExecContext, row: c.QueryRowContext, query: c.QueryContext})
	})
}

func (oauthDB) TimeArg(t time.Time) any { return micros(t) }

func (oauthDB) NullTime() storeutil.NullTimeDest { return &oauthNullTime{} }

func (oauthDB) MapErr(what string, err error) error { return mapErr(what, err) }

type oauthNullTime struct{ v sql.NullInt64 }

func (n *oauthNullTime) Dest() any { return &n.v }

func (n *oauthNullTime) Get() *time.Time {
	if !n.v.Valid {
		return nil
	}
	t := fromMicros(n.v.Int64)
	return &t
}
