// Package postgres is the PostgreSQL store adapter (DESIGN.md §4): the store
// port on pgx/v5 (pgxpool), for one or several Rollcall instances sharing a
// database.
//
//	s, err := postgres.Open(ctx, "postgres://rollcall@db/rollcall") // migrates
//	if err != nil { … }
//	defer s.Close()
//
// Concurrency rules: claims are single conditional UPDATEs (claim_next picks
// its row with FOR UPDATE SKIP LOCKED), so two instances never claim one
// todo; every audit append takes a transaction-scoped advisory lock before
// reading the chain tail, so concurrent appends never fork the chain;
// migrations run under a session advisory lock, so instances starting
// together migrate once.
//
// Times are timestamptz (µs), lists text[], and JSON documents text kept
// byte for byte.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Advisory lock keys, distinct from goose's default.
const (
	lockAudit     int64 = 0x726f6c6c63616c01 // "rollcal" + 1: the audit chain tail (xact)
	lockBootstrap int64 = 0x726f6c6c63616c02 // the first person (xact)
	lockMigrate   int64 = 0x726f6c6c63616c03 // migrations (session)
)

// Store is the PostgreSQL adapter of store.Store. It is safe for concurrent
// use, also by several processes on one database.
type Store struct {
	pool *pgxpool.Pool
	q    *dbsqlc.Queries // the generated queries on pool; dbsqlc.New(tx) in a transaction
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a libpq URL or key=value string),
// applies pending migrations and returns the adapter. Errors: an invalid
// url, an unreachable server, a failed migration.
func Open(ctx context.Context, url string) (*Store, error) {
	pool, err := connect(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool, q: dbsqlc.New(pool)}, nil
}

// Migrate applies pending migrations to the database at url and
// disconnects; it is what `rollcall migrate` runs (DESIGN.md §4). It is safe
// to run while servers use the database.
func Migrate(ctx context.Context, url string) error {
	pool, err := connect(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	return migrate(ctx, pool)
}

// Migrations returns the embedded migration files (migrations/NNNNN_name.sql).
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// DefaultPoolMaxConns is the pool size when the URL sets no pool_max_conns.
// pgx's own default (max(4, CPUs)) is too small for a server: on a 2-core
// host, 4 connections are all taken by a burst of audited heartbeats and a
// REST heartbeat's credential lookup waits seconds for one (issue 8 item
// 3). The audited writes of the heartbeat path are group-committed by the
// tracker (one connection for a whole batch), so this many connections
// leave ample room for request reads.
const DefaultPoolMaxConns = 24

// sizePool applies the server's pool defaults to what the URL left unset:
// DefaultPoolMaxConns connections and a 5 s connect timeout, so an
// unreachable database fails a request instead of hanging it.
func sizePool(cfg *pgxpool.Config, url string) {
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultPoolMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
}

func connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres store: invalid url: %w", err)
	}
	sizePool(cfg, url)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store: connect to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close() // does not close the pool
	p, err := goose.NewProvider(goose.DialectPostgres, db, Migrations(), goose.WithSessionLocker(migrationLock{}))
	if err != nil {
		return fmt.Errorf("postgres store: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("postgres store: migrate: %w", err)
	}
	return nil
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

// Dialect returns "postgres".
func (s *Store) Dialect() string { return "postgres" }

// Close closes every pooled connection, waiting for acquired ones to be
// released.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Pool returns the connection pool, e.g. for a LISTEN/NOTIFY bus on the same
// database. The Store keeps owning it.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// tx runs fn in one READ COMMITTED transaction: committed when fn returns
// nil, rolled back otherwise.
func (s *Store) tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// mapErr turns constraint violations and missing rows into the port's
// sentinel errors: unique → domain.ErrConflict, foreign key and no rows →
// domain.ErrNotFound. what names the operation for the message.
func mapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, domain.ErrNotFound)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%s: %w (%s)", what, domain.ErrConflict, pe.ConstraintName)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%s: %w (%s)", what, domain.ErrNotFound, pe.ConstraintName)
		case "22021", "22P05": // invalid byte sequence / untranslatable character
			// A key with a NUL byte or invalid UTF-8 matches no stored row;
			// writes of such text are refused by the use cases first.
			return fmt.Errorf("%s: %w (text is not valid UTF-8 without NUL)", what, domain.ErrNotFound)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}
