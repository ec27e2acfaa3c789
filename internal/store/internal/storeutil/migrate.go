package storeutil

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// MigrationsDir is the migrations directory of an adapter's embedded files
// (//go:embed migrations/*.sql): the files NNNNN_name.sql at its root.
func MigrationsDir(files embed.FS) fs.FS {
	sub, err := fs.Sub(files, "migrations")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// Migrate applies the pending migrations to db with goose in dialect (opts:
// the adapter's provider options, e.g. its session locker); adapter
// prefixes the errors ("sqlite store"). Errors: the provider cannot be made
// of migrations, a migration failed.
func Migrate(ctx context.Context, adapter string, db *sql.DB, dialect goose.Dialect, migrations fs.FS, opts ...goose.ProviderOption) error {
	p, err := goose.NewProvider(dialect, db, migrations, opts...)
	if err != nil {
		return fmt.Errorf("%s: migrations: %w", adapter, err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("%s: migrate: %w", adapter, err)
	}
	return nil
}
