package app

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Who may do what: the owner-only rule (design: Owner only) and the admin
// rule every use case applies before it reads or writes.

var errUnauthenticated = &domain.Error{Code: domain.CodeUnauthenticated, Detail: "missing or invalid bearer token"}

func requireAdmin(by domain.Person, what string) error {
	if !by.Admin {
		return &domain.Error{Code: domain.CodeForbidden, Reason: "admin_required", Detail: what + " needs an admin"}
	}
	return nil
}

// ParseRef turns a path reference into an AgentRef: a UUID is an id,
// anything else a handle.
func ParseRef(ref string) store.AgentRef {
	if len(ref) == 36 && strings.Count(ref, "-") == 4 {
		return store.AgentRef{ID: ref}
	}
	return store.AgentRef{Handle: ref}
}

// OwnedAgent loads an agent the person owns. Another person's agent and an
// unknown ref both answer not_found, so refs do not leak (design: Owner only).
func (s *Service) OwnedAgent(ctx context.Context, by domain.Person, ref string) (domain.Agent, error) {
	a, err := s.AgentByRef(ctx, ref)
	if err == nil && a.OwnerID != by.ID {
		return domain.Agent{}, domain.Errorf(domain.CodeNotFound, "agent %q not found", ref)
	}
	return a, err
}

// AgentByRef loads any agent by id or handle, whoever owns it: for the
// admin's routes and the pool grants' checks (internal/pools), never an
// answer to a person as such (design: Owner only). An unknown or malformed
// ref answers not_found.
func (s *Service) AgentByRef(ctx context.Context, ref string) (domain.Agent, error) {
	if !utf8.ValidString(ref) || strings.ContainsRune(ref, 0) || len(ref) > 200 {
		return domain.Agent{}, domain.Errorf(domain.CodeNotFound, "agent %q not found", ref)
	}
	a, err := s.store.GetAgent(ctx, ParseRef(ref))
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Agent{}, domain.Errorf(domain.CodeNotFound, "agent %q not found", ref)
	}
	return a, err
}
