package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Contract tests of the TeamStore part of the port (design: Persons and roles,
// Personal tokens, Console sessions) and of the re-check and hand-over
// queries (design: Revocation within 5 s).

func newPerson(name, role string, created time.Time) domain.Person {
	p := domain.Person{ID: uuid.NewString(), Name: name, CreatedAt: micro(created), UpdatedAt: micro(created), Active: true}
	p.SetRole(role)
	return p
}

func createPerson(t *testing.T, s store.Store, p domain.Person, hash string) domain.PersonToken {
	t.Helper()
	tok := domain.PersonToken{ID: uuid.NewString(), PersonID: p.ID, Name: "first", CreatedAt: p.CreatedAt}
	must(t, "CreatePerson "+p.Name, s.CreatePerson(t.Context(), store.CreatePersonParams{Person: p, Token: tok, TokenHash: hash,
		Audit: domain.AuditRecord{Actor: "system", Action: "person.create", Data: map[string]any{"id": p.ID}}}))
	return tok
}

// annAndBob creates ann (admin, token hash "h-ann", created at 1 s) and bob
// (member, "h-bob", 2 s).
func annAndBob(t *testing.T, s store.Store) (ann, bob domain.Person) {
	t.Helper()
	ann = newPerson("ann", domain.RoleAdmin, at(time.Second))
	bob = newPerson("bob", domain.RoleMember, at(2*time.Second))
	createPerson(t, s, ann, "h-ann")
	createPerson(t, s, bob, "h-bob")
	return ann, bob
}

func testPersonsCRUD(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ann, bob := annAndBob(t, s)
	if err := s.CreatePerson(ctx, store.CreatePersonParams{Person: bob, Token: domain.PersonToken{ID: uuid.NewString(), PersonID: bob.ID, Name: "x", CreatedAt: bob.CreatedAt}, TokenHash: "h-other",
		Audit: domain.AuditRecord{Actor: "system", Action: "person.create"}}); err == nil {
		t.Fatal("CreatePerson with a taken id succeeded")
	}
	list, err := s.ListPersons(ctx)
	must(t, "ListPersons", err)
	diff(t, "persons", []domain.Person{ann, bob}, list)
	got, err := s.GetPerson(ctx, bob.ID)
	must(t, "GetPerson", err)
	diff(t, "bob", bob, got)
	_, err = s.GetPerson(ctx, uuid.NewString())
	wantErr(t, "GetPerson(unknown)", err, domain.ErrNotFound)

	before := auditCount(t, s)
	now := at(time.Minute)
	up, err := s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: edit(ptr("Bob B"), ptr(domain.RoleAdmin), nil), Now: now,
		Audit: domain.AuditRecord{Actor: "operator:" + ann.ID, Action: "person.update"}})
	must(t, "UpdatePerson", err)
	if up.Name != "Bob B" || up.Role != domain.RoleAdmin || !up.Admin || !up.Active || !up.UpdatedAt.Equal(now) {
		t.Fatalf("updated = %+v", up)
	}
	up, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: edit(nil, nil, ptr(false)), Now: at(2 * time.Minute),
		Audit: domain.AuditRecord{Actor: "operator:" + ann.ID, Action: "person.deactivate"}})
	must(t, "UpdatePerson(deactivate)", err)
	if up.Active || up.DeactivatedAt == nil || !up.DeactivatedAt.Equal(at(2*time.Minute)) || up.Name != "Bob B" {
		t.Fatalf("deactivated = %+v", up)
	}
	up, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: edit(nil, nil, ptr(true)), Now: at(3 * time.Minute),
		Audit: domain.AuditRecord{Actor: "operator:" + ann.ID, Action: "person.update"}})
	must(t, "UpdatePerson(reactivate)", err)
	if !up.Active || up.DeactivatedAt != nil {
		t.Fatalf("reactivated = %+v", up)
	}
	if n := auditCount(t, s) - before; n != 3 {
		t.Fatalf("%d audit entries for 3 updates", n)
	}
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: uuid.NewString(), Change: edit(ptr("x"), nil, nil), Now: now, Audit: domain.AuditRecord{Actor: "system", Action: "person.update"}})
	wantErr(t, "UpdatePerson(unknown)", err, domain.ErrNotFound)
}

