// Package sqlite is the embedded store adapter (DESIGN.md §4): the store port
// on a single SQLite file through the pure-Go driver modernc.org/sqlite.
//
//	s, err := sqlite.Open(ctx, "rollcall.db") // migrates, flocks rollcall.db
//	if err != nil { … }
//	defer s.Close()
//
// Layout: one write connection (BEGIN IMMEDIATE, so writers queue in the pool
// instead of failing with SQLITE_BUSY) and a small pool of read-only
// connections that read concurrently thanks to WAL. A second process — or a
// second Open in the same process — on the same file is refused while the
// first holds the file lock: Rollcall on SQLite is a single instance. Hot
// queries run as statements prepared once per connection (stmts.go).
//
// Times are stored as INTEGER unix microseconds (UTC), lists as JSON arrays,
// and JSON documents as TEXT kept byte for byte.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Memory is the path that opens a private in-memory database (tests).
const Memory = ":memory:"

// Store is the SQLite adapter of store.Store. It is safe for concurrent use.
type Store struct {
	path string
	w    *sql.DB  // the one write connection (also reads for :memory:)
	r    *sql.DB  // read-only connections
	lock *os.File // the database file, flocked until Close; nil for :memory:

	closeOnce sync.Once
	closeErr  error
	ws        stmtCache // statements prepared on w
	rs        stmtCache // statements prepared on r

	// The generated queries, prepared once: wq on w (bound to a write
	// transaction with WithTx, which reuses the statement on the one write
	// connection), rq on the read pool.
	wq, rq *dbsqlc.Queries
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path, takes the
// instance lock (flock on the database file), applies pending migrations and returns the
// adapter. path may be Memory (":memory:") for a private in-memory database.
//
// Errors: another holder of the lock ("another rollcall server is using
// <path>"), an unreadable file, a failed migration. Close releases the lock.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlite store: empty path")
	}
	s := &Store{path: path}
	if path != Memory {
		// flock the database file itself: the lock follows the inode, so a
		// symlink or a hard link to the same file is refused too. SQLite's
		// own locks are fcntl locks, which flock does not touch.
		l, err := lockFile(path)
		if err != nil {
			if errors.Is(err, errLocked) {
				return nil, fmt.Errorf("another rollcall server is using %s", path)
			}
			return nil, fmt.Errorf("sqlite store: lock %s: %w", path, err)
		}
		s.lock = l
	}
	if err := s.open(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := migrate(ctx, s.w); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := s.prepare(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Migrate applies pending migrations to the database at path and closes it;
// it is what `rollcall migrate` runs (DESIGN.md §4). It takes the instance
// lock like Open, so it is refused while a server uses the file.
func Migrate(ctx context.Context, path string) error {
	s, err := Open(ctx, path)
	if err != nil {
		return err
	}
	return s.Close()
}

// Migrations returns the embedded migration files (migrations/NNNNN_name.sql).
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

func migrate(ctx context.Context, db *sql.DB) error {
	p, err := goose.NewProvider(goose.DialectSQLite3, db, Migrations())
	if err != nil {
		return fmt.Errorf("sqlite store: migrations: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlite store: migrate: %w", err)
	}
	return nil
}

func (s *Store) open(ctx context.Context) error {
	// busy_timeout covers the rare lock waits left (checkpoints, readers
	// racing the WAL reset); synchronous=NORMAL is safe in WAL mode: a crash
	// of the process loses nothing, power loss may lose the last commits.
	const common = "_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	if s.path == Memory {
		db, err := sql.Open("sqlite", "file::memory:?"+common+"&_txlock=immediate")
		if err != nil {
			return fmt.Errorf("sqlite store: %w", err)
		}
		// Every connection to :memory: is its own database: keep exactly one.
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		s.w, s.r = db, db
		return db.PingContext(ctx)
	}
	uri := "file:" + uriEscaper.Replace(s.path) + "?"
	w, err := sql.Open("sqlite", uri+common+"&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return fmt.Errorf("sqlite store: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s.w = w
	// The writer creates the file and switches it to WAL before any reader.
	if err := w.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite store: open %s: %w", s.path, err)
	}
	r, err := sql.Open("sqlite", uri+common+"&_query_only=1")
	if err != nil {
		return fmt.Errorf("sqlite store: %w", err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	s.r = r
	return nil
}

// prepare prepares the generated queries on both handles; it runs after
// the migrations, since preparing checks the statements against the schema.
func (s *Store) prepare(ctx context.Context) error {
	var err error
	if s.wq, err = dbsqlc.Prepare(ctx, s.w); err != nil {
		return fmt.Errorf("sqlite store: prepare: %w", err)
	}
	s.rq = s.wq
	if s.r != s.w {
		if s.rq, err = dbsqlc.Prepare(ctx, s.r); err != nil {
			return fmt.Errorf("sqlite store: prepare: %w", err)
		}
	}
	return nil
}

// uriEscaper escapes the characters a SQLite file: URI gives meaning to.
var uriEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// Dialect returns "sqlite".
func (s *Store) Dialect() string { return "sqlite" }

// Close closes the database and releases the instance lock. It is safe to
// call more than once.
func (s *Store) Close() error {
	// The handles stay set: a call racing Close gets "database is closed"
	// from database/sql instead of a nil pointer.
	s.closeOnce.Do(func() {
		errs := []error{s.rs.close(), s.ws.close()}
		if s.rq != nil && s.rq != s.wq {
			errs = append(errs, s.rq.Close())
		}
		if s.wq != nil {
			errs = append(errs, s.wq.Close())
		}
		if s.r != nil && s.r != s.w {
			errs = append(errs, s.r.Close())
		}
		if s.w != nil {
			errs = append(errs, s.w.Close())
		}
		if s.lock != nil {
			errs = append(errs, unlockFile(s.lock))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// write runs fn in one BEGIN IMMEDIATE transaction on the write connection:
// committed when fn returns nil, rolled back otherwise. Afterwards it
// prepares the queries txRow/txExec met for the first time.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite store: begin: %w", err)
	}
	err = fn(tx)
	if err != nil {
		_ = tx.Rollback()
	} else if err = tx.Commit(); err != nil {
		err = fmt.Errorf("sqlite store: commit: %w", err)
	}
	s.ws.prepareMissing(ctx, s.w)
	return err
}

// mapErr turns constraint violations into the port's sentinel errors:
// unique/primary key → domain.ErrConflict, foreign key → domain.ErrNotFound.
// what names the operation for the message.
func mapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%s: %w (%v)", what, domain.ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%s: %w (%v)", what, domain.ErrNotFound, err)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, domain.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Time encoding: INTEGER unix microseconds.

func micros(t time.Time) int64 { return t.UnixMicro() }

func microsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func nullMicros(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMicro(), Valid: true}
}

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}
