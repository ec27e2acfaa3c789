package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// Agents and credentials over the generated queries (sql/queries.sql).

// scanAgent scans storeutil.AgentCols into an agent.
func scanAgent(row storeutil.Scanner) (domain.Agent, error) {
	var r dbsqlc.Agent
	if err := row.Scan(&r.ID, &r.Handle, &r.OwnerID, &r.Name, &r.Active, &r.RevokedAt, &r.Queues,
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
	return s.tx(ctx, func(tx pgx.Tx) error {
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
		_, err = appendAudit(ctx, tx, a.CreatedAt, p.Audit)
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
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
		_, err = appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return a, err
}

// RotateCredential implements store.Store (design: Agents and handles; rotate). The ids
// come back sorted.
func (s *Store) RotateCredential(ctx context.Context, p store.RotateCredentialParams) ([]string, error) {
	var revoked []string
	err := s.tx(ctx, func(tx pgx.Tx) error {
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
		_, err = appendAudit(ctx, tx, p.Now, p.Audit)
		return err
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