// edit is an UpdatePersonParams.Change that sets name, role and active
// where not nil.
func edit(name, role *string, active *bool) func(domain.Person, int) (domain.Person, error) {
	return func(cur domain.Person, _ int) (domain.Person, error) {
		if name != nil {
			cur.Name = *name
		}
		if role != nil {
			cur.SetRole(*role)
		}
		if active != nil {
			cur.Active = *active
		}
		return cur, nil
	}
}

// guarded is edit under the last-active-admin rule, as the use case runs
// it (domain.CheckActiveAdmin).
func guarded(name, role *string, active *bool) func(domain.Person, int) (domain.Person, error) {
	f := edit(name, role, active)
	return func(cur domain.Person, activeAdmins int) (domain.Person, error) {
		next, _ := f(cur, activeAdmins)
		return next, domain.CheckActiveAdmin(cur, next, activeAdmins)
	}
}

// wantLastAdmin fails unless err is the last-active-admin refusal.
func wantLastAdmin(t *testing.T, what string, err error) {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeConflict || de.Reason != "last_admin" {
		t.Fatalf("%s: error = %v, want conflict last_admin", what, err)
	}
}

// testPersonChange: UpdatePerson hands Change the stored person and the
// active admins (the person included), writes only what Change returns
// and, when Change refuses, returns its error as is and writes nothing.
func testPersonChange(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ann, bob := annAndBob(t, s)
	audit := domain.AuditRecord{Actor: "system", Action: "person.update"}
	seen := func(id string, change func(domain.Person, int) (domain.Person, error)) (domain.Person, int) {
		t.Helper()
		var cur domain.Person
		n := -1
		_, err := s.UpdatePerson(ctx, store.UpdatePersonParams{ID: id, Now: at(time.Minute), Audit: audit,
			Change: func(c domain.Person, activeAdmins int) (domain.Person, error) {
				cur, n = c, activeAdmins
				return change(c, activeAdmins)
			}})
		must(t, "UpdatePerson", err)
		return cur, n
	}
	if cur, n := seen(bob.ID, edit(nil, ptr(domain.RoleAdmin), nil)); n != 1 || cur.ID != bob.ID || cur.Admin {
		t.Fatalf("promoting bob saw %+v and %d active admins, want member bob and 1", cur, n)
	}
	if _, n := seen(ann.ID, edit(nil, nil, ptr(false))); n != 2 {
		t.Fatalf("deactivating ann saw %d active admins, want 2", n)
	}
	if cur, n := seen(ann.ID, edit(nil, nil, ptr(true))); n != 1 || cur.Active {
		t.Fatalf("reactivating ann saw %+v and %d active admins, want inactive ann and 1 (bob)", cur, n)
	}
	// Only Name, Role and Active of Change's person are written.
	up, err := s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Now: at(2 * time.Minute), Audit: audit,
		Change: func(c domain.Person, _ int) (domain.Person, error) {
			c.ID, c.Name, c.CreatedAt = "other", "Bob B", at(time.Hour)
			return c, nil
		}})
	must(t, "UpdatePerson(rename)", err)
	if up.ID != bob.ID || up.Name != "Bob B" || !up.CreatedAt.Equal(bob.CreatedAt) || !up.UpdatedAt.Equal(at(2*time.Minute)) {
		t.Fatalf("renamed = %+v", up)
	}
	before := auditCount(t, s)
	refused := errors.New("refused")
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Now: at(3 * time.Minute), Audit: audit,
		Change: func(c domain.Person, _ int) (domain.Person, error) { c.Name = "nobody"; return c, refused }})
	if err != refused {
		t.Fatalf("refused change: error = %v, want Change's error as is", err)
	}
	if got, _ := s.GetPerson(ctx, bob.ID); got.Name != "Bob B" || auditCount(t, s) != before {
		t.Fatalf("a refused change was written or audited: %+v", got)
	}
}

