package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// TokenTouchEvery bounds how often a token's last_used_at is written
// (per token and instance).
const TokenTouchEvery = time.Minute

// MaxTokenNameLen bounds token names (bytes).
const MaxTokenNameLen = 100

// RecheckInterval is how often open streams and connections re-check their
// credential or token (design: Revocation within 5 s: revocation holds within 5 s on every
// instance even when a bus signal is lost).
const RecheckInterval = 2 * time.Second

// CredentialCacheTTL is how long an MCP credential lookup is reused
// (design: Credential cache). A revoke invalidates it at once on the instance that
// revoked and, through the bus, on the others; a lost signal is bounded by
// this TTL.
const CredentialCacheTTL = 2 * time.Second

func requireAdmin(by domain.Person, what string) error {
	if !by.Admin {
		return &domain.Error{Code: domain.CodeForbidden, Reason: "admin_required", Detail: what + " needs an admin"}
	}
	return nil
}

func validPersonName(n string) error {
	if strings.TrimSpace(n) == "" {
		return domain.Errorf(domain.CodeInvalidArgument, "name is required").At("/name")
	}
	return validDisplayName(n)
}

func validRole(r string) error {
	if !domain.ValidRole(r) {
		return domain.Errorf(domain.CodeInvalidArgument, "role %q must be %s or %s", r, domain.RoleAdmin, domain.RoleMember).At("/role")
	}
	return nil
}

func (s *Service) mint(personID, name string, expires *time.Time, now time.Time) (domain.PersonToken, string, error) {
	if strings.TrimSpace(name) == "" {
		return domain.PersonToken{}, "", domain.Errorf(domain.CodeInvalidArgument, "name is required").At("/name")
	}
	if err := validDisplayName(name); err != nil || len(name) > MaxTokenNameLen {
		return domain.PersonToken{}, "", domain.Errorf(domain.CodeInvalidArgument, "name must be at most %d bytes of UTF-8 without control characters", MaxTokenNameLen).At("/name")
	}
	if expires != nil {
		e := expires.UTC().Truncate(time.Microsecond)
		if !e.After(now) {
			return domain.PersonToken{}, "", domain.Errorf(domain.CodeInvalidArgument, "expires_at must be in the future").At("/expires_at")
		}
		expires = &e
	}
	return domain.PersonToken{ID: newID(), PersonID: personID, Name: name, CreatedAt: now, ExpiresAt: expires}, NewToken(PersonTokenPrefix), nil
}

