package app

import (
	"context"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/paging"
	"github.com/rollcall/rollcall/internal/store"
)

// maxAuditLimit bounds one read of the audit log (entries).
const maxAuditLimit = 1000

// ListAudit returns audit entries in ascending seq. With an agent ref the
// person must own the agent; without one only an admin may read the whole
// log (forbidden otherwise).
func (s *Service) ListAudit(ctx context.Context, by domain.Person, f AuditFilter) ([]domain.AuditEntry, error) {
	limit, err := paging.Limit(f.Limit, 100, maxAuditLimit)
	if err != nil {
		return nil, err
	}
	p := store.ListAuditParams{AfterSeq: f.AfterSeq, Limit: limit}
	if f.AgentRef != "" {
		a, err := s.OwnedAgent(ctx, by, f.AgentRef)
		if err != nil {
			return nil, err
		}
		p.AgentID = a.ID
	} else if !by.Admin {
		return nil, domain.Errorf(domain.CodeForbidden, "reading the whole audit log needs an admin; pass agent=<ref> for your own agents")
	}
	return s.store.ListAudit(ctx, p)
}

// VerifyAudit walks the whole hash chain and reports breaks. An admin sees
// the whole chain; a member's answer counts and names only the entries of
// its own agents, and a break elsewhere is one warning without sequence
// numbers (it reveals nothing about other persons' activity).
func (s *Service) VerifyAudit(ctx context.Context, by domain.Person) (domain.AuditVerifyResult, error) {
	if by.Admin {
		return s.store.VerifyAudit(ctx, store.VerifyAuditParams{})
	}
	mine, err := s.store.ListAgents(ctx, store.ListAgentsParams{OwnerID: by.ID})
	if err != nil {
		return domain.AuditVerifyResult{}, err
	}
	ids := make([]string, len(mine))
	for i, a := range mine {
		ids[i] = a.ID
	}
	return s.store.VerifyAudit(ctx, store.VerifyAuditParams{Scoped: true, AgentIDs: ids})
}