func testLastAdmin(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ann, bob := annAndBob(t, s)
	audit := domain.AuditRecord{Actor: "system", Action: "person.update"}
	before := auditCount(t, s)
	_, err := s.UpdatePerson(ctx, store.UpdatePersonParams{ID: ann.ID, Change: guarded(nil, ptr(domain.RoleMember), nil), Now: at(time.Minute), Audit: audit})
	wantLastAdmin(t, "demote the last admin", err)
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: ann.ID, Change: guarded(nil, nil, ptr(false)), Now: at(time.Minute), Audit: audit})
	wantLastAdmin(t, "deactivate the last admin", err)
	if auditCount(t, s) != before {
		t.Fatal("a refused change was audited")
	}
	got, _ := s.GetPerson(ctx, ann.ID)
	if !got.Admin || !got.Active {
		t.Fatalf("the refused change changed ann: %+v", got)
	}
	// With a second active admin the first may go; then the second is the
	// last. Changes that take no admin away pass.
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: guarded(nil, ptr(domain.RoleAdmin), nil), Now: at(time.Minute), Audit: audit})
	must(t, "promote bob", err)
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: ann.ID, Change: guarded(nil, ptr(domain.RoleMember), nil), Now: at(time.Minute), Audit: audit})
	must(t, "demote ann with bob admin", err)
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: guarded(nil, nil, ptr(false)), Now: at(time.Minute), Audit: audit})
	wantLastAdmin(t, "deactivate bob, now the last admin", err)
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: guarded(ptr("Bob B"), nil, nil), Now: at(time.Minute), Audit: audit})
	must(t, "rename the last admin", err)
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: ann.ID, Change: guarded(nil, nil, ptr(false)), Now: at(time.Minute), Audit: audit})
	must(t, "deactivate ann, a member", err)
}

// testLastAdminRace: of the last two active admins, demoted or deactivated
// at once (across two instances where the adapter has them), exactly one
// change passes the rule and the other is refused (design: Last active
// admin).
func testLastAdminRace(t *testing.T, in Instance) {
	stores := twoStores(t, in)
	changes := [][2]func(domain.Person, int) (domain.Person, error){
		{guarded(nil, ptr(domain.RoleMember), nil), guarded(nil, ptr(domain.RoleMember), nil)},
		{guarded(nil, nil, ptr(false)), guarded(nil, ptr(domain.RoleMember), nil)},
	}
	for round, pair := range changes {
		a1 := newPerson(fmt.Sprint("a1-", round), domain.RoleAdmin, at(time.Second))
		a2 := newPerson(fmt.Sprint("a2-", round), domain.RoleAdmin, at(2*time.Second))
		createPerson(t, in.Store, a1, fmt.Sprint("h-a1-", round))
		createPerson(t, in.Store, a2, fmt.Sprint("h-a2-", round))
		if round > 0 {
			// The previous round left one active admin: take it away
			// without the rule, so a1 and a2 are the last two.
			persons, err := in.Store.ListPersons(ctxOf(t))
			must(t, "ListPersons", err)
			for _, p := range persons {
				if p.ActiveAdmin() && p.ID != a1.ID && p.ID != a2.ID {
					_, err := in.Store.UpdatePerson(ctxOf(t), store.UpdatePersonParams{ID: p.ID, Change: edit(nil, ptr(domain.RoleMember), nil), Now: at(time.Minute),
						Audit: domain.AuditRecord{Actor: "system", Action: "person.update"}})
					must(t, "demote the previous survivor", err)
				}
			}
		}
		ids := []string{a1.ID, a2.ID}
		errs := parallel(2, func(i int) error {
			_, err := stores[i].UpdatePerson(ctxOf(t), store.UpdatePersonParams{ID: ids[i], Change: pair[i], Now: at(time.Minute),
				Audit: domain.AuditRecord{Actor: "system", Action: "person.update"}})
			return err
		})
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			} else {
				wantLastAdmin(t, "racing change", err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d of 2 racing changes of the last two admins succeeded, want 1", round, ok)
		}
		persons, err := in.Store.ListPersons(ctxOf(t))
		must(t, "ListPersons", err)
		active := 0
		for _, p := range persons {
			if p.ActiveAdmin() {
				active++
			}
		}
		if active != 1 {
			t.Fatalf("round %d: %d active admins after the race, want 1", round, active)
		}
	}
}

