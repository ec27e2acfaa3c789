package app

import (
	"context"
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Persons, roles and personal tokens (design: Persons and roles, Personal tokens, Console sessions).
//
// Rules:
//   - Only an admin creates, lists, re-roles and deactivates persons
//     (forbidden otherwise). The last active admin cannot be demoted or
//     deactivated (conflict, reason last_admin).
//   - A person authenticates with any of its unrevoked, unexpired tokens
//     while it is active. Deactivating a person ends its tokens' use, its
//     console sessions and its event streams; its agents keep working.
//   - Every change is audited: person.create, person.update,
//     person.deactivate, token.create, token.revoke, admin.recover,
//     agent.hand_over.

func (s *Service) mint(personID, name string, expires *time.Time, now time.Time) (domain.PersonToken, string, error) {
	t, err := domain.NewPersonToken(newID(), personID, name, expires, now)
	if err != nil {
		return domain.PersonToken{}, "", err
	}
	return t, NewToken(PersonTokenPrefix), nil
}

// CreatePerson creates a person with its first token (named "first",
// shown once). Admin only. Audited as person.create. Errors: forbidden,
// invalid_argument (/name, /role).
func (s *Service) CreatePerson(ctx context.Context, by domain.Person, in PersonInput) (PersonCreated, error) {
	if err := requireAdmin(by, "creating a person"); err != nil {
		return PersonCreated{}, err
	}
	if err := domain.ValidatePersonName(in.Name); err != nil {
		return PersonCreated{}, err
	}
	if in.Role == "" {
		in.Role = domain.RoleMember
	}
	if err := domain.ValidateRole(in.Role); err != nil {
		return PersonCreated{}, err
	}
	now := s.now()
	p := domain.Person{ID: newID(), Name: in.Name, Active: true, CreatedAt: now, UpdatedAt: now}
	p.SetRole(in.Role)
	tok, secret, err := s.mint(p.ID, "first", nil, now)
	if err != nil {
		return PersonCreated{}, err
	}
	err = s.store.CreatePerson(ctx, store.CreatePersonParams{Person: p, Token: tok, TokenHash: HashToken(secret),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "person.create",
			Data: map[string]any{"person_id": p.ID, "name": p.Name, "role": p.Role, "token_id": tok.ID}}})
	if err != nil {
		return PersonCreated{}, err
	}
	s.log.Info("person created", "person_id", p.ID, "role", p.Role, "by", by.ID)
	return PersonCreated{Person: p, Token: MintedToken{PersonToken: tok, Token: secret}}, nil
}

// ListPersons lists every person, oldest first. Admin only.
func (s *Service) ListPersons(ctx context.Context, by domain.Person) ([]domain.Person, error) {
	if err := requireAdmin(by, "listing persons"); err != nil {
		return nil, err
	}
	return s.store.ListPersons(ctx)
}

// GetPerson returns a person: an admin any, a member only itself
// (not_found otherwise); id "me" is the caller.
func (s *Service) GetPerson(ctx context.Context, by domain.Person, id string) (domain.Person, error) {
	if id == "me" {
		id = by.ID
	}
	if !by.Admin && id != by.ID {
		return domain.Person{}, domain.Errorf(domain.CodeNotFound, "person %q not found", id)
	}
	p, err := s.store.GetPerson(ctx, id)
	return p, storeErr(err, fmt.Sprintf("person %q not found", id), "")
}

