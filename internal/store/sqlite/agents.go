package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// Agents and credentials over the generated queries (sql/queries.sql).

// scanAgent scans storeutil.AgentCols into an agent.
func scanAgent(sc scanner) (domain.Agent, error) {
	var r dbsqlc.Agent
	if err := sc.Scan(&r.ID, &r.Handle, &r.OwnerID, &r.Name, &r.Active, &r.RevokedAt, &r.Queues,
		&r.Verbs, &r.BillingMode, &r.BillingModes, &r.ToolClass, &r.CreatedAt, &r.UpdatedAt,
		&r.Shift, &r.PresenceOverride, &r.OverrideUntil, &r.OverrideSetAt, &r.OverrideBy,
		&r.PresenceSeen, &r.PresenceChangedAt, &r.PresenceChangedBy, &r.State, &r.LastHeartbeatAt,
		&r.ReportedBillingMode, &r.ReportedToolClass, &r.ReportedRuntimeVersion, &r.ReportedState,
		&r.ProjectReadiness, &r.Handoff, &r.SelfClockInCap, &r.SelfInStretch, &r.SelfInUsed,
		&r.FirstStreamAt); err != nil {
		return domain.Agent{}, err
	}
	return agentFrom(r)
}

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
	return s.write(ctx, func(tx *sql.Tx) error {
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
		_, err = s.appendAudit(ctx, tx, a.CreatedAt, p.Audit)
		return err
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
	err := s.write(ctx, func(tx *sql.Tx) error {
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
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return a, err
}

// RotateCredential implements store.Store (design: Agents and handles; rotate). The ids
// come back sorted.
func (s *Store) RotateCredential(ctx context.Context, p store.RotateCredentialParams) ([]string, error) {
	var revoked []string
	err := s.write(ctx, func(tx *sql.Tx) error {
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
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
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
