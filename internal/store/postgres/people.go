package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// Persons, personal tokens and console sessions (design: Persons and roles) over the
// generated queries (sql/queries.sql).

// lockPersons serialises the person changes (UpdatePerson), whose rule
// reads the active admins (design: Last active admin).
const lockPersons int64 = 0x726f6c6c63616c09

// personFrom turns a row into a person, every time in UTC.
func personFrom(r dbsqlc.Person) domain.Person {
	p := domain.Person{ID: r.ID, Name: r.Name, Admin: r.Admin, CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(), DeactivatedAt: utcPtr(r.DeactivatedAt)}
	p.Active = p.DeactivatedAt == nil
	if p.Admin {
		p.Role = domain.RoleAdmin
	} else {
		p.Role = domain.RoleMember
	}
	return p
}

func tokenFrom(r dbsqlc.PersonToken) domain.PersonToken {
	return domain.PersonToken{ID: r.ID, PersonID: r.PersonID, Name: r.Name, CreatedAt: r.CreatedAt.UTC(),
		ExpiresAt: utcPtr(r.ExpiresAt), LastUsedAt: utcPtr(r.LastUsedAt), RevokedAt: utcPtr(r.RevokedAt)}
}

func insertToken(ctx context.Context, q *dbsqlc.Queries, t domain.PersonToken, hash string) error {
	err := q.InsertToken(ctx, dbsqlc.InsertTokenParams{ID: t.ID, PersonID: t.PersonID, Name: t.Name, Hash: hash,
		CreatedAt: micro(t.CreatedAt), ExpiresAt: storeutil.MicroPtr(t.ExpiresAt)})
	return mapErr("create token", err)
}

// BootstrapAdmin implements store.Store (design: Bootstrap admin). An
// advisory lock makes concurrent first starts create one person.
func (s *Store) BootstrapAdmin(ctx context.Context, p store.BootstrapAdminParams) (bool, error) {
	created := false
	err := s.tx(ctx, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.AdvisoryXactLock(ctx, lockBootstrap); err != nil {
			return mapErr("bootstrap admin", err)
		}
		exists, err := q.AnyPerson(ctx)
		if err != nil {
			return mapErr("bootstrap admin", err)
		}
		if exists {
			return nil
		}
		at := micro(p.Person.CreatedAt)
		if err := q.InsertPerson(ctx, dbsqlc.InsertPersonParams{ID: p.Person.ID, Name: p.Person.Name, Admin: true,
			CreatedAt: at}); err != nil {
			return mapErr("bootstrap admin", err)
		}
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
	return s.txAudited(ctx, p.Person.CreatedAt, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.InsertPerson(ctx, dbsqlc.InsertPersonParams{ID: p.Person.ID, Name: p.Person.Name,
			Admin: p.Person.Admin, CreatedAt: micro(p.Person.CreatedAt)}); err != nil {
			return mapErr("create person", err)
		}
		if err := insertToken(ctx, q, p.Token, p.TokenHash); err != nil {
			return err
		}
		return nil
	})
}

// GetPerson implements store.Store.
func (s *Store) GetPerson(ctx context.Context, id string) (domain.Person, error) {
	r, err := s.q.GetPerson(ctx, id)
	return storeutil.One(r, mapErr("get person", err), personFrom)
}

// ListPersons implements store.Store.
func (s *Store) ListPersons(ctx context.Context) ([]domain.Person, error) {
	rows, err := s.q.ListPersons(ctx)
	return storeutil.All(rows, mapErr("list persons", err), personFrom)
}

