package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// Persons, personal tokens and console sessions (design: Persons and roles) over the
// generated queries (sql/queries.sql). Times are INTEGER unix microseconds.

func personFrom(r dbsqlc.Person) domain.Person {
	p := domain.Person{ID: r.ID, Name: r.Name, Admin: r.Admin != 0, CreatedAt: fromMicros(r.CreatedAt),
		UpdatedAt: fromMicros(r.UpdatedAt), DeactivatedAt: fromNullMicros(r.DeactivatedAt)}
	p.Active = p.DeactivatedAt == nil
	if p.Admin {
		p.Role = domain.RoleAdmin
	} else {
		p.Role = domain.RoleMember
	}
	return p
}

func tokenFrom(r dbsqlc.PersonToken) domain.PersonToken {
	return domain.PersonToken{ID: r.ID, PersonID: r.PersonID, Name: r.Name, CreatedAt: fromMicros(r.CreatedAt),
		ExpiresAt: fromNullMicros(r.ExpiresAt), LastUsedAt: fromNullMicros(r.LastUsedAt), RevokedAt: fromNullMicros(r.RevokedAt)}
}

func insertToken(ctx context.Context, q *dbsqlc.Queries, t domain.PersonToken, hash string) error {
	err := q.InsertToken(ctx, dbsqlc.InsertTokenParams{ID: t.ID, PersonID: t.PersonID, Name: t.Name, Hash: hash,
		CreatedAt: micros(t.CreatedAt), ExpiresAt: nullMicros(t.ExpiresAt)})
	return mapErr("create token", err)
}

// BootstrapAdmin implements store.Store (design: Bootstrap admin).
func (s *Store) BootstrapAdmin(ctx context.Context, p store.BootstrapAdminParams) (bool, error) {
	created := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		n, err := q.CountPersons(ctx)
		if err != nil {
			return mapErr("bootstrap admin", err)
		}
		if n > 0 {
			return nil
		}
		at := micros(p.Person.CreatedAt)
		if err := q.InsertPerson(ctx, dbsqlc.InsertPersonParams{ID: p.Person.ID, Name: p.Person.Name, Admin: 1,
			CreatedAt: at, UpdatedAt: at}); err != nil {
			return mapErr("bootstrap admin", err)
		}
		tokenID := p.TokenID
		if tokenID == "" {
			tokenID = "bootstrap-" + p.Person.ID
		}
		s.hashes.add(p.TokenHash)
		if err := q.InsertToken(ctx, dbsqlc.InsertTokenParams{ID: tokenID, PersonID: p.Person.ID, Name: "bootstrap",
			Hash: p.TokenHash, CreatedAt: at}); err != nil {
			return mapErr("bootstrap admin token", err)
		}
		created = true
		return nil
	})
	return created, err
}

// CreatePerson implements store.Store.
func (s *Store) CreatePerson(ctx context.Context, p store.CreatePersonParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		at := micros(p.Person.CreatedAt)
		if err := q.InsertPerson(ctx, dbsqlc.InsertPersonParams{ID: p.Person.ID, Name: p.Person.Name,
			Admin: boolInt(p.Person.Admin), CreatedAt: at, UpdatedAt: at}); err != nil {
			return mapErr("create person", err)
		}
		s.hashes.add(p.TokenHash)
		if err := insertToken(ctx, q, p.Token, p.TokenHash); err != nil {
			return err
		}
		_, err := s.appendAudit(ctx, tx, p.Person.CreatedAt, p.Audit)
		return err
	})
}

// GetPerson implements store.Store.
func (s *Store) GetPerson(ctx context.Context, id string) (domain.Person, error) {
	r, err := s.rq.GetPerson(ctx, id)
	return storeutil.One(r, mapErr("get person", err), personFrom)
}

// ListPersons implements store.Store.
func (s *Store) ListPersons(ctx context.Context) ([]domain.Person, error) {
	rows, err := s.rq.ListPersons(ctx)
	return storeutil.All(rows, mapErr("list persons", err), personFrom)
}

// UpdatePerson implements store.Store. The single write connection
// serialises it, so the KeepActiveAdmin check cannot race.
func (s *Store) UpdatePerson(ctx context.Context, p store.UpdatePersonParams) (domain.Person, error) {
	var out domain.Person
	err := s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		r, err := q.GetPerson(ctx, p.ID)
		if err != nil {
			return mapErr("update person", err)
		}
		cur := personFrom(r)
		admin, active := cur.Admin, cur.Active
		if p.Role != nil {
			admin = *p.Role == domain.RoleAdmin
		}
		if p.Active != nil {
			active = *p.Active
		}
		if p.KeepActiveAdmin {
			n, err := q.CountOtherActiveAdmins(ctx, p.ID)
			if err != nil {
				return mapErr("update person", err)
			}
			if n == 0 {
				return fmt.Errorf("update person: the last active admin: %w", domain.ErrConflict)
			}
		}
		var deact sql.NullInt64
		switch {
		case !active && cur.Active:
			deact = nullMicros(&p.Now)
		case !active:
			deact = nullMicros(cur.DeactivatedAt)
		}
		now := micros(p.Now)
		r, err = q.UpdatePerson(ctx, dbsqlc.UpdatePersonParams{ID: p.ID, Name: toNullStr(p.Name), Admin: boolInt(admin),
			DeactivatedAt: deact, Now: now})
		if err != nil {
			return mapErr("update person", err)
		}
		out = personFrom(r)
		if !active {
			if err := q.EndPersonSessions(ctx, dbsqlc.EndPersonSessionsParams{PersonID: p.ID, Now: now}); err != nil {
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
		q := s.txq(tx)
		if _, err := q.GetPerson(ctx, p.Token.PersonID); err != nil {
			return mapErr("create token: person", err)
		}
		s.hashes.add(p.Hash)
		if err := insertToken(ctx, q, p.Token, p.Hash); err != nil {
			return err
		}
		_, err := s.appendAudit(ctx, tx, p.Token.CreatedAt, p.Audit)
		return err
	})
}

