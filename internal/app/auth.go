package app

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/credcache"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Authentication (design: Personal tokens, Console sessions, Credential
// cache, Revocation within 5 s): a bearer token, a console session or an
// agent credential resolves into its principal; revocations close what is
// open on every instance.

// TokenTouchEvery bounds how often a token's last_used_at is written
// (per token and instance).
const TokenTouchEvery = domain.TokenTouchEvery

// RecheckInterval is how often open streams and connections re-check their
// credential or token (design: Revocation within 5 s: revocation holds within 5 s on every
// instance even when a bus signal is lost).
const RecheckInterval = 2 * time.Second

// CredentialCacheTTL is how long an MCP credential lookup is reused
// (design: Credential cache). A revoke invalidates it at once on the instance that
// revoked and, through the bus, on the others; a lost signal is bounded by
// this TTL.
const CredentialCacheTTL = 2 * time.Second

// byToken looks a token up by its hash (find: a store lookup); a token
// without the prefix, or one the store does not know, is unauthenticated.
func byToken[A, B any](ctx context.Context, token, prefix string, find func(context.Context, string) (A, B, error)) (a A, b B, err error) {
	if !strings.HasPrefix(token, prefix) {
		return a, b, errUnauthenticated
	}
	a, b, err = find(ctx, HashToken(token))
	if errors.Is(err, domain.ErrNotFound) {
		return a, b, errUnauthenticated
	}
	return a, b, err
}

// AuthenticateAgent resolves an agent credential into a principal carrying
// the agent and the credential id. Revoked or inactive agents are refused.
// Errors: unauthenticated, forbidden (agent inactive).
func (s *Service) AuthenticateAgent(ctx context.Context, token string) (domain.Principal, error) {
	a, credID, err := byToken(ctx, token, AgentTokenPrefix, s.store.AgentByCredentialHash)
	if err != nil {
		return domain.Principal{}, err
	}
	if a.Revoked() {
		return domain.Principal{}, errUnauthenticated
	}
	if !a.Active {
		return domain.Principal{}, domain.Errorf(domain.CodeForbidden, "agent %s is inactive; its owner can set active=true", a.Handle)
	}
	return domain.Principal{Agent: &a, CredentialID: credID}, nil
}

// Authenticate resolves a bearer token of either kind.
func (s *Service) Authenticate(ctx context.Context, token string) (domain.Principal, error) {
	if strings.HasPrefix(token, AgentTokenPrefix) {
		return s.AuthenticateAgent(ctx, token)
	}
	p, err := s.AuthenticatePerson(ctx, token)
	if err != nil {
		return domain.Principal{}, err
	}
	return domain.Principal{Person: &p}, nil
}