func testPersonTokens(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ann := newPerson("ann", domain.RoleAdmin, at(time.Second))
	first := createPerson(t, s, ann, "h-ann")
	exp := at(time.Hour)
	second := domain.PersonToken{ID: uuid.NewString(), PersonID: ann.ID, Name: "ci", CreatedAt: at(time.Minute), ExpiresAt: &exp}
	must(t, "CreateToken", s.CreateToken(ctx, store.CreateTokenParams{Token: second, Hash: "h-ci",
		Audit: domain.AuditRecord{Actor: "operator:" + ann.ID, Action: "token.create"}}))
	err := s.CreateToken(ctx, store.CreateTokenParams{Token: domain.PersonToken{ID: uuid.NewString(), PersonID: uuid.NewString(), Name: "x", CreatedAt: at(time.Minute)},
		Hash: "h-x", Audit: domain.AuditRecord{Actor: "system", Action: "token.create"}})
	wantErr(t, "CreateToken(unknown person)", err, domain.ErrNotFound)

	list, err := s.ListTokens(ctx, ann.ID)
	must(t, "ListTokens", err)
	diff(t, "tokens", []domain.PersonToken{first, second}, list)

	p, tok, err := s.TokenByHash(ctx, "h-ci")
	must(t, "TokenByHash", err)
	diff(t, "token", second, tok)
	diff(t, "person", ann, p)
	_, tok, err = s.TokenByID(ctx, first.ID)
	must(t, "TokenByID", err)
	diff(t, "token by id", first, tok)

	must(t, "TouchToken", s.TouchToken(ctx, store.TouchTokenParams{ID: second.ID, At: at(2 * time.Minute), Every: time.Minute}))
	must(t, "TouchToken (too soon)", s.TouchToken(ctx, store.TouchTokenParams{ID: second.ID, At: at(2*time.Minute + 30*time.Second), Every: time.Minute}))
	_, tok, _ = s.TokenByID(ctx, second.ID)
	sameTime(t, "last_used_at", tok.LastUsedAt, at(2*time.Minute))
	must(t, "TouchToken (later)", s.TouchToken(ctx, store.TouchTokenParams{ID: second.ID, At: at(4 * time.Minute), Every: time.Minute}))
	_, tok, _ = s.TokenByID(ctx, second.ID)
	sameTime(t, "last_used_at", tok.LastUsedAt, at(4*time.Minute))

	bob := newPerson("bob", domain.RoleMember, at(time.Second))
	createPerson(t, s, bob, "h-bob")
	audit := domain.AuditRecord{Actor: "operator:" + bob.ID, Action: "token.revoke"}
	_, err = s.RevokeToken(ctx, store.RevokeTokenParams{PersonID: bob.ID, ID: second.ID, Now: at(5 * time.Minute), Audit: audit})
	wantErr(t, "RevokeToken(another person's)", err, domain.ErrNotFound)
	rt, err := s.RevokeToken(ctx, store.RevokeTokenParams{PersonID: ann.ID, ID: second.ID, Now: at(5 * time.Minute), Audit: audit})
	must(t, "RevokeToken", err)
	sameTime(t, "revoked_at", rt.RevokedAt, at(5*time.Minute))
	_, err = s.RevokeToken(ctx, store.RevokeTokenParams{PersonID: ann.ID, ID: second.ID, Now: at(6 * time.Minute), Audit: audit})
	wantErr(t, "RevokeToken(again)", err, domain.ErrNotFound)
	_, tok, err = s.TokenByHash(ctx, "h-ci")
	must(t, "TokenByHash(revoked)", err)
	sameTime(t, "revoked_at", tok.RevokedAt, at(5*time.Minute))
	list, _ = s.ListTokens(ctx, ann.ID)
	diff(t, "tokens after revoke", []domain.PersonToken{first}, list)
}