// UpdatePerson implements store.Store: the use case's Change decides
// (design: Last active admin); lockPersons serialises every person change
// across instances, so Change sees the admins as the last change left them.
func (s *Store) UpdatePerson(ctx context.Context, p store.UpdatePersonParams) (domain.Person, error) {
	var out domain.Person
	err := s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if err := q.AdvisoryXactLock(ctx, lockPersons); err != nil {
			return mapErr("update person", err)
		}
		r, err := q.GetPerson(ctx, p.ID)
		if err != nil {
			return mapErr("update person", err)
		}
		others, err := q.CountOtherActiveAdmins(ctx, p.ID)
		if err != nil {
			return mapErr("update person", err)
		}
		now := micro(p.Now)
		next, deact, err := storeutil.ChangePerson(personFrom(r), others, now, p.Change)
		if err != nil {
			return err
		}
		r, err = q.UpdatePerson(ctx, dbsqlc.UpdatePersonParams{ID: p.ID, Name: &next.Name, Admin: next.Admin, DeactivatedAt: deact, Now: now})
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
	return s.txAudited(ctx, p.Token.CreatedAt, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		if _, err := q.GetPerson(ctx, p.Token.PersonID); err != nil {
			return mapErr("create token: person", err)
		}
		if err := insertToken(ctx, q, p.Token, p.Hash); err != nil {
			return err
		}
		return nil
	})
}

// ListTokens implements store.Store.
func (s *Store) ListTokens(ctx context.Context, personID string) ([]domain.PersonToken, error) {
	rows, err := s.q.ListTokens(ctx, personID)
	return storeutil.All(rows, mapErr("list tokens", err), tokenFrom)
}

// RevokeToken implements store.Store.
func (s *Store) RevokeToken(ctx context.Context, p store.RevokeTokenParams) (domain.PersonToken, error) {
	var t domain.PersonToken
	err := s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		now := micro(p.Now)
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
	r, err := s.q.TokenWithPerson(ctx, dbsqlc.TokenWithPersonParams{Hash: hash})
	return personAndToken(r, mapErr("token by hash", err))
}

// TokenByID implements store.Store.
func (s *Store) TokenByID(ctx context.Context, id string) (domain.Person, domain.PersonToken, error) {
	r, err := s.q.TokenWithPerson(ctx, dbsqlc.TokenWithPersonParams{ID: id})
	return personAndToken(r, mapErr("token by id", err))
}

// TouchToken implements store.Store.
func (s *Store) TouchToken(ctx context.Context, p store.TouchTokenParams) error {
	err := s.q.TouchToken(ctx, dbsqlc.TouchTokenParams{ID: p.ID, At: micro(p.At), NotAfter: micro(p.At.Add(-p.Every))})
	return mapErr("touch token", err)
}

// CreateConsoleSession implements store.Store.
func (s *Store) CreateConsoleSession(ctx context.Context, cs domain.ConsoleSession) error {
	err := s.q.InsertConsoleSession(ctx, dbsqlc.InsertConsoleSessionParams{ID: cs.ID, PersonID: cs.PersonID,
		TokenID: cs.TokenID, CreatedAt: micro(cs.CreatedAt), ExpiresAt: micro(cs.ExpiresAt)})
	return mapErr("create console session", err)
}

// ConsoleSessionByID implements store.Store.
func (s *Store) ConsoleSessionByID(ctx context.Context, id string) (domain.ConsoleSession, domain.PersonToken, domain.Person, error) {
	r, err := s.q.ConsoleSessionByID(ctx, id)
	if err != nil {
		return domain.ConsoleSession{}, domain.PersonToken{}, domain.Person{}, mapErr("console session", err)
	}
	c := r.ConsoleSession
	cs := domain.ConsoleSession{ID: c.ID, PersonID: c.PersonID, TokenID: c.TokenID, CreatedAt: c.CreatedAt.UTC(),
		ExpiresAt: c.ExpiresAt.UTC(), EndedAt: utcPtr(c.EndedAt)}
	return cs, tokenFrom(r.PersonToken), personFrom(r.Person), nil
}

// EndConsoleSession implements store.Store.
func (s *Store) EndConsoleSession(ctx context.Context, id string, at time.Time) error {
	err := s.q.EndConsoleSession(ctx, dbsqlc.EndConsoleSessionParams{ID: id, At: micro(at)})
	return mapErr("end console session", err)
}

// LiveCredentials implements store.Store: one query for all ids.
func (s *Store) LiveCredentials(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	live, err := s.q.LiveCredentials(ctx, ids)
	if err != nil {
		return nil, mapErr("live credentials", err)
	}
	for _, id := range live {
		out[id] = true
	}
	return out, nil
}

