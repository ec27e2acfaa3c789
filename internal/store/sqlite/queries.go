package sqlite

import (
	"context"
	"database/sql"

	"github.com/rollcall/rollcall/internal/store"
)

// The hand-written SQL of persons. Writes run in write();
// reads outside a transaction use the read-only pool s.r.

// ---- persons ----------------------------------------------------------------

// BootstrapAdmin implements store.Store (DESIGN.md §2, first start).
func (s *Store) BootstrapAdmin(ctx context.Context, p store.BootstrapAdminParams) (bool, error) {
	created := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM persons`).Scan(&n); err != nil {
			return mapErr("bootstrap admin", err)
		}
		if n > 0 {
			return nil
		}
		at := micros(p.Person.CreatedAt)
		_, err := tx.ExecContext(ctx,
			`INSERT INTO persons (id, name, admin, created_at, updated_at) VALUES (?, ?, 1, ?, ?)`,
			p.Person.ID, p.Person.Name, at, at)
		if err != nil {
			return mapErr("bootstrap admin", err)
		}
		tokenID := p.TokenID
		if tokenID == "" {
			tokenID = "bootstrap-" + p.Person.ID
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO person_tokens (id, person_id, name, hash, created_at)
			VALUES (?, ?, 'bootstrap', ?, ?)`, tokenID, p.Person.ID, p.TokenHash, at)
		if err != nil {
			return mapErr("bootstrap admin token", err)
		}
		created = true
		return nil
	})
	return created, err
}