func testConsoleSessions(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ann := newPerson("ann", domain.RoleAdmin, at(time.Second))
	bob := newPerson("bob", domain.RoleMember, at(time.Second))
	annTok := createPerson(t, s, ann, "h-ann")
	bobTok := createPerson(t, s, bob, "h-bob")
	mk := func(p domain.Person, tok domain.PersonToken) domain.ConsoleSession {
		cs := domain.ConsoleSession{ID: uuid.NewString(), PersonID: p.ID, TokenID: tok.ID, CreatedAt: at(time.Minute), ExpiresAt: at(time.Hour)}
		must(t, "CreateConsoleSession", s.CreateConsoleSession(ctx, cs))
		return cs
	}
	s1, s2, s3 := mk(ann, annTok), mk(ann, annTok), mk(bob, bobTok)
	cs, tok, p, err := s.ConsoleSessionByID(ctx, s1.ID)
	must(t, "ConsoleSessionByID", err)
	diff(t, "session", s1, cs)
	diff(t, "session token", annTok, tok)
	diff(t, "session person", ann, p)
	_, _, _, err = s.ConsoleSessionByID(ctx, uuid.NewString())
	wantErr(t, "ConsoleSessionByID(unknown)", err, domain.ErrNotFound)

	must(t, "EndConsoleSession", s.EndConsoleSession(ctx, s1.ID, at(2*time.Minute)))
	must(t, "EndConsoleSession(again)", s.EndConsoleSession(ctx, s1.ID, at(3*time.Minute)))
	cs, _, _, _ = s.ConsoleSessionByID(ctx, s1.ID)
	sameTime(t, "ended_at", cs.EndedAt, at(2*time.Minute))

	// Revoking the token ends its other session; deactivating bob ends his.
	_, err = s.RevokeToken(ctx, store.RevokeTokenParams{PersonID: ann.ID, ID: annTok.ID, Now: at(4 * time.Minute), Audit: domain.AuditRecord{Actor: "system", Action: "token.revoke"}})
	must(t, "RevokeToken", err)
	cs, _, _, _ = s.ConsoleSessionByID(ctx, s2.ID)
	sameTime(t, "ended_at after token revoke", cs.EndedAt, at(4*time.Minute))
	admin2 := newPerson("carl", domain.RoleAdmin, at(time.Second))
	createPerson(t, s, admin2, "h-carl")
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: edit(nil, nil, ptr(false)), Now: at(5 * time.Minute), Audit: domain.AuditRecord{Actor: "system", Action: "person.deactivate"}})
	must(t, "deactivate bob", err)
	cs, _, p, _ = s.ConsoleSessionByID(ctx, s3.ID)
	sameTime(t, "ended_at after deactivation", cs.EndedAt, at(5*time.Minute))
	if p.Active {
		t.Fatal("session person still active after deactivation")
	}
}

func testLiveCredentials(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	b := vend(t, s, newAgent("beta", ownerID, "build"))
	c := vend(t, s, newAgent("gamma", ownerID, "build"))
	live, err := s.LiveCredentials(ctx, []string{a.CredID, b.CredID, c.CredID, "unknown"})
	must(t, "LiveCredentials", err)
	diff(t, "live", map[string]bool{a.CredID: true, b.CredID: true, c.CredID: true}, live)
	_, err = s.RevokeAgent(ctx, store.RevokeAgentParams{ID: a.ID, Now: at(time.Minute), Audit: domain.AuditRecord{Actor: "system", Action: "agent.revoke", AgentID: a.ID}})
	must(t, "RevokeAgent", err)
	_, err = s.UpdateAgent(ctx, store.UpdateAgentParams{ID: b.ID, Active: ptr(false), Now: at(time.Minute)})
	must(t, "deactivate agent", err)
	_, err = s.RotateCredential(ctx, store.RotateCredentialParams{AgentID: c.ID, CredentialID: uuid.NewString(), CredentialHash: "new-" + c.ID, Now: at(time.Minute),
		Audit: domain.AuditRecord{Actor: "system", Action: "agent.rotate_credential", AgentID: c.ID}})
	must(t, "RotateCredential", err)
	live, err = s.LiveCredentials(ctx, []string{a.CredID, b.CredID, c.CredID})
	must(t, "LiveCredentials", err)
	diff(t, "live after revoke, deactivate, rotate", map[string]bool{}, live)
	ids := make([]string, 1200)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	ids[1100] = a.CredID
	live, err = s.LiveCredentials(ctx, ids)
	must(t, "LiveCredentials(1200 ids)", err)
	if len(live) != 0 {
		t.Fatalf("live = %v", live)
	}
}