// UpdatePerson changes a person's name, role or active flag. Admin only.
// Deactivating (active=false) ends the person's console sessions and event
// streams on every instance; its tokens stop working; its agents keep
// working (an admin may hand them over). Audited as person.update or
// person.deactivate. Nobody deactivates themself (forbidden, reason
// deactivate_self, also for the last admin). Errors: forbidden, not_found,
// invalid_argument, conflict with reason last_admin. id "me" is the caller.
func (s *Service) UpdatePerson(ctx context.Context, by domain.Person, id string, in PersonUpdate) (domain.Person, error) {
	if id == "me" {
		id = by.ID
	}
	if err := requireAdmin(by, "changing a person"); err != nil {
		return domain.Person{}, err
	}
	cur, err := s.store.GetPerson(ctx, id)
	if err != nil {
		return domain.Person{}, storeErr(err, fmt.Sprintf("person %q not found", id), "")
	}
	if in.Name != nil {
		if err := domain.ValidatePersonName(*in.Name); err != nil {
			return domain.Person{}, err
		}
	}
	if in.Role != nil {
		if err := domain.ValidateRole(*in.Role); err != nil {
			return domain.Person{}, err
		}
	}
	if in.Name != nil && *in.Name == cur.Name {
		in.Name = nil
	}
	if in.Role != nil && *in.Role == cur.Role {
		in.Role = nil
	}
	if in.Active != nil && *in.Active == cur.Active {
		in.Active = nil
	}
	if in == (PersonUpdate{}) {
		return cur, nil // nothing changes: no write, no audit entry
	}
	if in.Active != nil && !*in.Active && id == by.ID {
		// Refused before the last-admin rule: whoever asks is told the same.
		return domain.Person{}, &domain.Error{Code: domain.CodeForbidden, Reason: "deactivate_self", Pointer: "/active",
			Detail: "you cannot deactivate yourself; another admin can"}
	}
	action := "person.update"
	if in.Active != nil && !*in.Active {
		action = "person.deactivate"
	}
	// The store runs change under the lock of its write, on the person and
	// the active admins as they are then, so racing changes cannot both
	// take away the last active admin (design: Last active admin).
	change := func(cur domain.Person, activeAdmins int) (domain.Person, error) {
		next := cur
		if in.Name != nil {
			next.Name = *in.Name
		}
		if in.Role != nil {
			next.SetRole(*in.Role)
		}
		if in.Active != nil {
			next.Active = *in.Active
		}
		return next, domain.CheckActiveAdmin(cur, next, activeAdmins)
	}
	p, err := s.store.UpdatePerson(ctx, store.UpdatePersonParams{ID: id, Change: change, Now: s.now(),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: action, Data: map[string]any{"person_id": id, "change": in}}})
	if err != nil {
		return domain.Person{}, storeErr(err, fmt.Sprintf("person %q not found", id), "")
	}
	if !p.Active {
		s.log.Info("person deactivated", "person_id", id, "by", by.ID)
		s.teamSignal(ctx, bus.Team{Kind: bus.TeamPerson, ID: id})
	} else {
		s.teamSignal(ctx, bus.Team{Kind: bus.TeamPersonUpdated, ID: id}) // a role or name cached with its tokens
	}
	return p, nil
}

// CreateToken mints a personal token for the caller (shown once). A token
// never outlives the token of the request that mints it
// (domain.PersonToken.ChildExpiry): from an expiring token, no expires_at
// gives the parent's expiry and a later one is refused. Audited as
// token.create. Errors: invalid_argument (/name, /expires_at).
func (s *Service) CreateToken(ctx context.Context, by domain.Person, in TokenInput) (MintedToken, error) {
	if by.TokenID != "" {
		_, parent, err := s.store.TokenByID(ctx, by.TokenID)
		if err != nil {
			return MintedToken{}, storeErr(err, "the token of this request is gone", "")
		}
		exp, ok := parent.ChildExpiry(in.ExpiresAt)
		if !ok {
			return MintedToken{}, domain.Errorf(domain.CodeInvalidArgument,
				"expires_at must not be after %s, when the token of this request expires", parent.ExpiresAt.UTC().Format(time.RFC3339)).At("/expires_at")
		}
		in.ExpiresAt = exp
	}
	tok, secret, err := s.mint(by.ID, in.Name, in.ExpiresAt, s.now())
	if err != nil {
		return MintedToken{}, err
	}
	err = s.store.CreateToken(ctx, store.CreateTokenParams{Token: tok, Hash: HashToken(secret),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "token.create",
			Data: map[string]any{"token_id": tok.ID, "name": tok.Name, "expires_at": tok.ExpiresAt}}})
	if err != nil {
		return MintedToken{}, storeErr(err, "person not found", "")
	}
	return MintedToken{PersonToken: tok, Token: secret}, nil
}

// ListTokens lists the caller's unrevoked tokens (expired ones included,
// with their expires_at), never the secret.
func (s *Service) ListTokens(ctx context.Context, by domain.Person) ([]domain.PersonToken, error) {
	return s.store.ListTokens(ctx, by.ID)
}