// ListTokens implements store.Store.
func (s *Store) ListTokens(ctx context.Context, personID string) ([]domain.PersonToken, error) {
	rows, err := s.rq.ListTokens(ctx, personID)
	return storeutil.All(rows, mapErr("list tokens", err), tokenFrom)
}

// RevokeToken implements store.Store.
func (s *Store) RevokeToken(ctx context.Context, p store.RevokeTokenParams) (domain.PersonToken, error) {
	var t domain.PersonToken
	err := s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		now := micros(p.Now)
		r, err := q.RevokeToken(ctx, dbsqlc.RevokeTokenParams{ID: p.ID, PersonID: p.PersonID, Now: now})
		if err != nil {
			return mapErr("revoke token", err)
		}
		t = tokenFrom(r)
		if err := q.EndTokenSessions(ctx, dbsqlc.EndTokenSessionsParams{TokenID: p.ID, Now: now}); err != nil {
			return mapErr("revoke token: end sessions", err)
		}
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return t, err
}

// personAndToken maps a TokenWithPerson row read with err.
func personAndToken(r dbsqlc.TokenWithPersonRow, err error) (domain.Person, domain.PersonToken, error) {
	if err != nil {
		return domain.Person{}, domain.PersonToken{}, err
	}
	return personFrom(r.Person), tokenFrom(r.PersonToken), nil
}

// TokenByHash implements store.Store.
func (s *Store) TokenByHash(ctx context.Context, hash string) (domain.Person, domain.PersonToken, error) {
	r, err := s.rq.TokenWithPerson(ctx, dbsqlc.TokenWithPersonParams{Hash: hash})
	return personAndToken(r, mapErr("token by hash", err))
}

// TokenByID implements store.Store.
func (s *Store) TokenByID(ctx context.Context, id string) (domain.Person, domain.PersonToken, error) {
	r, err := s.rq.TokenWithPerson(ctx, dbsqlc.TokenWithPersonParams{ID: id})
	return personAndToken(r, mapErr("token by id", err))
}

// TouchToken implements store.Store.
func (s *Store) TouchToken(ctx context.Context, p store.TouchTokenParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		err := s.txq(tx).TouchToken(ctx, dbsqlc.TouchTokenParams{ID: p.ID, At: micros(p.At),
			NotAfter: micros(p.At.Add(-p.Every))})
		return mapErr("touch token", err)
	})
}

// CreateConsoleSession implements store.Store.
func (s *Store) CreateConsoleSession(ctx context.Context, cs domain.ConsoleSession) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		err := s.txq(tx).InsertConsoleSession(ctx, dbsqlc.InsertConsoleSessionParams{ID: cs.ID,
			PersonID: cs.PersonID, TokenID: cs.TokenID, CreatedAt: micros(cs.CreatedAt), ExpiresAt: micros(cs.ExpiresAt)})
		return mapErr("create console session", err)
	})
}

// ConsoleSessionByID implements store.Store.
func (s *Store) ConsoleSessionByID(ctx context.Context, id string) (domain.ConsoleSession, domain.PersonToken, domain.Person, error) {
	r, err := s.rq.ConsoleSessionByID(ctx, id)
	if err != nil {
		return domain.ConsoleSession{}, domain.PersonToken{}, domain.Person{}, mapErr("console session", err)
	}
	c := r.ConsoleSession
	cs := domain.ConsoleSession{ID: c.ID, PersonID: c.PersonID, TokenID: c.TokenID, CreatedAt: fromMicros(c.CreatedAt),
		ExpiresAt: fromMicros(c.ExpiresAt), EndedAt: fromNullMicros(c.EndedAt)}
	return cs, tokenFrom(r.PersonToken), personFrom(r.Person), nil
}

// EndConsoleSession implements store.Store.
func (s *Store) EndConsoleSession(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		err := s.txq(tx).EndConsoleSession(ctx, dbsqlc.EndConsoleSessionParams{ID: id, At: micros(at)})
		return mapErr("end console session", err)
	})
}

// LiveCredentials implements store.Store.
func (s *Store) LiveCredentials(ctx context.Context, ids []string) (map[string]bool, error) {
	live, err := s.rq.LiveCredentials(ctx, encodeList(ids))
	if err != nil {
		return nil, mapErr("live credentials", err)
	}
	out := make(map[string]bool, len(live))
	for _, id := range live {
		out[id] = true
	}
	return out, nil
}

// CredentialMayAuthenticate implements store.Store.
func (s *Store) CredentialMayAuthenticate(ctx context.Context, hash string) (bool, error) {
	if !s.hashes.has(hash) {
		return false, nil // no credential has it (hashes.go)
	}
	ok, err := s.rq.CredentialMayAuthenticate(ctx, hash)
	return ok, mapErr("credential may authenticate", err)
}

// TokenMayAuthenticate implements store.Store.
func (s *Store) TokenMayAuthenticate(ctx context.Context, hash string, now time.Time) (bool, error) {
	if !s.hashes.has(hash) {
		return false, nil // no token has it (hashes.go)
	}
	ok, err := s.rq.TokenMayAuthenticate(ctx, dbsqlc.TokenMayAuthenticateParams{Hash: hash, Now: micros(now)})
	return ok, mapErr("token may authenticate", err)
}