func testHandOver(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	h := newHook(a, "github")
	must(t, "CreateHook", s.CreateHook(ctx, store.CreateHookParams{Hook: h, Audit: hookAudit(h, "hook.create")}))
	other := uuid.NewString()
	got, err := s.UpdateAgent(ctx, store.UpdateAgentParams{ID: a.ID, OwnerID: &other, Now: at(time.Minute),
		Audit: &domain.AuditRecord{Actor: "system", Action: "agent.hand_over", AgentID: a.ID}})
	must(t, "UpdateAgent(owner)", err)
	if got.OwnerID != other || got.Name != a.Name {
		t.Fatalf("handed over = %+v", got)
	}
	mine, _ := s.ListAgents(ctx, store.ListAgentsParams{OwnerID: ownerID})
	theirs, _ := s.ListAgents(ctx, store.ListAgentsParams{OwnerID: other})
	if len(mine) != 0 || len(theirs) != 1 {
		t.Fatalf("after hand-over: old owner %d agents, new owner %d", len(mine), len(theirs))
	}
	// The agent's hooks go with it: the old owner no longer sees or steers
	// a hook that feeds another person's agent.
	moved, err := s.GetHook(ctx, h.ID)
	must(t, "GetHook", err)
	if moved.OwnerID != other {
		t.Fatalf("hook owner after hand-over = %q, want the new owner %q", moved.OwnerID, other)
	}
	if old, _ := s.ListHooks(ctx, store.ListHooksParams{OwnerID: ownerID}); len(old) != 0 {
		t.Fatalf("old owner still lists %d hooks", len(old))
	}
}

func testVerifyScoped(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	b := vend(t, s, newAgent("beta", "someone-else", "build"))
	for i := range 3 {
		_, err := s.AppendAudit(ctx, at(time.Duration(i+1)*time.Minute), domain.AuditRecord{Actor: "system", Action: "x", AgentID: b.ID})
		must(t, "AppendAudit", err)
	}
	_, err := s.AppendAudit(ctx, at(time.Hour), domain.AuditRecord{Actor: "system", Action: "x", AgentID: a.ID})
	must(t, "AppendAudit", err)
	all, err := s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	mine, err := s.VerifyAudit(ctx, store.VerifyAuditParams{Scoped: true, AgentIDs: []string{a.ID}})
	must(t, "VerifyAudit(scoped)", err)
	if !all.OK || all.Checked != 6 || !mine.OK || mine.Checked != 2 {
		t.Fatalf("verify all = %+v, scoped = %+v; want 6 and 2 checked", all, mine)
	}
	if in.Tamper == nil {
		return
	}
	in.Tamper(t, 3) // one of beta's entries
	mine, err = s.VerifyAudit(ctx, store.VerifyAuditParams{Scoped: true, AgentIDs: []string{a.ID}})
	must(t, "VerifyAudit(scoped, tampered elsewhere)", err)
	if mine.OK || mine.Checked != 2 || len(mine.Warnings) != 1 || mine.Warnings[0] != domain.AuditBreakElsewhere {
		t.Fatalf("scoped verify after tampering elsewhere = %+v", mine)
	}
}