// CredentialMayAuthenticate implements store.Store.
func (s *Store) CredentialMayAuthenticate(ctx context.Context, hash string) (bool, error) {
	ok, err := s.q.CredentialMayAuthenticate(ctx, hash)
	return ok, mapErr("credential may authenticate", err)
}

// TokenMayAuthenticate implements store.Store.
func (s *Store) TokenMayAuthenticate(ctx context.Context, hash string, now time.Time) (bool, error) {
	ok, err := s.q.TokenMayAuthenticate(ctx, dbsqlc.TokenMayAuthenticateParams{Hash: hash, Now: micro(now)})
	return ok, mapErr("token may authenticate", err)
}

// Agents and credentials over the generated queries (sql/queries.sql).

// scanAgent scans a row of storeutil.AgentCols into a agent.
var scanAgent = storeutil.ScanRowErr(storeutil.AgentCols, agentFrom)

// agentFrom turns a row into an agent with its Presence and Liveness
// filled, every time in UTC.
func agentFrom(r dbsqlc.Agent) (domain.Agent, error) {
	a := domain.Agent{ID: r.ID, Handle: r.Handle, OwnerID: r.OwnerID, Name: r.Name, Active: r.Active,
		RevokedAt: utcPtr(r.RevokedAt), BillingMode: r.BillingMode, ToolClass: r.ToolClass,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Scope:          domain.Scope{Queues: storeutil.Strings(r.Queues), Verbs: storeutil.Strings(r.Verbs)},
		BillingModes:   storeutil.Strings(r.BillingModes),
		SelfClockInCap: domain.ClockInCap(time.Duration(r.SelfClockInCap) * time.Second)}
	a.Presence = domain.PresenceColumns{Shift: deref(r.Shift), Override: deref(r.PresenceOverride),
		OverrideUntil: utcPtr(r.OverrideUntil), OverrideSetAt: utcPtr(r.OverrideSetAt),
		OverrideBy: deref(r.OverrideBy), Seen: r.PresenceSeen, ChangedAt: utcPtr(r.PresenceChangedAt),
		ChangedBy: deref(r.PresenceChangedBy), SelfInStretch: utcPtr(r.SelfInStretch),
		SelfInUsed: time.Duration(r.SelfInUsed) * time.Second}
	a.Liveness = domain.LivenessColumns{State: r.State, LastHeartbeatAt: utcPtr(r.LastHeartbeatAt),
		ReportedBillingMode: r.ReportedBillingMode, ReportedToolClass: r.ReportedToolClass,
		ReportedRuntimeVersion: r.ReportedRuntimeVersion, ReportedState: rawBytes(r.ReportedState),
		ProjectReadiness: rawBytes(r.ProjectReadiness)}
	var err error
	if a.Scope.Handoff, err = storeutil.DecodeHandoff(r.Handoff); err != nil {
		return domain.Agent{}, err
	}
	return a, nil
}