// AuthenticatePerson resolves a personal API token into its active person
// with Person.TokenID set, and records the use (at most once per
// TokenTouchEvery). Errors: unauthenticated (unknown, revoked or expired
// token; deactivated person — Reason says which).
//
// A lookup is reused for CredentialCacheTTL (design: Credential cache):
// revoking the token or changing its person drops it at once on this
// instance and, through the bus, on the others. Revocation, expiry and
// deactivation are checked on every request, on the cached rows too.
func (s *Service) AuthenticatePerson(ctx context.Context, token string) (domain.Person, error) {
	p, t, err := s.personToken(ctx, token)
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

// personToken looks a personal token up, from the token cache when a
// lookup younger than CredentialCacheTTL is there.
func (s *Service) personToken(ctx context.Context, token string) (domain.Person, domain.PersonToken, error) {
	if !strings.HasPrefix(token, PersonTokenPrefix) {
		return domain.Person{}, domain.PersonToken{}, errUnauthenticated
	}
	h := HashToken(token)
	now := s.clock.Now()
	if v, ok := s.tokens.Get(h, now); ok {
		return v.Person, v.Token, nil
	}
	gen := s.tokens.Gen()
	p, t, err := byToken(ctx, token, PersonTokenPrefix, s.store.TokenByHash)
	if err == nil {
		s.tokens.PutAt(h, credcache.PersonToken{Person: p, Token: t}, now, gen)
	}
	return p, t, err
}

func (s *Service) touch(ctx context.Context, tokenID string, now time.Time) {
	s.touchMu.Lock()
	last, ok := s.touched[tokenID]
	if ok && now.Sub(last) < TokenTouchEvery {
		s.touchMu.Unlock()
		return
	}
	if len(s.touched) > 10000 {
		clear(s.touched)
	}
	s.touched[tokenID] = now
	s.touchMu.Unlock()
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

// StartConsoleSession signs a person in to the console with a personal
// token: it creates the server-side session row the cookie will name.
// Errors: unauthenticated.
func (s *Service) StartConsoleSession(ctx context.Context, token string, ttl time.Duration) (domain.Person, domain.ConsoleSession, error) {
	p, err := s.AuthenticatePerson(ctx, token)
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
	if p, ok := s.creds.Get(h, now); ok {
		return p, nil
	}
	gen := s.creds.Gen()
	p, err := s.AuthenticateAgent(ctx, token)
	if err != nil {
		s.creds.Drop(h)
		return p, err
	}
	s.creds.PutAt(h, p, now, gen)
	return p, nil
}

// MayAuthenticate reports whether a bearer token could authenticate: the
// edge's check of a client over the failed-auth limit (design: The
// failed-auth limit). false means it certainly cannot — not a Rollcall
// token, no credential has its hash, a revoked agent, a revoked or expired
// token, a deactivated person; true means the handler decides (it
// authenticates, or the agent is inactive, or the store could not tell).
//
// A token seen within CredentialCacheTTL costs no store round trip: an
// agent credential in the credential cache answers yes, and every answer
// of the store is remembered as a verdict. Remembering a no refuses no
// credential created later, on this instance or another: a new credential
// is 256 fresh random bits (NewToken), so its hash is never one that was
// looked up before; revoking and expiring are final, and a person
// reactivated is served again once the remembered no is older than the
// TTL. A remembered yes that has gone stale (a token revoked since) only
// lets the handler answer. Otherwise it costs one probe of the store's
// unique hash index that reads no row (CredentialMayAuthenticate,
// TokenMayAuthenticate), fills no cache (the handler's authentication
// fills the credential cache) and never records a token's use.
func (s *Service) MayAuthenticate(ctx context.Context, token string) bool {
	agent := strings.HasPrefix(token, AgentTokenPrefix)
	if !agent && !strings.HasPrefix(token, PersonTokenPrefix) {
		return false
	}
	h := HashToken(token)
	now := s.clock.Now()
	if agent {
		if _, ok := s.creds.Get(h, now); ok {
			return true
		}
	}
	return s.verdicts.Decide(h, now, func() (bool, bool, error) {
		var ok bool
		var err error
		if agent {
			ok, err = s.store.CredentialMayAuthenticate(ctx, h)
		} else {
			ok, err = s.store.TokenMayAuthenticate(ctx, h, s.now())
		}
		if err == nil && !ok {
			// Remembered as no, like a hash no credential has.
			return false, false, domain.ErrNotFound
		}
		return ok, true, err
	})
}

// forgetCredentials drops the cached lookups of an agent: its credentials
// and the refs pushes named it by.
func (s *Service) forgetCredentials(agentID string) {
	s.creds.ForgetAgent(agentID)
	s.targets.ForgetAgent(agentID)
}

// LiveCredentials reports which agent credential ids still authenticate
// (credential unrevoked, agent active and unrevoked).
func (s *Service) LiveCredentials(ctx context.Context, ids []string) (map[string]bool, error) {
	return s.store.LiveCredentials(ctx, ids)
}

// onAgentSessions closes this instance's sessions named by a session-close
// signal.
func (s *Service) onAgentSessions(sig bus.AgentSessions) {
	s.forgetCredentials(sig.AgentID)
	if h := s.sessionHub(); h != nil {
		h.CloseAgentSessions(sig.AgentID, sig.Credentials)
	}
}

// CloseSessions asks every instance to close the agent's sessions bound to
// the given credentials (all when none): how the sign-in use cases
// (internal/oauth) end a revoked grant's sessions.
func (s *Service) CloseSessions(ctx context.Context, agentID string, creds []string) {
	s.closeSessions(ctx, agentID, creds)
}

// closeSessions asks every instance to close the agent's sessions (all, or
// those bound to the given credentials).
func (s *Service) closeSessions(ctx context.Context, agentID string, creds []string) {
	sig := bus.AgentSessions{AgentID: agentID, Credentials: creds}
	s.forgetCredentials(agentID)
	if err := bus.Send(ctx, s.bus, sig); err != nil {
		s.log.Warn("publishing session close failed; closing local sessions only", "agent_id", agentID, "err", err)
		s.onAgentSessions(sig)
	}
}