// The failed-auth limit's probes (design: The failed-auth limit): yes only
// for a hash an unrevoked credential of an unrevoked agent has (an inactive
// agent's included: the handler refuses it), no for an unknown hash, a
// rotated-away credential and a revoked agent.
func testCredentialMayAuthenticate(t *testing.T, in Instance) {
	s, ctx, a := withAlpha(t, in)
	b := vend(t, s, newAgent("beta", ownerID, "build"))
	c := vend(t, s, newAgent("gamma", ownerID, "build"))
	check := func(what, hash string, want bool) {
		t.Helper()
		got, err := s.CredentialMayAuthenticate(ctx, hash)
		must(t, "CredentialMayAuthenticate "+what, err)
		if got != want {
			t.Errorf("CredentialMayAuthenticate(%s) = %v, want %v", what, got, want)
		}
	}
	check("live credential", a.CredHash, true)
	check("unknown hash", "cred-unknown", false)
	_, err := s.RevokeAgent(ctx, store.RevokeAgentParams{ID: a.ID, Now: at(time.Minute), Audit: domain.AuditRecord{Actor: "system", Action: "agent.revoke", AgentID: a.ID}})
	must(t, "RevokeAgent", err)
	_, err = s.UpdateAgent(ctx, store.UpdateAgentParams{ID: b.ID, Active: ptr(false), Now: at(time.Minute)})
	must(t, "deactivate agent", err)
	newHash := "new-" + c.ID
	_, err = s.RotateCredential(ctx, store.RotateCredentialParams{AgentID: c.ID, CredentialID: uuid.NewString(), CredentialHash: newHash, Now: at(time.Minute),
		Audit: domain.AuditRecord{Actor: "system", Action: "agent.rotate_credential", AgentID: c.ID}})
	must(t, "RotateCredential", err)
	check("revoked agent", a.CredHash, false)
	check("inactive agent", b.CredHash, true)
	check("rotated-away credential", c.CredHash, false)
	check("rotated-in credential", newHash, true)
}

// Yes only for a token unrevoked, unexpired at now and of an active person;
// expiry is compared with the now the caller gives (design: The failed-auth
// limit).
func testTokenMayAuthenticate(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ann, bob := annAndBob(t, s)
	expiring := domain.PersonToken{ID: uuid.NewString(), PersonID: ann.ID, Name: "expiring", CreatedAt: at(time.Minute), ExpiresAt: ptr(at(time.Hour))}
	must(t, "CreateToken", s.CreateToken(ctx, store.CreateTokenParams{Token: expiring, Hash: "h-expiring",
		Audit: domain.AuditRecord{Actor: "system", Action: "token.create"}}))
	revoked := domain.PersonToken{ID: uuid.NewString(), PersonID: ann.ID, Name: "revoked", CreatedAt: at(time.Minute)}
	must(t, "CreateToken", s.CreateToken(ctx, store.CreateTokenParams{Token: revoked, Hash: "h-revoked",
		Audit: domain.AuditRecord{Actor: "system", Action: "token.create"}}))
	_, err := s.RevokeToken(ctx, store.RevokeTokenParams{PersonID: ann.ID, ID: revoked.ID, Now: at(2 * time.Minute), Audit: domain.AuditRecord{Actor: "system", Action: "token.revoke"}})
	must(t, "RevokeToken", err)
	check := func(what, hash string, now time.Time, want bool) {
		t.Helper()
		got, err := s.TokenMayAuthenticate(ctx, hash, now)
		must(t, "TokenMayAuthenticate "+what, err)
		if got != want {
			t.Errorf("TokenMayAuthenticate(%s) = %v, want %v", what, got, want)
		}
	}
	check("token without expiry", "h-ann", at(3*time.Minute), true)
	check("unknown hash", "h-unknown", at(3*time.Minute), false)
	check("revoked token", "h-revoked", at(3*time.Minute), false)
	check("token before its expiry", "h-expiring", at(time.Hour-time.Microsecond), true)
	check("token at its expiry", "h-expiring", at(time.Hour), false)
	check("token after its expiry", "h-expiring", at(2*time.Hour), false)
	check("active person", "h-bob", at(3*time.Minute), true)
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: edit(nil, nil, ptr(false)), Now: at(5 * time.Minute), Audit: domain.AuditRecord{Actor: "system", Action: "person.deactivate"}})
	must(t, "deactivate bob", err)
	check("deactivated person", "h-bob", at(6*time.Minute), false)
	_, err = s.UpdatePerson(ctx, store.UpdatePersonParams{ID: bob.ID, Change: edit(nil, nil, ptr(true)), Now: at(7 * time.Minute), Audit: domain.AuditRecord{Actor: "system", Action: "person.reactivate"}})
	must(t, "reactivate bob", err)
	check("reactivated person", "h-bob", at(8*time.Minute), true)
}