// CreateAgent implements store.Store (design: Agents and handles; vend).
func (s *Store) CreateAgent(ctx context.Context, p store.CreateAgentParams) error {
	a := p.Agent
	return s.txAudited(ctx, a.CreatedAt, p.Audit, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		err := q.InsertAgent(ctx, dbsqlc.InsertAgentParams{ID: a.ID, Handle: a.Handle, OwnerID: a.OwnerID,
			Name: a.Name, Active: a.Active, RevokedAt: storeutil.MicroPtr(a.RevokedAt),
			Queues: storeutil.Strings(a.Scope.Queues), Verbs: storeutil.Strings(a.Scope.Verbs),
			BillingMode: a.BillingMode, BillingModes: storeutil.Strings(a.BillingModes), ToolClass: a.ToolClass,
			CreatedAt: micro(a.CreatedAt), UpdatedAt: micro(a.UpdatedAt), Handoff: storeutil.EncodeHandoff(a.Scope.Handoff)})
		if err != nil {
			return mapErr("create agent", err)
		}
		err = q.InsertCredential(ctx, dbsqlc.InsertCredentialParams{ID: p.CredentialID, AgentID: a.ID,
			Hash: p.CredentialHash, CreatedAt: micro(a.CreatedAt)})
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
	r, err := s.q.GetAgent(ctx, arg)
	a, err := storeutil.OneErr(r, err, agentFrom)
	return a, mapErr("get agent", err)
}

// ListAgents implements store.Store.
func (s *Store) ListAgents(ctx context.Context, p store.ListAgentsParams) ([]domain.Agent, error) {
	rows, err := s.q.ListAgents(ctx, p.OwnerID)
	out, err := storeutil.AllErr(rows, err, agentFrom)
	return out, mapErr("list agents", err)
}

// agentGate locks agent id's row for the rest of tx and reports why a change
// cannot proceed: ErrNotFound when missing, ErrConflict when revoked.
func agentGate(ctx context.Context, tx pgx.Tx, what, id string) error {
	revoked, err := dbsqlc.New(tx).LockAgent(ctx, id)
	if err != nil {
		return mapErr(what, err)
	}
	if revoked != nil {
		return fmt.Errorf("%s: agent revoked: %w", what, domain.ErrConflict)
	}
	return nil
}

// UpdateAgent implements store.Store.
func (s *Store) UpdateAgent(ctx context.Context, p store.UpdateAgentParams) (domain.Agent, error) {
	var a domain.Agent
	err := s.tx(ctx, func(tx pgx.Tx) error {
		if err := agentGate(ctx, tx, "update agent", p.ID); err != nil {
			return err
		}
		q := dbsqlc.New(tx)
		arg := dbsqlc.UpdateAgentParams{ID: p.ID, Now: micro(p.Now), Name: p.Name, BillingMode: p.BillingMode,
			ToolClass: p.ToolClass, Active: p.Active, OwnerID: p.OwnerID}
		if p.BillingModes != nil {
			arg.BillingModes = storeutil.Strings(*p.BillingModes)
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
				Now: micro(p.Now)}); err != nil {
				return mapErr("update agent: move its hooks", err)
			}
			to := *p.OwnerID
			if err := storeutil.HandOverPools(mapErr, func() error {
				return q.GrantPoolsOnHandOver(ctx, dbsqlc.GrantPoolsOnHandOverParams{GrantedBy: p.By, At: micro(p.Now), AgentID: p.ID, OwnerID: to})
			}, func() error {
				return q.RegrantPoolMembers(ctx, dbsqlc.RegrantPoolMembersParams{AgentID: p.ID, OwnerID: to})
			}, func() (int64, error) {
				return q.DeletePoolGrant(ctx, dbsqlc.DeletePoolGrantParams{AgentID: p.ID, PersonID: to})
			}); err != nil {
				return err
			}
		}
		if p.Audit != nil {
			_, err = appendAudit(ctx, tx, p.Now, *p.Audit)
		}
		return err
	})
	return a, err
}

