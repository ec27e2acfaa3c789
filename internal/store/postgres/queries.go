package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// Shared helpers and the hand-written SQL of persons. Every time sent is
// first truncated to the microsecond (PostgreSQL would round), and every
// time read is returned in UTC.

var micro = storeutil.Micro

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// limitArg maps Limit <= 0 to NULL, which LIMIT reads as "no limit".
func limitArg(n int) *int64 {
	if n <= 0 {
		return nil
	}
	v := int64(n)
	return &v
}

func nullJSON(b json.RawMessage) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// deref reads a nullable text column whose NULL means "".
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// rawBytes reads a nullable text column kept byte for byte; NULL → nil.
func rawBytes(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

func rawJSON(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// ---- persons ----------------------------------------------------------------

// BootstrapAdmin implements store.Store (DESIGN.md §2, first start). An
// advisory lock makes concurrent first starts create one person.
func (s *Store) BootstrapAdmin(ctx context.Context, p store.BootstrapAdminParams) (bool, error) {
	created := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockBootstrap); err != nil {
			return mapErr("bootstrap admin", err)
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM persons)`).Scan(&exists); err != nil {
			return mapErr("bootstrap admin", err)
		}
		if exists {
			return nil
		}
		at := micro(p.Person.CreatedAt)
		_, err := tx.Exec(ctx, `INSERT INTO persons (id, name, admin, created_at, updated_at)
			VALUES ($1, $2, true, $3, $3)`, p.Person.ID, p.Person.Name, at)
		if err != nil {
			return mapErr("bootstrap admin", err)
		}
		tokenID := p.TokenID
		if tokenID == "" {
			tokenID = "bootstrap-" + p.Person.ID
		}
		_, err = tx.Exec(ctx, `INSERT INTO person_tokens (id, person_id, name, hash, created_at)
			VALUES ($1, $2, 'bootstrap', $3, $4)`, tokenID, p.Person.ID, p.TokenHash, at)
		if err != nil {
			return mapErr("bootstrap admin token", err)
		}
		created = true
		return nil
	})
	return created, err
}
