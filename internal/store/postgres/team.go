package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Persons, personal tokens and console sessions (DESIGN.md §1; issue 9
// items 1, 2, 4).

// lockPersons serialises the changes that must not race (the last-admin
// check of UpdatePerson).
const lockPersons int64 = 0x726f6c6c63616c09

const personCols = `id, name, admin, created_at, updated_at, deactivated_at`
const personColsP = `p.id, p.name, p.admin, p.created_at, p.updated_at, p.deactivated_at`

func personDest(p *domain.Person) []any {
	return []any{&p.ID, &p.Name, &p.Admin, &p.CreatedAt, &p.UpdatedAt, &p.DeactivatedAt}
}

func finishPerson(p *domain.Person) {
	p.CreatedAt, p.UpdatedAt = p.CreatedAt.UTC(), p.UpdatedAt.UTC()
	p.DeactivatedAt = utcPtr(p.DeactivatedAt)
	p.Active = p.DeactivatedAt == nil
	if p.Admin {
		p.Role = domain.RoleAdmin
	} else {
		p.Role = domain.RoleMember
	}
}

func scanPerson(row pgx.Row) (domain.Person, error) {
	var p domain.Person
	if err := row.Scan(personDest(&p)...); err != nil {
		return domain.Person{}, err
	}
	finishPerson(&p)
	return p, nil
}

const tokenCols = `id, person_id, name, created_at, expires_at, last_used_at, revoked_at`
const tokenColsT = `t.id, t.person_id, t.name, t.created_at, t.expires_at, t.last_used_at, t.revoked_at`

func tokenDest(t *domain.PersonToken) []any {
	return []any{&t.ID, &t.PersonID, &t.Name, &t.CreatedAt, &t.ExpiresAt, &t.LastUsedAt, &t.RevokedAt}
}

func finishToken(t *domain.PersonToken) {
	t.CreatedAt = t.CreatedAt.UTC()
	t.ExpiresAt, t.LastUsedAt, t.RevokedAt = utcPtr(t.ExpiresAt), utcPtr(t.LastUsedAt), utcPtr(t.RevokedAt)
}

func microPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	m := micro(*t)
	return &m
}

func insertToken(ctx context.Context, tx pgx.Tx, t domain.PersonToken, hash string) error {
	_, err := tx.Exec(ctx, `INSERT INTO person_tokens (`+tokenCols+`, hash)
		VALUES ($1, $2, $3, $4, $5, NULL, NULL, $6)`,
		t.ID, t.PersonID, t.Name, micro(t.CreatedAt), microPtr(t.ExpiresAt), hash)
	return mapErr("create token", err)
}

