package postgres

import (
	"context"
	"database/sql"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// Migrations (design: Store contract): the embedded files, applied by goose
// under a session advisory lock so that instances starting together migrate
// once.

//go:embed migrations/*.sql
var migrations embed.FS

// lockMigrate is the session advisory lock key of migrations, distinct from
// goose's default and from the transaction keys in postgres.go.
const lockMigrate int64 = 0x726f6c6c63616c03

// Migrations returns the embedded migration files (migrations/NNNNN_name.sql).
func Migrations() fs.FS { return storeutil.MigrationsDir(migrations) }

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() // does not close the pool
	return storeutil.Migrate(ctx, "postgres store", db, goose.DialectPostgres, Migrations(), goose.WithSessionLocker(migrationLock{}))
}

// migrationLock serialises migrations of instances starting together. Unlike
// goose's polling locker (5 s steps) it waits in pg_advisory_lock, so the
// second instance proceeds as soon as the first is done; ctx bounds the wait.
type migrationLock struct{}

var _ lock.SessionLocker = migrationLock{}

func (migrationLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, lockMigrate)
	return err
}

func (migrationLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, lockMigrate)
	return err
}