// CreatePerson creates a person with its first token (named "first",
// shown once). Admin only. Audited as person.create. Errors: forbidden,
// invalid_argument (/name, /role).
func (s *Service) CreatePerson(ctx context.Context, by domain.Person, in PersonInput) (PersonCreated, error) {
	if err := requireAdmin(by, "creating a person"); err != nil {
		return PersonCreated{}, err
	}
	if err := validPersonName(in.Name); err != nil {
		return PersonCreated{}, err
	}
	if in.Role == "" {
		in.Role = domain.RoleMember
	}
	if err := validRole(in.Role); err != nil {
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
// (not_found otherwise).
func (s *Service) GetPerson(ctx context.Context, by domain.Person, id string) (domain.Person, error) {
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
// invalid_argument, conflict with reason last_admin.
func (s *Service) UpdatePerson(ctx context.Context, by domain.Person, id string, in PersonUpdate) (domain.Person, error) {
	if err := requireAdmin(by, "changing a person"); err != nil {
		return domain.Person{}, err
	}
	cur, err := s.store.GetPerson(ctx, id)
	if err != nil {
		return domain.Person{}, storeErr(err, fmt.Sprintf("person %q not found", id), "")
	}
	if in.Name != nil {
		if err := validPersonName(*in.Name); err != nil {
			return domain.Person{}, err
		}
	}
	if in.Role != nil {
		if err := validRole(*in.Role); err != nil {
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
	// The last active admin cannot be demoted or deactivated: a change that
	// may remove an active admin is written only while another remains.
	keep := (in.Role != nil && *in.Role != domain.RoleAdmin) || (in.Active != nil && !*in.Active)
	p, err := s.store.UpdatePerson(ctx, store.UpdatePersonParams{ID: id, Name: in.Name, Role: in.Role, Active: in.Active,
		KeepActiveAdmin: keep, Now: s.now(), Audit: domain.AuditRecord{Actor: "operator:" + by.ID, Action: action, Data: map[string]any{"person_id": id, "change": in}}})
	if errors.Is(err, domain.ErrConflict) {
		return domain.Person{}, &domain.Error{Code: domain.CodeConflict, Reason: "last_admin",
			Detail: fmt.Sprintf("%s is the last active admin; make another person admin first", cur.Name)}
	}
	if err != nil {
		return domain.Person{}, storeErr(err, fmt.Sprintf("person %q not found", id), "")
	}
	if !p.Active {
		s.log.Info("person deactivated", "person_id", id, "by", by.ID)
		s.teamSignal(ctx, bus.Team{Kind: bus.TeamPerson, ID: id})
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

// --- authentication of persons ---

// personByToken resolves a personal token into its active person with
// TokenID set, and records the use (at most once per TokenTouchEvery).
// Errors: unauthenticated (unknown, revoked or expired token, deactivated
// person).
func (s *Service) personByToken(ctx context.Context, token string) (domain.Person, error) {
	if !strings.HasPrefix(token, PersonTokenPrefix) {
		return domain.Person{}, errUnauthenticated
	}
	p, t, err := s.store.TokenByHash(ctx, HashToken(token))
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Person{}, errUnauthenticated
	}
	if err != nil {
		return domain.Person{}, err
	}
	now := s.now()
	switch {
	case t.RevokedAt != nil:
		return domain.Person{}, &domain.Error{Code: domain.CodeUnauthenticated, Reason: "token_revoked", Detail: "this token was revoked"}
	case !t.Usable(now):
		return domain.Person{}, &domain.Error{Code: domain.CodeUnauthenticated, Reason: "token_expired", Detail: "this token expired; create a new one"}
	case !p.Active:
		return domain.Person{}, &domain.Error{Code: domain.CodeUnauthenticated, Reason: "person_deactivated", Detail: "this person was deactivated"}
	}
	p.TokenID = t.ID
	s.touch(ctx, t.ID, now)
	return p, nil
}

func (s *Service) touch(ctx context.Context, tokenID string, now time.Time) {
	s.team.mu.Lock()
	last, ok := s.team.touched[tokenID]
	if ok && now.Sub(last) < TokenTouchEvery {
		s.team.mu.Unlock()
		return
	}
	if len(s.team.touched) > 10000 {
		clear(s.team.touched)
	}
	s.team.touched[tokenID] = now
	s.team.mu.Unlock()
	if err := s.store.TouchToken(ctx, store.TouchTokenParams{ID: tokenID, At: now, Every: TokenTouchEvery}); err != nil {
		s.log.Warn("recording a token's last use failed", "token_id", tokenID, "err", err)
	}
}

// CheckPersonToken re-checks the token a stream was opened with: nil while
// it still authenticates its person. Errors: unauthenticated.
func (s *Service) CheckPersonToken(ctx context.Context, tokenID string) error {
	p, t, err := s.store.TokenByID(ctx, tokenID)
	if errors.Is(err, domain.ErrNotFound) {
		return errUnauthenticated
	}
	if err != nil {
		return err
	}
	if !t.Usable(s.now()) || !p.Active {
		return errUnauthenticated
	}
	return nil
}

// --- console sessions ---

// StartConsoleSession signs a person in to the console with a personal
// token: it creates the server-side session row the cookie will name.
// Errors: unauthenticated.
func (s *Service) StartConsoleSession(ctx context.Context, token string, ttl time.Duration) (domain.Person, domain.ConsoleSession, error) {
	p, err := s.personByToken(ctx, token)
	if err != nil {
		return domain.Person{}, domain.ConsoleSession{}, err
	}
	now := s.now()
	cs := domain.ConsoleSession{ID: NewToken(""), PersonID: p.ID, TokenID: p.TokenID, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := s.store.CreateConsoleSession(ctx, cs); err != nil {
		return domain.Person{}, domain.ConsoleSession{}, err
	}
	p.SessionID = cs.ID
	return p, cs, nil
}

// ConsoleSession resolves a console session id: the person while the
// session is live (not signed out, not expired), its token usable and the
// person active. Errors: unauthenticated.
func (s *Service) ConsoleSession(ctx context.Context, id string) (domain.Person, error) {
	cs, t, p, err := s.store.ConsoleSessionByID(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Person{}, errUnauthenticated
	}
	if err != nil {
		return domain.Person{}, err
	}
	now := s.now()
	if !cs.Live(now) || !t.Usable(now) || !p.Active {
		return domain.Person{}, errUnauthenticated
	}
	p.TokenID, p.SessionID = t.ID, cs.ID
	return p, nil
}

// EndConsoleSession signs a console session out (every instance sees the
// ended row on the next request).
func (s *Service) EndConsoleSession(ctx context.Context, id string) error {
	return s.store.EndConsoleSession(ctx, id, s.now())
}

// --- signals and the MCP credential cache ---

type teamState struct {
	mu      sync.Mutex
	touched map[string]time.Time // token id → last touch written by this instance

	credMu sync.Mutex
	creds  map[string]credEntry // credential hash → lookup

	verdictMu sync.Mutex
	verdicts  map[string]verdict // token hash → MayAuthenticate's answer
}

// verdict is a remembered answer of MayAuthenticate: ok for a person token
// that authenticated, !ok for a hash no credential has.
type verdict struct {
	ok bool
	at time.Time
}

type credEntry struct {
	p  domain.Principal
	at time.Time
}

func (s *Service) initTeam() {
	s.team.touched = map[string]time.Time{}
	s.team.creds = map[string]credEntry{}
	s.team.verdicts = map[string]verdict{}
	bus.Listen(s.bus, s.onTeam, nil)
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
		s.events.CloseToken(sig.ID)
	case bus.TeamPerson:
		s.events.CloseOwner(sig.ID)
	case bus.TeamOwner:
		s.forgetCredentials(sig.ID) // cached lookups carry the old owner
		s.events.SetOwner(sig.ID, sig.OwnerID, sig.Handle)
	}
}

// AuthenticateAgentCached is AuthenticateAgent with a short-lived cache
// (CredentialCacheTTL) for MCP requests: a tool call does not look its
// credential up in the store every time. Revoking, rotating or
// deactivating invalidates the agent's entries at once on this instance
// and on the others when the bus signal arrives.
func (s *Service) AuthenticateAgentCached(ctx context.Context, token string) (domain.Principal, error) {
	if !strings.HasPrefix(token, AgentTokenPrefix) {
		return domain.Principal{}, errUnauthenticated
	}
	h := HashToken(token)
	now := s.clock.Now()
	if p, ok := s.cachedCredential(h, now); ok {
		return p, nil
	}
	p, err := s.AuthenticateAgent(ctx, token)
	if err != nil {
		s.team.credMu.Lock()
		delete(s.team.creds, h)
		s.team.credMu.Unlock()
		return p, err
	}
	s.cacheCredential(h, p, now)
	return p, nil
}

// cacheCredential remembers the lookup p of the credential hash h, made at
// now (bounded: see putBounded).
func (s *Service) cacheCredential(h string, p domain.Principal, now time.Time) {
	a := *p.Agent
	s.team.credMu.Lock()
	defer s.team.credMu.Unlock()
	putBounded(s.team.creds, h, credEntry{p: domain.Principal{Agent: &a, CredentialID: p.CredentialID}, at: now}, now,
		func(e credEntry) time.Time { return e.at })
}

// putBounded stores v under k in m, a cache whose entries expire
// CredentialCacheTTL after at(entry): at 10 000 entries the expired ones
// go, and if none had expired, all. Callers hold m's lock.
func putBounded[V any](m map[string]V, k string, v V, now time.Time, at func(V) time.Time) {
	if len(m) >= 10000 {
		for key, e := range m {
			if now.Sub(at(e)) >= CredentialCacheTTL {
				delete(m, key)
			}
		}
		if len(m) >= 10000 {
			clear(m)
		}
	}
	m[k] = v
}

// cachedCredential returns the cached lookup of the credential hash h while
// it is younger than CredentialCacheTTL.
func (s *Service) cachedCredential(h string, now time.Time) (domain.Principal, bool) {
	s.team.credMu.Lock()
	e, ok := s.team.creds[h]
	s.team.credMu.Unlock()
	if !ok || now.Sub(e.at) >= CredentialCacheTTL || now.Sub(e.at) < 0 {
		return domain.Principal{}, false
	}
	a := *e.p.Agent
	return domain.Principal{Agent: &a, CredentialID: e.p.CredentialID}, true
}

// MayAuthenticate reports whether a bearer token could authenticate: the
// edge's check of a client over the failed-auth limit (design: The
// failed-auth limit). false means it certainly cannot — not a Rollcall
// token, no credential has its hash, a revoked agent, a revoked or expired
// token, a deactivated person; true means the handler decides (it
// authenticates, or the agent is inactive, or the store could not tell).
//
// A token seen within CredentialCacheTTL costs no store round trip: an
// agent credential that authenticated is in the credential cache (where the
// MCP request that follows finds it), a person token that authenticated
// and a hash no credential has are remembered here. Remembering an unknown
// hash refuses no credential created later, on this instance or another:
// a new credential is 256 fresh random bits (NewToken), so its hash is
// never one that was looked up before. A remembered yes that has gone stale
// (a token revoked since) only lets the handler answer. Otherwise it costs
// one indexed lookup by hash, and never records a token's use.
func (s *Service) MayAuthenticate(ctx context.Context, token string) bool {
	agent := strings.HasPrefix(token, AgentTokenPrefix)
	if !agent && !strings.HasPrefix(token, PersonTokenPrefix) {
		return false
	}
	h := HashToken(token)
	now := s.clock.Now()
	if agent {
		if _, ok := s.cachedCredential(h, now); ok {
			return true
		}
	}
	s.team.verdictMu.Lock()
	v, seen := s.team.verdicts[h]
	s.team.verdictMu.Unlock()
	if seen && now.Sub(v.at) < CredentialCacheTTL && now.Sub(v.at) >= 0 {
		return v.ok
	}
	var ok bool
	var err error
	if agent {
		ok, err = s.agentMayAuthenticate(ctx, h, now)
	} else {
		ok, err = s.personMayAuthenticate(ctx, h, now)
	}
	switch {
	case errors.Is(err, domain.ErrNotFound):
		s.rememberVerdict(h, false, now)
		return false
	case err != nil:
		return true // the store could not tell: the handler decides
	}
	return ok
}

// agentMayAuthenticate looks the agent credential hash h up for
// MayAuthenticate: false for a revoked agent; an active agent's lookup goes
// into the credential cache. Errors: the store's (domain.ErrNotFound for an
// unknown hash).
func (s *Service) agentMayAuthenticate(ctx context.Context, h string, now time.Time) (bool, error) {
	a, credID, err := s.store.AgentByCredentialHash(ctx, h)
	if err != nil {
		return false, err
	}
	if a.Active && !a.Revoked() {
		s.cacheCredential(h, domain.Principal{Agent: &a, CredentialID: credID}, now)
	}
	return !a.Revoked(), nil
}

// personMayAuthenticate looks the person token hash h up for
// MayAuthenticate: false for a revoked or expired token or a deactivated
// person; a yes is remembered. Errors: the store's (domain.ErrNotFound for
// an unknown hash).
func (s *Service) personMayAuthenticate(ctx context.Context, h string, now time.Time) (bool, error) {
	p, t, err := s.store.TokenByHash(ctx, h)
	if err != nil {
		return false, err
	}
	ok := t.RevokedAt == nil && t.Usable(s.now()) && p.Active
	if ok {
		s.rememberVerdict(h, true, now)
	}
	return ok, nil
}

// rememberVerdict records MayAuthenticate's answer for the token hash h,
// bounded like the credential cache.
func (s *Service) rememberVerdict(h string, ok bool, now time.Time) {
	s.team.verdictMu.Lock()
	defer s.team.verdictMu.Unlock()
	putBounded(s.team.verdicts, h, verdict{ok: ok, at: now}, now, func(v verdict) time.Time { return v.at })
}

// forgetCredentials drops the cached lookups of an agent.
func (s *Service) forgetCredentials(agentID string) {
	s.team.credMu.Lock()
	for k, v := range s.team.creds {
		if v.p.Agent.ID == agentID {
			delete(s.team.creds, k)
		}
	}
	s.team.credMu.Unlock()
}

// LiveCredentials reports which agent credential ids still authenticate
// (credential unrevoked, agent active and unrevoked).
func (s *Service) LiveCredentials(ctx context.Context, ids []string) (map[string]bool, error) {
	return s.store.LiveCredentials(ctx, ids)
}

// NoLongerValid is the periodic re-check of open gateway connections and
// MCP sessions (design: Revocation within 5 s; every RecheckInterval): byCred maps each
// credential id to what it holds open; one store query (bounded by 10 s)
// finds the credentials that no longer authenticate, and their holders are
// returned for closing. A store error returns it and nothing to close: the
// holders stay until a check can tell.
func NoLongerValid[T any](s *Service, byCred map[string][]T) ([]T, error) {
	if len(byCred) == 0 {
		return nil, nil
	}
	ids := make([]string, 0, len(byCred))
	for id := range byCred {
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	live, err := s.LiveCredentials(ctx, ids)
	if err != nil {
		return nil, err
	}
	var dead []T
	for id, held := range byCred {
		if !live[id] {
			dead = append(dead, held...)
		}
	}
	return dead, nil
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