// RevokeToken revokes one of the caller's tokens: REST requests with it
// fail at once, and its console sessions and event streams end on every
// instance within RecheckInterval (at once where the bus signal arrives).
// Audited as token.revoke. Errors: not_found (no such unrevoked token of
// the caller).
func (s *Service) RevokeToken(ctx context.Context, by domain.Person, id string) (domain.PersonToken, error) {
	t, err := s.store.RevokeToken(ctx, store.RevokeTokenParams{PersonID: by.ID, ID: id, Now: s.now(),
		Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: "token.revoke", Data: map[string]any{"token_id": id}}})
	if err != nil {
		return domain.PersonToken{}, storeErr(err, fmt.Sprintf("token %q not found", id), "")
	}
	s.log.Info("token revoked", "token_id", id, "person_id", by.ID)
	s.teamSignal(ctx, bus.Team{Kind: bus.TeamToken, ID: id})
	return t, nil
}

// RecoverAdmin mints a new token for the oldest active admin (or, when no
// admin is active, creates the admin person "recovered-admin") and returns
// it; it is `rollcall admin token --store …`, run on the server host.
// Audited as admin.recover with actor "system:recovery".
func (s *Service) RecoverAdmin(ctx context.Context) (domain.Person, string, error) {
	persons, err := s.store.ListPersons(ctx)
	if err != nil {
		return domain.Person{}, "", err
	}
	if len(persons) == 0 {
		// A store no server ever started on (a mistyped --store, most
		// likely): a token for it would work on no real server.
		return domain.Person{}, "", domain.Errorf(domain.CodeNotFound, "this store has no persons: it is not a Rollcall server's store (check --store), or no server has started on it yet (its first start prints the admin token)")
	}
	now := s.now()
	for _, p := range persons {
		if p.Admin && p.Active {
			tok, secret, err := s.mint(p.ID, "recovered "+now.Format("2006-01-02 15:04:05Z"), nil, now)
			if err != nil {
				return domain.Person{}, "", err
			}
			err = s.store.CreateToken(ctx, store.CreateTokenParams{Token: tok, Hash: HashToken(secret),
				Audit: domain.AuditRecord{Actor: "system:recovery", Action: "admin.recover", Data: map[string]any{"person_id": p.ID, "token_id": tok.ID}}})
			return p, secret, err
		}
	}
	p := domain.Person{ID: newID(), Name: "recovered-admin", Active: true, CreatedAt: now, UpdatedAt: now}
	p.SetRole(domain.RoleAdmin)
	tok, secret, err := s.mint(p.ID, "recovered", nil, now)
	if err != nil {
		return domain.Person{}, "", err
	}
	err = s.store.CreatePerson(ctx, store.CreatePersonParams{Person: p, Token: tok, TokenHash: HashToken(secret),
		Audit: domain.AuditRecord{Actor: "system:recovery", Action: "admin.recover", Data: map[string]any{"person_id": p.ID, "token_id": tok.ID, "created": true}}})
	return p, secret, err
}

// teamSignal tells every instance (this one at once) that a token or a
// person can no longer authenticate, or that an agent changed owner.
func (s *Service) teamSignal(ctx context.Context, sig bus.Team) {
	s.onTeam(sig)
	if err := bus.Send(ctx, s.bus, sig); err != nil {
		s.log.Warn("publishing a team change failed; other instances catch up within the re-check interval", "err", err)
	}
}

func (s *Service) onTeam(sig bus.Team) {
	switch sig.Kind {
	case bus.TeamToken:
		s.tokens.ForgetToken(sig.ID)
		s.events.CloseToken(sig.ID)
	case bus.TeamPerson:
		s.tokens.ForgetPerson(sig.ID)
		s.events.CloseOwner(sig.ID)
	case bus.TeamPersonUpdated:
		s.tokens.ForgetPerson(sig.ID)
	case bus.TeamOwner:
		s.forgetCredentials(sig.ID) // cached lookups carry the old owner
		s.events.SetOwner(sig.ID, sig.OwnerID, sig.Handle)
	}
}

// ListAgentsOf lists the agents of another person, ordered by handle, so an
// admin can find a deactivated person's agents and hand them over
// (GET /v1/agents?owner=<person id>). A member may name only itself
// (forbidden otherwise, reason admin_required).
func (s *Service) ListAgentsOf(ctx context.Context, by domain.Person, ownerID string) ([]domain.Agent, error) {
	if ownerID != by.ID {
		if err := requireAdmin(by, "listing another person's agents"); err != nil {
			return nil, err
		}
	}
	return s.store.ListAgents(ctx, store.ListAgentsParams{OwnerID: ownerID})
}
