package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Persons, personal tokens and console sessions (DESIGN.md §1; issue 9
// items 1, 2, 4). Times are INTEGER unix microseconds.

const personCols = `id, name, admin, created_at, updated_at, deactivated_at`

// personColsP is personCols qualified with the alias p.
const personColsP = `p.id, p.name, p.admin, p.created_at, p.updated_at, p.deactivated_at`

func scanPersonInto(p *domain.Person, created, updated *int64, deact *sql.NullInt64) []any {
	return []any{&p.ID, &p.Name, &p.Admin, created, updated, deact}
}

func finishPerson(p *domain.Person, created, updated int64, deact sql.NullInt64) {
	p.CreatedAt, p.UpdatedAt = fromMicros(created), fromMicros(updated)
	p.DeactivatedAt = fromNullMicros(deact)
	p.Active = p.DeactivatedAt == nil
	if p.Admin {
		p.Role = domain.RoleAdmin
	} else {
		p.Role = domain.RoleMember
	}
}

func scanPerson(sc scanner) (domain.Person, error) {
	var p domain.Person
	var created, updated int64
	var deact sql.NullInt64
	if err := sc.Scan(scanPersonInto(&p, &created, &updated, &deact)...); err != nil {
		return domain.Person{}, err
	}
	finishPerson(&p, created, updated, deact)
	return p, nil
}

const tokenCols = `id, person_id, name, created_at, expires_at, last_used_at, revoked_at`
const tokenColsT = `t.id, t.person_id, t.name, t.created_at, t.expires_at, t.last_used_at, t.revoked_at`

type tokenScan struct {
	created                int64
	expires, used, revoked sql.NullInt64
}

func (ts *tokenScan) dest(t *domain.PersonToken) []any {
	return []any{&t.ID, &t.PersonID, &t.Name, &ts.created, &ts.expires, &ts.used, &ts.revoked}
}

func (ts *tokenScan) finish(t *domain.PersonToken) {
	t.CreatedAt = fromMicros(ts.created)
	t.ExpiresAt, t.LastUsedAt, t.RevokedAt = fromNullMicros(ts.expires), fromNullMicros(ts.used), fromNullMicros(ts.revoked)
}

func insertToken(ctx context.Context, tx *sql.Tx, t domain.PersonToken, hash string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO person_tokens (`+tokenCols+`, hash)
		VALUES (?, ?, ?, ?, ?, NULL, NULL, ?)`,
		t.ID, t.PersonID, t.Name, micros(t.CreatedAt), microsPtr(t.ExpiresAt), hash)
	return mapErr("create token", err)
}

// CreatePerson implements store.Store.
func (s *Store) CreatePerson(ctx context.Context, p store.CreatePersonParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO persons (`+personCols+`) VALUES (?, ?, ?, ?, ?, NULL)`,
			p.Person.ID, p.Person.Name, p.Person.Admin, micros(p.Person.CreatedAt), micros(p.Person.CreatedAt))
		if err != nil {
			return mapErr("create person", err)
		}
		if err := insertToken(ctx, tx, p.Token, p.TokenHash); err != nil {
			return err
		}
		_, err = s.appendAudit(ctx, tx, p.Person.CreatedAt, p.Audit)
		return err
	})
}

// GetPerson implements store.Store.
func (s *Store) GetPerson(ctx context.Context, id string) (domain.Person, error) {
	p, err := scanPerson(s.r.QueryRowContext(ctx, `SELECT `+personCols+` FROM persons WHERE id = ?`, id))
	return p, mapErr("get person", err)
}

// ListPersons implements store.Store.
func (s *Store) ListPersons(ctx context.Context) ([]domain.Person, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+personCols+` FROM persons ORDER BY created_at, id`)
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