// RevokeAgent implements store.Store (design: Revocation of agents; DELETE /v1/agents/{ref}):
// revoked_at = Now, active = false, every live credential revoked.
func (s *Store) RevokeAgent(ctx context.Context, p store.RevokeAgentParams) (domain.Agent, error) {
	var a domain.Agent
	err := s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		if err := agentGate(ctx, tx, "revoke agent", p.ID); err != nil {
			return err
		}
		q := dbsqlc.New(tx)
		now := micro(p.Now)
		r, err := q.UpdateAgent(ctx, dbsqlc.UpdateAgentParams{ID: p.ID, Now: now, RevokedAt: &now, Active: new(false)})
		if err != nil {
			return mapErr("revoke agent", err)
		}
		if a, err = agentFrom(r); err != nil {
			return mapErr("revoke agent", err)
		}
		if _, err := q.RevokeCredentials(ctx, dbsqlc.RevokeCredentialsParams{AgentID: p.ID, Now: &now}); err != nil {
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
	err := s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		if err := agentGate(ctx, tx, "rotate credential", p.AgentID); err != nil {
			return err
		}
		q := dbsqlc.New(tx)
		now := micro(p.Now)
		var err error
		revoked, err = q.RevokeCredentials(ctx, dbsqlc.RevokeCredentialsParams{AgentID: p.AgentID, Now: &now})
		if err != nil {
			return mapErr("rotate credential", err)
		}
		revoked = storeutil.Strings(revoked)
		slices.Sort(revoked)
		if err := q.InsertCredential(ctx, dbsqlc.InsertCredentialParams{ID: p.CredentialID, AgentID: p.AgentID,
			Hash: p.CredentialHash, CreatedAt: now}); err != nil {
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
	r, err := s.q.AgentByCredentialHash(ctx, hash)
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

// hookFrom turns a row into a hook, every time in UTC.
func hookFrom(r dbsqlc.Hook) (domain.Hook, error) {
	f, err := storeutil.DecodeFilter(r.Filter)
	if err != nil {
		return domain.Hook{}, err
	}
	return domain.Hook{ID: r.ID, OwnerID: r.OwnerID, AgentID: r.AgentID, Kind: r.Kind, Queue: r.Queue, Filter: f,
		TitleTemplate: r.TitleTemplate, KindLabel: r.KindLabel, Secret: r.Secret,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}, nil
}

func deliveryFrom(r dbsqlc.HookDelivery) domain.HookDelivery {
	return domain.HookDelivery{ID: r.ID, HookID: r.HookID, Key: r.Key, Event: r.Event, Action: r.Action,
		Outcome: r.Outcome, Reason: r.Reason, TodoID: r.TodoID, ReceivedAt: r.ReceivedAt.UTC()}
}

// CreateHook implements store.HookStore.
func (s *Store) CreateHook(ctx context.Context, p store.CreateHookParams) error {
	h := p.Hook
	return s.txAudited(ctx, h.CreatedAt, p.Audit, func(tx pgx.Tx) error {
		err := dbsqlc.New(tx).InsertHook(ctx, dbsqlc.InsertHookParams{ID: h.ID, OwnerID: h.OwnerID, AgentID: h.AgentID,
			Kind: h.Kind, Queue: h.Queue, Filter: storeutil.EncodeFilter(h.Filter), TitleTemplate: h.TitleTemplate,
			KindLabel: h.KindLabel, Secret: h.Secret, CreatedAt: micro(h.CreatedAt), UpdatedAt: micro(h.UpdatedAt)})
		if err != nil {
			return mapErr("create hook", err)
		}
		return nil
	})
}

// GetHook implements store.HookStore.
func (s *Store) GetHook(ctx context.Context, id string) (domain.Hook, error) {
	r, err := s.q.GetHook(ctx, id)
	h, err := storeutil.OneErr(r, err, hookFrom)
	return h, mapErr("get hook", err)
}

// ListHooks implements store.HookStore: oldest first.
func (s *Store) ListHooks(ctx context.Context, p store.ListHooksParams) ([]domain.Hook, error) {
	rows, err := s.q.ListHooks(ctx, dbsqlc.ListHooksParams{OwnerID: p.OwnerID, AgentID: p.AgentID})
	out, err := storeutil.AllErr(rows, err, hookFrom)
	return out, mapErr("list hooks", err)
}

// RotateHookSecret implements store.HookStore.
func (s *Store) RotateHookSecret(ctx context.Context, p store.RotateHookSecretParams) (domain.Hook, error) {
	var h domain.Hook
	err := s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		r, err := dbsqlc.New(tx).RotateHookSecret(ctx, dbsqlc.RotateHookSecretParams{ID: p.ID, Secret: p.Secret, Now: micro(p.Now)})
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
	return s.txAudited(ctx, p.Now, p.Audit, func(tx pgx.Tx) error {
		n, err := dbsqlc.New(tx).DeleteHook(ctx, p.ID)
		if err != nil {
			return mapErr("delete hook", err)
		}
		if n == 0 {
			return fmt.Errorf("delete hook: %w", domain.ErrNotFound)
		}
		return nil
	})
}

// RecordDelivery implements store.HookStore in one transaction. The
// delivery row is inserted first: ON CONFLICT on (hook_id, key) makes a
// racing redelivery wait for the first one and then find its row, so only
// one of them creates a todo.
func (s *Store) RecordDelivery(ctx context.Context, p store.RecordDeliveryParams) (store.RecordDeliveryResult, error) {
	var res store.RecordDeliveryResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		d := p.Delivery
		_, err := q.InsertDelivery(ctx, dbsqlc.InsertDeliveryParams{ID: d.ID, HookID: d.HookID, Key: d.Key,
			Event: d.Event, Action: d.Action, Outcome: d.Outcome, Reason: d.Reason, ReceivedAt: micro(d.ReceivedAt)})
		if errors.Is(err, pgx.ErrNoRows) {
			prev, err := q.DeliveryByKey(ctx, dbsqlc.DeliveryByKeyParams{HookID: d.HookID, Key: d.Key})
			if err != nil {
				return mapErr("record delivery", err)
			}
			res = store.RecordDeliveryResult{Delivery: deliveryFrom(prev), Duplicate: true}
			return nil
		}
		if err != nil {
			return mapErr("record delivery", err)
		}
		if p.Todo != nil {
			t, created, err := createTodoQ(ctx, q, *p.Todo)
			if err != nil {
				return err
			}
			res.Todo, res.Created = t, created
			d.TodoID = t.ID
			if err := q.SetDeliveryTodo(ctx, dbsqlc.SetDeliveryTodoParams{ID: d.ID, TodoID: d.TodoID}); err != nil {
				return mapErr("record delivery", err)
			}
		}
		d.ReceivedAt = storeutil.Micro(d.ReceivedAt)
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
	rows, err := s.q.ListDeliveries(ctx, dbsqlc.ListDeliveriesParams{HookID: p.HookID, Limit: int32(min(limit, 1<<31-1))})
	return storeutil.All(rows, mapErr("list deliveries", err), deliveryFrom)
}

// PruneDeliveries implements store.HookStore: each batch is one statement
// in its own implicit transaction.
func (s *Store) PruneDeliveries(ctx context.Context, p store.PruneDeliveriesParams) (int64, error) {
	return storeutil.Batches(ctx, p.Batch, store.DefaultPruneBatch, func(lim int) (int64, error) {
		n, err := s.q.PruneDeliveries(ctx, dbsqlc.PruneDeliveriesParams{Before: micro(p.Before), Lim: int32(min(lim, 1<<31-1))})
		return n, mapErr("prune deliveries", err)
	})
}

// CountFailures implements store.FailureCounter with one upsert
// (design: Limits shared by instances).
func (s *Store) CountFailures(ctx context.Context, p store.CountFailuresParams) ([]store.FailureWindow, error) {
	rows, err := s.q.CountFailures(ctx, dbsqlc.CountFailuresParams{Now: micro(p.Now), Keys: p.Keys, Expired: micro(p.Now.Add(-p.Window))})
	if err != nil {
		return nil, mapErr("count failures", err)
	}
	by := make(map[string]dbsqlc.RateWindow, len(rows))
	for _, r := range rows {
		by[r.Key] = r
	}
	out := make([]store.FailureWindow, len(p.Keys))
	for i, k := range p.Keys {
		r := by[k]
		out[i] = store.FailureWindow{Key: k, Start: r.WindowStart.UTC(), Count: int(r.Count)}
	}
	return out, nil
}

// PruneRateWindows implements store.FailureCounter.
func (s *Store) PruneRateWindows(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.q.PruneRateWindows(ctx, micro(before))
	return n, mapErr("prune rate windows", err)
}

// ResealHookSecret implements store.HookStore.
func (s *Store) ResealHookSecret(ctx context.Context, p store.ResealHookSecretParams) (bool, error) {
	n, err := s.q.ResealHookSecret(ctx, dbsqlc.ResealHookSecretParams{ID: p.ID, Old: p.Old, Secret: p.New})
	return n == 1, mapErr("reseal hook secret", err)
}
