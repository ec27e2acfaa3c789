package pools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Pool grants (design: Pool grants): an agent's owner lets another person
// make the agent a member of their pools; revoking the grant takes it out
// of them again.

// grantedAgent loads the agent whose pool grants the person manages: their
// own, or, for an admin, any agent. Anything else answers not_found
// (design: Owner only).
func (ps *Pools) grantedAgent(ctx context.Context, by domain.Person, ref string) (domain.Agent, error) {
	if !by.Admin {
		return ps.agents.OwnedAgent(ctx, by, ref)
	}
	return ps.agents.AgentByRef(ctx, ref)
}

// GrantPool lets the person in.Person (an id) make the agent ref a member
// of their pools. The agent's owner grants; an admin may grant any agent,
// but not another person's to themself. Granting twice answers the stored
// grant and false (no write, no audit entry); a new grant is audited as
// pool.grant and answers true. Errors: not_found (agent), conflict
// (revoked agent), invalid_argument at /person (missing, unknown or
// deactivated person, or the agent's owner), forbidden (reason
// grant_to_self).
func (ps *Pools) GrantPool(ctx context.Context, by domain.Person, ref string, in wire.PoolGrantInput) (domain.PoolGrant, bool, error) {
	a, err := ps.grantedAgent(ctx, by, ref)
	if err != nil {
		return domain.PoolGrant{}, false, err
	}
	if a.Revoked() {
		return domain.PoolGrant{}, false, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it cannot be granted", a.Handle)
	}
	if in.Person == "" {
		return domain.PoolGrant{}, false, domain.Errorf(domain.CodeInvalidArgument, "person is required: the id of the person whose pools may take the agent").At("/person")
	}
	if err := ps.activePerson(ctx, in.Person); err != nil {
		return domain.PoolGrant{}, false, err
	}
	if in.Person == a.OwnerID {
		return domain.PoolGrant{}, false, domain.Errorf(domain.CodeInvalidArgument,
			"person %q owns agent %s: their pools take it without a grant", in.Person, a.Handle).At("/person")
	}
	if in.Person == by.ID {
		// An admin who granted themself another person's agent would steer it.
		return domain.PoolGrant{}, false, &domain.Error{Code: domain.CodeForbidden, Reason: "grant_to_self", Pointer: "/person",
			Detail: "an admin cannot grant another person's agent to themself; its owner grants it"}
	}
	g := domain.PoolGrant{AgentID: a.ID, PersonID: in.Person, GrantedBy: by.ID, CreatedAt: ps.now()}
	got, created, err := ps.store.GrantPool(ctx, store.GrantPoolParams{Grant: g, Audit: domain.AuditRecord{
		Actor: "operator:" + by.ID, Action: "pool.grant", AgentID: a.ID,
		Data: map[string]any{"handle": a.Handle, "person": in.Person}}})
	if err != nil {
		return domain.PoolGrant{}, false, domain.StoreError(err, fmt.Sprintf("agent %q not found", ref), "")
	}
	if created {
		ps.log.Info("pool grant", "agent", a.Handle, "agent_id", a.ID, "person", in.Person, "by", by.ID)
	}
	got.AgentHandle = a.Handle
	return got, created, nil
}

// activePerson answers invalid_argument at /person unless id is an active
// person.
func (ps *Pools) activePerson(ctx context.Context, id string) error {
	bad := domain.Errorf(domain.CodeInvalidArgument, "person %q is not an active person (a person id; GET /v1/persons lists them for an admin)", id).At("/person")
	if !utf8.ValidString(id) || strings.ContainsRune(id, 0) || len(id) > 200 {
		return bad
	}
	p, err := ps.store.GetPerson(ctx, id)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && !p.Active) {
		return bad
	}
	return err
}

// ListPoolGrants lists the pool grants of the agent ref (its owner's, or
// any agent's for an admin), oldest first. Errors: not_found.
func (ps *Pools) ListPoolGrants(ctx context.Context, by domain.Person, ref string) ([]domain.PoolGrant, error) {
	a, err := ps.grantedAgent(ctx, by, ref)
	if err != nil {
		return nil, err
	}
	gs, err := ps.store.ListPoolGrants(ctx, store.ListPoolGrantsParams{AgentID: a.ID})
	for i := range gs {
		gs[i].AgentHandle = a.Handle
	}
	return gs, err
}

// RevokePoolGrant deletes the agent's grant to the person and, in the same
// transaction, takes the agent out of every pool of that person it joined
// through it: a pooled todo it holds keeps its lease (it may renew,
// complete or fail it), and the pooled todos rung at it are routed again
// at once (design: Pool grants, Pool routing). Audited as
// pool.revoke_grant with the pools left and the todos unrung. Its owner
// revokes, or an admin. Errors: not_found (agent, or no such grant).
func (ps *Pools) RevokePoolGrant(ctx context.Context, by domain.Person, ref, person string) (domain.PoolGrant, error) {
	a, err := ps.grantedAgent(ctx, by, ref)
	if err != nil {
		return domain.PoolGrant{}, err
	}
	res, err := ps.store.RevokePoolGrant(ctx, store.RevokePoolGrantParams{AgentID: a.ID, PersonID: person, Now: ps.now(),
		Audit: func(r store.RevokedPoolGrant) domain.AuditRecord {
			return domain.AuditRecord{Actor: "operator:" + by.ID, Action: "pool.revoke_grant", AgentID: a.ID,
				Data: map[string]any{"handle": a.Handle, "person": person, "pools": r.Pools, "unrung": r.Unrung}}
		}})
	if err != nil {
		return domain.PoolGrant{}, domain.StoreError(err, fmt.Sprintf("agent %q has no pool grant to person %q", ref, person), "")
	}
	ps.log.Info("pool grant revoked", "agent", a.Handle, "agent_id", a.ID, "person", person, "pools", len(res.Pools), "unrung", len(res.Unrung), "by", by.ID)
	for _, id := range res.Unrung {
		ps.router.RoutePooledID(ctx, id)
	}
	res.Grant.AgentHandle = a.Handle
	return res.Grant, nil
}