// UpdatePerson implements store.Store. The single write connection
// serialises it, so the last-admin check cannot race.
func (s *Store) UpdatePerson(ctx context.Context, p store.UpdatePersonParams) (domain.Person, error) {
	var out domain.Person
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := scanPerson(tx.QueryRowContext(ctx, `SELECT `+personCols+` FROM persons WHERE id = ?`, p.ID))
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
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM persons
				WHERE admin = 1 AND deactivated_at IS NULL AND id <> ?`, p.ID).Scan(&n); err != nil {
				return mapErr("update person", err)
			}
			if n == 0 {
				return fmt.Errorf("update person: the last active admin: %w", domain.ErrConflict)
			}
		}
		var deact any
		switch {
		case !active && cur.Active:
			deact = micros(p.Now)
		case !active:
			deact = microsPtr(cur.DeactivatedAt)
		}
		now := micros(p.Now)
		out, err = scanPerson(tx.QueryRowContext(ctx, `UPDATE persons SET name = coalesce(?2, name),
			admin = ?3, deactivated_at = ?4, updated_at = ?5 WHERE id = ?1 RETURNING `+personCols,
			p.ID, p.Name, admin, deact, now))
		if err != nil {
			return mapErr("update person", err)
		}
		if !active {
			if _, err := tx.ExecContext(ctx, `UPDATE console_sessions SET ended_at = ?2
				WHERE person_id = ?1 AND ended_at IS NULL`, p.ID, now); err != nil {
				return mapErr("update person: end sessions", err)
			}
		}
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return out, err
}

// CreateToken implements store.Store.
func (s *Store) CreateToken(ctx context.Context, p store.CreateTokenParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM persons WHERE id = ?`, p.Token.PersonID).Scan(&one); err != nil {
			return mapErr("create token: person", err)
		}
		if err := insertToken(ctx, tx, p.Token, p.Hash); err != nil {
			return err
		}
		_, err := s.appendAudit(ctx, tx, p.Token.CreatedAt, p.Audit)
		return err
	})
}

// ListTokens implements store.Store.
func (s *Store) ListTokens(ctx context.Context, personID string) ([]domain.PersonToken, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+tokenCols+` FROM person_tokens
		WHERE person_id = ? AND revoked_at IS NULL ORDER BY created_at, id`, personID)
	if err != nil {
		return nil, mapErr("list tokens", err)
	}
	defer rows.Close()
	out := []domain.PersonToken{}
	for rows.Next() {
		var t domain.PersonToken
		var ts tokenScan
		if err := rows.Scan(ts.dest(&t)...); err != nil {
			return nil, mapErr("list tokens", err)
		}
		ts.finish(&t)
		out = append(out, t)
	}
	return out, mapErr("list tokens", rows.Err())
}

// RevokeToken implements store.Store.
func (s *Store) RevokeToken(ctx context.Context, p store.RevokeTokenParams) (domain.PersonToken, error) {
	var t domain.PersonToken
	err := s.write(ctx, func(tx *sql.Tx) error {
		now := micros(p.Now)
		var ts tokenScan
		err := tx.QueryRowContext(ctx, `UPDATE person_tokens SET revoked_at = ?3
			WHERE id = ?1 AND person_id = ?2 AND revoked_at IS NULL RETURNING `+tokenCols,
			p.ID, p.PersonID, now).Scan(ts.dest(&t)...)
		if err != nil {
			return mapErr("revoke token", err)
		}
		ts.finish(&t)
		if _, err := tx.ExecContext(ctx, `UPDATE console_sessions SET ended_at = ?2
			WHERE token_id = ?1 AND ended_at IS NULL`, p.ID, now); err != nil {
			return mapErr("revoke token: end sessions", err)
		}
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return t, err
}

func (s *Store) tokenWhere(ctx context.Context, what, where string, arg any) (domain.Person, domain.PersonToken, error) {
	var p domain.Person
	var t domain.PersonToken
	var ts tokenScan
	var created, updated int64
	var deact sql.NullInt64
	dest := append(ts.dest(&t), scanPersonInto(&p, &created, &updated, &deact)...)
	err := s.readRow(ctx, `SELECT `+tokenColsT+`, `+personColsP+`
		FROM person_tokens t JOIN persons p ON p.id = t.person_id WHERE `+where, arg).Scan(dest...)
	if err != nil {
		return domain.Person{}, domain.PersonToken{}, mapErr(what, err)
	}
	ts.finish(&t)
	finishPerson(&p, created, updated, deact)
	return p, t, nil
}

// TokenByHash implements store.Store.
func (s *Store) TokenByHash(ctx context.Context, hash string) (domain.Person, domain.PersonToken, error) {
	return s.tokenWhere(ctx, "token by hash", `t.hash = ?`, hash)
}

// TokenByID implements store.Store.
func (s *Store) TokenByID(ctx context.Context, id string) (domain.Person, domain.PersonToken, error) {
	return s.tokenWhere(ctx, "token by id", `t.id = ?`, id)
}

// TouchToken implements store.Store.
func (s *Store) TouchToken(ctx context.Context, p store.TouchTokenParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := s.txExec(ctx, tx, `UPDATE person_tokens SET last_used_at = ?2
			WHERE id = ?1 AND (last_used_at IS NULL OR last_used_at <= ?3)`,
			p.ID, micros(p.At), micros(p.At.Add(-p.Every)))
		return mapErr("touch token", err)
	})
}

