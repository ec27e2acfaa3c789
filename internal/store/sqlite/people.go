package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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
		s.hashes.add(p.TokenHash)
		if err := insertToken(ctx, q, p.Token(), p.TokenHash); err != nil {
			return fmt.Errorf("bootstrap admin: %w", err)
		}
		created = true
		return nil
	})
	return created, err
}

// CreatePerson implements store.Store.
func (s *Store) CreatePerson(ctx context.Context, p store.CreatePersonParams) error {
	return s.writeAudited(ctx, p.Person.CreatedAt, p.Audit, func(tx *sql.Tx) error {
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
		return nil
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

// UpdatePerson implements store.Store: the use case's Change decides
// (design: Last active admin); the single write connection serialises
// every write, so Change sees the admins as the last change left them.
func (s *Store) UpdatePerson(ctx context.Context, p store.UpdatePersonParams) (domain.Person, error) {
	var out domain.Person
	err := s.writeAudited(ctx, p.Now, p.Audit, func(tx *sql.Tx) error {
		q := s.txq(tx)
		r, err := q.GetPerson(ctx, p.ID)
		if err != nil {
			return mapErr("update person", err)
		}
		others, err := q.CountOtherActiveAdmins(ctx, p.ID)
		if err != nil {
			return mapErr("update person", err)
		}
		next, deact, err := storeutil.ChangePerson(personFrom(r), others, p.Now, p.Change)
		if err != nil {
			return err
		}
		now := micros(p.Now)
		r, err = q.UpdatePerson(ctx, dbsqlc.UpdatePersonParams{ID: p.ID, Name: toNullStr(&next.Name), Admin: boolInt(next.Admin),
			DeactivatedAt: nullMicros(deact), Now: now})
		if err != nil {
			return mapErr("update person", err)
		}
		out = personFrom(r)
		if !out.Active {
			if err := q.EndPersonSessions(ctx, dbsqlc.EndPersonSessionsParams{PersonID: p.ID, Now: now}); err != nil {
				return mapErr("update person: end sessions", err)
			}
		}
		return nil
	})
	return out, err
}

// CreateToken implements store.Store.
func (s *Store) CreateToken(ctx context.Context, p store.CreateTokenParams) error {
	return s.writeAudited(ctx, p.Token.CreatedAt, p.Audit, func(tx *sql.Tx) error {
		q := s.txq(tx)
		if _, err := q.GetPerson(ctx, p.Token.PersonID); err != nil {
			return mapErr("create token: person", err)
		}
		s.hashes.add(p.Hash)
		if err := insertToken(ctx, q, p.Token, p.Hash); err != nil {
			return err
		}
		return nil
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
	err := s.writeAudited(ctx, p.Now, p.Audit, func(tx *sql.Tx) error {
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
		return nil
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

// Agents and credentials over the generated queries (sql/queries.sql).

// scanAgent scans a row of storeutil.AgentCols into a agent.
var scanAgent = storeutil.ScanRowErr(storeutil.AgentCols, agentFrom)

// agentFrom turns a row into an agent with its Presence and Liveness filled.
func agentFrom(r dbsqlc.Agent) (domain.Agent, error) {
	a := domain.Agent{ID: r.ID, Handle: r.Handle, OwnerID: r.OwnerID, Name: r.Name, Active: r.Active != 0,
		RevokedAt: fromNullMicros(r.RevokedAt), BillingMode: r.BillingMode, ToolClass: r.ToolClass,
		CreatedAt: fromMicros(r.CreatedAt), UpdatedAt: fromMicros(r.UpdatedAt),
		SelfClockInCap: domain.ClockInCap(time.Duration(r.SelfClockInCap) * time.Second)}
	a.Presence = domain.PresenceColumns{Shift: r.Shift.String, Override: r.PresenceOverride.String,
		OverrideUntil: fromNullMicros(r.OverrideUntil), OverrideSetAt: fromNullMicros(r.OverrideSetAt),
		OverrideBy: r.OverrideBy.String, Seen: r.PresenceSeen, ChangedAt: fromNullMicros(r.PresenceChangedAt),
		ChangedBy: r.PresenceChangedBy.String, SelfInStretch: fromNullMicros(r.SelfInStretch),
		SelfInUsed: time.Duration(r.SelfInUsed) * time.Second}
	a.Liveness = domain.LivenessColumns{State: r.State, LastHeartbeatAt: fromNullMicros(r.LastHeartbeatAt),
		ReportedBillingMode: nullStr(r.ReportedBillingMode), ReportedToolClass: nullStr(r.ReportedToolClass),
		ReportedRuntimeVersion: nullStr(r.ReportedRuntimeVersion), ReportedState: nullBytes(r.ReportedState),
		ProjectReadiness: nullBytes(r.ProjectReadiness)}
	var err error
	if a.Scope.Queues, err = decodeList(r.Queues); err != nil {
		return domain.Agent{}, err
	}
	if a.Scope.Verbs, err = decodeList(r.Verbs); err != nil {
		return domain.Agent{}, err
	}
	if a.BillingModes, err = decodeList(r.BillingModes); err != nil {
		return domain.Agent{}, err
	}
	if a.Scope.Handoff, err = storeutil.DecodeHandoff(r.Handoff); err != nil {
		return domain.Agent{}, err
	}
	return a, nil
}

// CreateAgent implements store.Store (design: Agents and handles; vend).
func (s *Store) CreateAgent(ctx context.Context, p store.CreateAgentParams) error {
	a := p.Agent
	return s.writeAudited(ctx, a.CreatedAt, p.Audit, func(tx *sql.Tx) error {
		q := s.txq(tx)
		err := q.InsertAgent(ctx, dbsqlc.InsertAgentParams{ID: a.ID, Handle: a.Handle, OwnerID: a.OwnerID,
			Name: a.Name, Active: boolInt(a.Active), RevokedAt: nullMicros(a.RevokedAt),
			Queues: encodeList(a.Scope.Queues), Verbs: encodeList(a.Scope.Verbs), BillingMode: a.BillingMode,
			BillingModes: encodeList(a.BillingModes), ToolClass: a.ToolClass, CreatedAt: micros(a.CreatedAt),
			UpdatedAt: micros(a.UpdatedAt), Handoff: storeutil.EncodeHandoff(a.Scope.Handoff)})
		if err != nil {
			return mapErr("create agent", err)
		}
		s.hashes.add(p.CredentialHash)
		err = q.InsertCredential(ctx, dbsqlc.InsertCredentialParams{ID: p.CredentialID, AgentID: a.ID,
			Hash: p.CredentialHash, CreatedAt: micros(a.CreatedAt)})
		if err != nil {
			return mapErr("create agent credential", err)
		}
		return nil
	})
}

// GetAgent implements store.Store: by Ref.ID when set, else by Ref.Handle.
func (s *Store) GetAgent(ctx context.Context, ref store.AgentRef) (domain.Agent, error) {
	arg := dbsqlc.GetAgentParams{ID: ref.ID}
	switch {
	case ref.ID != "":
	case ref.Handle != "":
		arg.Handle = ref.Handle
	default:
		return domain.Agent{}, fmt.Errorf("get agent: empty ref: %w", domain.ErrNotFound)
	}
	r, err := s.rq.GetAgent(ctx, arg)
	a, err := storeutil.OneErr(r, err, agentFrom)
	return a, mapErr("get agent", err)
}

// ListAgents implements store.Store.
func (s *Store) ListAgents(ctx context.Context, p store.ListAgentsParams) ([]domain.Agent, error) {
	rows, err := s.rq.ListAgents(ctx, p.OwnerID)
	out, err := storeutil.AllErr(rows, err, agentFrom)
	return out, mapErr("list agents", err)
}

// agentGate reports why a change to agent id cannot proceed: ErrNotFound
// when there is no such agent, ErrConflict when it is revoked, nil otherwise.
func (s *Store) agentGate(ctx context.Context, tx *sql.Tx, what, id string) error {
	revoked, err := s.txq(tx).AgentRevokedAt(ctx, id)
	if err != nil {
		return mapErr(what, err)
	}
	if revoked.Valid {
		return fmt.Errorf("%s: agent revoked: %w", what, domain.ErrConflict)
	}
	return nil
}

// UpdateAgent implements store.Store.
func (s *Store) UpdateAgent(ctx context.Context, p store.UpdateAgentParams) (domain.Agent, error) {
	var a domain.Agent
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := s.agentGate(ctx, tx, "update agent", p.ID); err != nil {
			return err
		}
		q := s.txq(tx)
		arg := dbsqlc.UpdateAgentParams{ID: p.ID, Now: micros(p.Now), Name: toNullStr(p.Name),
			BillingMode: toNullStr(p.BillingMode), ToolClass: toNullStr(p.ToolClass), OwnerID: toNullStr(p.OwnerID)}
		if p.BillingModes != nil {
			arg.BillingModes = sql.NullString{String: encodeList(*p.BillingModes), Valid: true}
		}
		if p.Active != nil {
			arg.Active = sql.NullInt64{Int64: boolInt(*p.Active), Valid: true}
		}
		r, err := q.UpdateAgent(ctx, arg)
		if err != nil {
			return mapErr("update agent", err)
		}
		if a, err = agentFrom(r); err != nil {
			return mapErr("update agent", err)
		}
		if p.OwnerID != nil {
			if err := q.MoveAgentHooks(ctx, dbsqlc.MoveAgentHooksParams{AgentID: p.ID, OwnerID: *p.OwnerID,
				Now: micros(p.Now)}); err != nil {
				return mapErr("update agent: move its hooks", err)
			}
			to := *p.OwnerID
			if err := storeutil.HandOverPools(mapErr, func() error {
				return q.GrantPoolsOnHandOver(ctx, dbsqlc.GrantPoolsOnHandOverParams{GrantedBy: p.By, At: micros(p.Now), AgentID: p.ID, OwnerID: to})
			}, func() error {
				return q.RegrantPoolMembers(ctx, dbsqlc.RegrantPoolMembersParams{AgentID: p.ID, OwnerID: to})
			}, func() (int64, error) {
				return q.DeletePoolGrant(ctx, dbsqlc.DeletePoolGrantParams{AgentID: p.ID, PersonID: to})
			}); err != nil {
				return err
			}
		}
		if p.Audit != nil {
			_, err = s.appendAudit(ctx, tx, p.Now, *p.Audit)
		}
		return err
	})
	return a, err
}

// RevokeAgent implements store.Store (design: Revocation of agents; DELETE /v1/agents/{ref}):
// revoked_at = Now, active = false, every live credential revoked.
func (s *Store) RevokeAgent(ctx context.Context, p store.RevokeAgentParams) (domain.Agent, error) {
	var a domain.Agent
	err := s.writeAudited(ctx, p.Now, p.Audit, func(tx *sql.Tx) error {
		if err := s.agentGate(ctx, tx, "revoke agent", p.ID); err != nil {
			return err
		}
		q := s.txq(tx)
		now := nullMicros(&p.Now)
		r, err := q.UpdateAgent(ctx, dbsqlc.UpdateAgentParams{ID: p.ID, Now: now.Int64, RevokedAt: now,
			Active: sql.NullInt64{Valid: true}})
		if err != nil {
			return mapErr("revoke agent", err)
		}
		if a, err = agentFrom(r); err != nil {
			return mapErr("revoke agent", err)
		}
		if _, err := q.RevokeCredentials(ctx, dbsqlc.RevokeCredentialsParams{AgentID: p.ID, Now: now}); err != nil {
			return mapErr("revoke agent credentials", err)
		}
		return nil
	})
	return a, err
}

// RotateCredential implements store.Store (design: Agents and handles; rotate). The ids
// come back sorted.
func (s *Store) RotateCredential(ctx context.Context, p store.RotateCredentialParams) ([]string, error) {
	var revoked []string
	err := s.writeAudited(ctx, p.Now, p.Audit, func(tx *sql.Tx) error {
		if err := s.agentGate(ctx, tx, "rotate credential", p.AgentID); err != nil {
			return err
		}
		q := s.txq(tx)
		var err error
		revoked, err = q.RevokeCredentials(ctx, dbsqlc.RevokeCredentialsParams{AgentID: p.AgentID, Now: nullMicros(&p.Now)})
		if err != nil {
			return mapErr("rotate credential", err)
		}
		revoked = storeutil.Strings(revoked)
		slices.Sort(revoked)
		s.hashes.add(p.CredentialHash)
		if err := q.InsertCredential(ctx, dbsqlc.InsertCredentialParams{ID: p.CredentialID, AgentID: p.AgentID,
			Hash: p.CredentialHash, CreatedAt: micros(p.Now)}); err != nil {
			return mapErr("rotate credential", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return revoked, nil
}

// AgentByCredentialHash implements store.Store.
func (s *Store) AgentByCredentialHash(ctx context.Context, hash string) (domain.Agent, string, error) {
	r, err := s.rq.AgentByCredentialHash(ctx, hash)
	if err != nil {
		return domain.Agent{}, "", mapErr("agent by credential", err)
	}
	a, err := agentFrom(r.Agent)
	if err != nil {
		return domain.Agent{}, "", mapErr("agent by credential", err)
	}
	return a, r.CredentialID, nil
}

// Intake (design: Hooks): hooks and their deliveries over the generated
// queries (sql/queries.sql).

func hookFrom(r dbsqlc.Hook) (domain.Hook, error) {
	f, err := storeutil.DecodeFilter(r.Filter)
	if err != nil {
		return domain.Hook{}, err
	}
	return domain.Hook{ID: r.ID, OwnerID: r.OwnerID, AgentID: r.AgentID, Kind: r.Kind, Queue: r.Queue, Filter: f,
		TitleTemplate: r.TitleTemplate, KindLabel: r.KindLabel, Secret: r.Secret,
		CreatedAt: fromMicros(r.CreatedAt), UpdatedAt: fromMicros(r.UpdatedAt)}, nil
}

func deliveryFrom(r dbsqlc.HookDelivery) domain.HookDelivery {
	return domain.HookDelivery{ID: r.ID, HookID: r.HookID, Key: r.Key, Event: r.Event, Action: r.Action,
		Outcome: r.Outcome, Reason: r.Reason, TodoID: r.TodoID, ReceivedAt: fromMicros(r.ReceivedAt)}
}

// CreateHook implements store.HookStore.
func (s *Store) CreateHook(ctx context.Context, p store.CreateHookParams) error {
	h := p.Hook
	return s.writeAudited(ctx, h.CreatedAt, p.Audit, func(tx *sql.Tx) error {
		err := s.txq(tx).InsertHook(ctx, dbsqlc.InsertHookParams{ID: h.ID, OwnerID: h.OwnerID, AgentID: h.AgentID,
			Kind: h.Kind, Queue: h.Queue, Filter: storeutil.EncodeFilter(h.Filter), TitleTemplate: h.TitleTemplate,
			KindLabel: h.KindLabel, Secret: h.Secret, CreatedAt: micros(h.CreatedAt), UpdatedAt: micros(h.UpdatedAt)})
		if err != nil {
			return mapErr("create hook", err)
		}
		return nil
	})
}

// GetHook implements store.HookStore.
func (s *Store) GetHook(ctx context.Context, id string) (domain.Hook, error) {
	r, err := s.rq.GetHook(ctx, id)
	h, err := storeutil.OneErr(r, err, hookFrom)
	return h, mapErr("get hook", err)
}

// ListHooks implements store.HookStore: oldest first.
func (s *Store) ListHooks(ctx context.Context, p store.ListHooksParams) ([]domain.Hook, error) {
	rows, err := s.rq.ListHooks(ctx, dbsqlc.ListHooksParams{OwnerID: p.OwnerID, AgentID: p.AgentID})
	out, err := storeutil.AllErr(rows, err, hookFrom)
	return out, mapErr("list hooks", err)
}

// RotateHookSecret implements store.HookStore.
func (s *Store) RotateHookSecret(ctx context.Context, p store.RotateHookSecretParams) (domain.Hook, error) {
	var h domain.Hook
	err := s.writeAudited(ctx, p.Now, p.Audit, func(tx *sql.Tx) error {
		r, err := s.txq(tx).RotateHookSecret(ctx, dbsqlc.RotateHookSecretParams{ID: p.ID, Secret: p.Secret, Now: micros(p.Now)})
		if err != nil {
			return mapErr("rotate hook secret", err)
		}
		if h, err = hookFrom(r); err != nil {
			return mapErr("rotate hook secret", err)
		}
		return nil
	})
	return h, err
}

// DeleteHook implements store.HookStore.
func (s *Store) DeleteHook(ctx context.Context, p store.DeleteHookParams) error {
	return s.writeAudited(ctx, p.Now, p.Audit, func(tx *sql.Tx) error {
		n, err := s.txq(tx).DeleteHook(ctx, p.ID)
		if err != nil {
			return mapErr("delete hook", err)
		}
		if n == 0 {
			return fmt.Errorf("delete hook: %w", domain.ErrNotFound)
		}
		return nil
	})
}

// RecordDelivery implements store.HookStore in one write transaction: the
// single writer serialises racing redeliveries, so the key check and the
// insert cannot interleave.
func (s *Store) RecordDelivery(ctx context.Context, p store.RecordDeliveryParams) (store.RecordDeliveryResult, error) {
	var res store.RecordDeliveryResult
	err := s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		d := p.Delivery
		if d.Key != "" {
			prev, err := q.DeliveryByKey(ctx, dbsqlc.DeliveryByKeyParams{HookID: d.HookID, Key: d.Key})
			if err == nil {
				res = store.RecordDeliveryResult{Delivery: deliveryFrom(prev), Duplicate: true}
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return mapErr("record delivery", err)
			}
		}
		if p.Todo != nil {
			t, created, err := s.createTodoTx(ctx, tx, *p.Todo)
			if err != nil {
				return err
			}
			res.Todo, res.Created = t, created
			d.TodoID = t.ID
		}
		err := q.InsertDelivery(ctx, dbsqlc.InsertDeliveryParams{ID: d.ID, HookID: d.HookID, Key: d.Key, Event: d.Event,
			Action: d.Action, Outcome: d.Outcome, Reason: d.Reason, TodoID: d.TodoID, ReceivedAt: micros(d.ReceivedAt)})
		if err != nil {
			return mapErr("record delivery", err)
		}
		res.Delivery = d
		return nil
	})
	if err != nil {
		return store.RecordDeliveryResult{}, err
	}
	return res, nil
}

// ListDeliveries implements store.HookStore: newest first, Limit <= 0
// means 20.
func (s *Store) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) ([]domain.HookDelivery, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.rq.ListDeliveries(ctx, dbsqlc.ListDeliveriesParams{HookID: p.HookID, Limit: int64(limit)})
	return storeutil.All(rows, mapErr("list deliveries", err), deliveryFrom)
}

// PruneDeliveries implements store.HookStore: each batch is one write
// transaction, so other writers wait at most one batch.
func (s *Store) PruneDeliveries(ctx context.Context, p store.PruneDeliveriesParams) (int64, error) {
	return storeutil.Batches(ctx, p.Batch, store.DefaultPruneBatch, func(lim int) (n int64, err error) {
		err = s.write(ctx, func(tx *sql.Tx) error {
			n, err = s.txq(tx).PruneDeliveries(ctx, dbsqlc.PruneDeliveriesParams{Before: micros(p.Before), Lim: int64(lim)})
			return mapErr("prune deliveries", err)
		})
		return n, err
	})
}

// ResealHookSecret implements store.HookStore.
func (s *Store) ResealHookSecret(ctx context.Context, p store.ResealHookSecretParams) (bool, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) (err error) {
		n, err = s.txq(tx).ResealHookSecret(ctx, dbsqlc.ResealHookSecretParams{ID: p.ID, Old: p.Old, Secret: p.New})
		return mapErr("reseal hook secret", err)
	})
	return n == 1, err
}