// CreatePerson implements store.Store.
func (s *Store) CreatePerson(ctx context.Context, p store.CreatePersonParams) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO persons (`+personCols+`) VALUES ($1, $2, $3, $4, $4, NULL)`,
			p.Person.ID, p.Person.Name, p.Person.Admin, micro(p.Person.CreatedAt))
		if err != nil {
			return mapErr("create person", err)
		}
		if err := insertToken(ctx, tx, p.Token, p.TokenHash); err != nil {
			return err
		}
		_, err = appendAudit(ctx, tx, p.Person.CreatedAt, p.Audit)
		return err
	})
}

// GetPerson implements store.Store.
func (s *Store) GetPerson(ctx context.Context, id string) (domain.Person, error) {
	p, err := scanPerson(s.pool.QueryRow(ctx, `SELECT `+personCols+` FROM persons WHERE id = $1`, id))
	return p, mapErr("get person", err)
}

// ListPersons implements store.Store.
func (s *Store) ListPersons(ctx context.Context) ([]domain.Person, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+personCols+` FROM persons ORDER BY created_at, id`)
	if err != nil {
		return nil, mapErr("list persons", err)
	}
	defer rows.Close()
	out := []domain.Person{}
	for rows.Next() {
		p, err := scanPerson(rows)
		if err != nil {
			return nil, mapErr("list persons", err)
		}
		out = append(out, p)
	}
	return out, mapErr("list persons", rows.Err())
}

// UpdatePerson implements store.Store; lockPersons serialises the
// last-admin check across instances.
func (s *Store) UpdatePerson(ctx context.Context, p store.UpdatePersonParams) (domain.Person, error) {
	var out domain.Person
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockPersons); err != nil {
			return mapErr("update person", err)
		}
		cur, err := scanPerson(tx.QueryRow(ctx, `SELECT `+personCols+` FROM persons WHERE id = $1`, p.ID))
		if err != nil {
			return mapErr("update person", err)
		}
		admin, active := cur.Admin, cur.Active
		if p.Role != nil {
			admin = *p.Role == domain.RoleAdmin
		}
		if p.Active != nil {
			active = *p.Active
		}
		if cur.Admin && cur.Active && !(admin && active) {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM persons
				WHERE admin AND deactivated_at IS NULL AND id <> $1`, p.ID).Scan(&n); err != nil {
				return mapErr("update person", err)
			}
			if n == 0 {
				return fmt.Errorf("update person: the last active admin: %w", domain.ErrConflict)
			}
		}
		var deact *time.Time
		now := micro(p.Now)
		switch {
		case !active && cur.Active:
			deact = &now
		case !active:
			deact = cur.DeactivatedAt
		}
		out, err = scanPerson(tx.QueryRow(ctx, `UPDATE persons SET name = coalesce($2, name),
			admin = $3, deactivated_at = $4, updated_at = $5 WHERE id = $1 RETURNING `+personCols,
			p.ID, p.Name, admin, deact, now))
		if err != nil {
			return mapErr("update person", err)
		}
		if !active {
			if _, err := tx.Exec(ctx, `UPDATE console_sessions SET ended_at = $2
				WHERE person_id = $1 AND ended_at IS NULL`, p.ID, now); err != nil {
				return mapErr("update person: end sessions", err)
			}
		}
		_, err = appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return out, err
}

// CreateToken implements store.Store.
func (s *Store) CreateToken(ctx context.Context, p store.CreateTokenParams) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM persons WHERE id = $1`, p.Token.PersonID).Scan(&one); err != nil {
			return mapErr("create token: person", err)
		}
		if err := insertToken(ctx, tx, p.Token, p.Hash); err != nil {
			return err
		}
		_, err := appendAudit(ctx, tx, p.Token.CreatedAt, p.Audit)
		return err
	})
}

// ListTokens implements store.Store.
func (s *Store) ListTokens(ctx context.Context, personID string) ([]domain.PersonToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenCols+` FROM person_tokens
		WHERE person_id = $1 AND revoked_at IS NULL ORDER BY created_at, id`, personID)
	if err != nil {
		return nil, mapErr("list tokens", err)
	}
	defer rows.Close()
	out := []domain.PersonToken{}
	for rows.Next() {
		var t domain.PersonToken
		if err := rows.Scan(tokenDest(&t)...); err != nil {
			return nil, mapErr("list tokens", err)
		}
		finishToken(&t)
		out = append(out, t)
	}
	return out, mapErr("list tokens", rows.Err())
}

// RevokeToken implements store.Store.
func (s *Store) RevokeToken(ctx context.Context, p store.RevokeTokenParams) (domain.PersonToken, error) {
	var t domain.PersonToken
	err := s.tx(ctx, func(tx pgx.Tx) error {
		now := micro(p.Now)
		err := tx.QueryRow(ctx, `UPDATE person_tokens SET revoked_at = $3
			WHERE id = $1 AND person_id = $2 AND revoked_at IS NULL RETURNING `+tokenCols,
			p.ID, p.PersonID, now).Scan(tokenDest(&t)...)
		if err != nil {
			return mapErr("revoke token", err)
		}
		finishToken(&t)
		if _, err := tx.Exec(ctx, `UPDATE console_sessions SET ended_at = $2
			WHERE token_id = $1 AND ended_at IS NULL`, p.ID, now); err != nil {
			return mapErr("revoke token: end sessions", err)
		}
		_, err = appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return t, err
}

func (s *Store) tokenWhere(ctx context.Context, what, where string, arg any) (domain.Person, domain.PersonToken, error) {
	var p domain.Person
	var t domain.PersonToken
	err := s.pool.QueryRow(ctx, `SELECT `+tokenColsT+`, `+personColsP+`
		FROM person_tokens t JOIN persons p ON p.id = t.person_id WHERE `+where, arg).
		Scan(append(tokenDest(&t), personDest(&p)...)...)
	if err != nil {
		return domain.Person{}, domain.PersonToken{}, mapErr(what, err)
	}
	finishToken(&t)
	finishPerson(&p)
	return p, t, nil
}

// TokenByHash implements store.Store.
func (s *Store) TokenByHash(ctx context.Context, hash string) (domain.Person, domain.PersonToken, error) {
	return s.tokenWhere(ctx, "token by hash", `t.hash = $1`, hash)
}

// TokenByID implements store.Store.
func (s *Store) TokenByID(ctx context.Context, id string) (domain.Person, domain.PersonToken, error) {
	return s.tokenWhere(ctx, "token by id", `t.id = $1`, id)
}

// TouchToken implements store.Store.
func (s *Store) TouchToken(ctx context.Context, p store.TouchTokenParams) error {
	_, err := s.pool.Exec(ctx, `UPDATE person_tokens SET last_used_at = $2
		WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`,
		p.ID, micro(p.At), micro(p.At.Add(-p.Every)))
	return mapErr("touch token", err)
}

// CreateConsoleSession implements store.Store.
func (s *Store) CreateConsoleSession(ctx context.Context, cs domain.ConsoleSession) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO console_sessions (id, person_id, token_id, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5)`, cs.ID, cs.PersonID, cs.TokenID, micro(cs.CreatedAt), micro(cs.ExpiresAt))
	return mapErr("create console session", err)
}