// CreateConsoleSession implements store.Store.
func (s *Store) CreateConsoleSession(ctx context.Context, cs domain.ConsoleSession) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO console_sessions (id, person_id, token_id, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?)`, cs.ID, cs.PersonID, cs.TokenID, micros(cs.CreatedAt), micros(cs.ExpiresAt))
		return mapErr("create console session", err)
	})
}

// ConsoleSessionByID implements store.Store.
func (s *Store) ConsoleSessionByID(ctx context.Context, id string) (domain.ConsoleSession, domain.PersonToken, domain.Person, error) {
	var cs domain.ConsoleSession
	var p domain.Person
	var t domain.PersonToken
	var ts tokenScan
	var sCreated, sExpires, created, updated int64
	var ended, deact sql.NullInt64
	dest := []any{&cs.ID, &cs.PersonID, &cs.TokenID, &sCreated, &sExpires, &ended}
	dest = append(dest, ts.dest(&t)...)
	dest = append(dest, scanPersonInto(&p, &created, &updated, &deact)...)
	err := s.readRow(ctx, `SELECT s.id, s.person_id, s.token_id, s.created_at, s.expires_at, s.ended_at,
		`+tokenColsT+`, `+personColsP+`
		FROM console_sessions s JOIN person_tokens t ON t.id = s.token_id JOIN persons p ON p.id = s.person_id
		WHERE s.id = ?`, id).Scan(dest...)
	if err != nil {
		return domain.ConsoleSession{}, domain.PersonToken{}, domain.Person{}, mapErr("console session", err)
	}
	cs.CreatedAt, cs.ExpiresAt, cs.EndedAt = fromMicros(sCreated), fromMicros(sExpires), fromNullMicros(ended)
	ts.finish(&t)
	finishPerson(&p, created, updated, deact)
	return cs, t, p, nil
}

// EndConsoleSession implements store.Store.
func (s *Store) EndConsoleSession(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE console_sessions SET ended_at = ?2 WHERE id = ?1 AND ended_at IS NULL`, id, micros(at))
		return mapErr("end console session", err)
	})
}

// LiveCredentials implements store.Store: one query per 500 ids.
func (s *Store) LiveCredentials(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	for len(ids) > 0 {
		n := min(len(ids), 500)
		chunk := ids[:n]
		ids = ids[n:]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.r.QueryContext(ctx, `SELECT c.id FROM credentials c JOIN agents a ON a.id = c.agent_id
			WHERE c.id IN (?`+strings.Repeat(", ?", n-1)+`) AND c.revoked_at IS NULL
			AND a.revoked_at IS NULL AND a.active = 1`, args...)
		if err != nil {
			return nil, mapErr("live credentials", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, mapErr("live credentials", err)
			}
			out[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, mapErr("live credentials", err)
		}
	}
	return out, nil
}