// ConsoleSessionByID implements store.Store.
func (s *Store) ConsoleSessionByID(ctx context.Context, id string) (domain.ConsoleSession, domain.PersonToken, domain.Person, error) {
	var cs domain.ConsoleSession
	var p domain.Person
	var t domain.PersonToken
	dest := []any{&cs.ID, &cs.PersonID, &cs.TokenID, &cs.CreatedAt, &cs.ExpiresAt, &cs.EndedAt}
	dest = append(dest, tokenDest(&t)...)
	dest = append(dest, personDest(&p)...)
	err := s.pool.QueryRow(ctx, `SELECT s.id, s.person_id, s.token_id, s.created_at, s.expires_at, s.ended_at,
		`+tokenColsT+`, `+personColsP+`
		FROM console_sessions s JOIN person_tokens t ON t.id = s.token_id JOIN persons p ON p.id = s.person_id
		WHERE s.id = $1`, id).Scan(dest...)
	if err != nil {
		return domain.ConsoleSession{}, domain.PersonToken{}, domain.Person{}, mapErr("console session", err)
	}
	cs.CreatedAt, cs.ExpiresAt, cs.EndedAt = cs.CreatedAt.UTC(), cs.ExpiresAt.UTC(), utcPtr(cs.EndedAt)
	finishToken(&t)
	finishPerson(&p)
	return cs, t, p, nil
}

// EndConsoleSession implements store.Store.
func (s *Store) EndConsoleSession(ctx context.Context, id string, at time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE console_sessions SET ended_at = $2 WHERE id = $1 AND ended_at IS NULL`, id, micro(at))
	return mapErr("end console session", err)
}

// LiveCredentials implements store.Store: one query for all ids.
func (s *Store) LiveCredentials(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT c.id FROM credentials c JOIN agents a ON a.id = c.agent_id
		WHERE c.id = ANY($1) AND c.revoked_at IS NULL AND a.revoked_at IS NULL AND a.active`, ids)
	if err != nil {
		return nil, mapErr("live credentials", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, mapErr("live credentials", err)
		}
		out[id] = true
	}
	return out, mapErr("live credentials", rows.Err())
}
