package storetest

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

var personTests = []contractTest{
	{"Persons/BootstrapAdminOnce", testBootstrapAdminOnce},
	{"Persons/BootstrapAdminRace", testBootstrapAdminRace},
	{"Persons/CreateListUpdate", testPersonsCRUD},
	{"Persons/Change", testPersonChange},
	{"Persons/LastAdmin", testLastAdmin},
	{"Persons/LastAdminRace", testLastAdminRace},
	{"Persons/Tokens", testPersonTokens},
	{"Persons/ConsoleSessions", testConsoleSessions},
	{"Agents/LiveCredentials", testLiveCredentials},
	{"Agents/CredentialMayAuthenticate", testCredentialMayAuthenticate},
	{"Persons/TokenMayAuthenticate", testTokenMayAuthenticate},
	{"Agents/HandOver", testHandOver},
	{"Audit/VerifyScoped", testVerifyScoped},
}

var agentTests = []contractTest{
	{"Agents/CreateGet", testAgentCreateGet},
	{"Agents/HandleUnique", testAgentHandleUnique},
	{"Agents/CreateAtomic", testAgentCreateAtomic},
	{"Agents/ListByOwner", testListAgents},
	{"Agents/Update", testUpdateAgent},
	{"Agents/Revoke", testRevokeAgent},
	{"Agents/Rotate", testRotateCredential},
}

func testBootstrapAdminOnce(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	admin := domain.Person{ID: uuid.NewString(), Name: "admin", Admin: true, CreatedAt: at(time.Nanosecond * 1500)}
	created, err := s.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: admin, TokenHash: "tok-1"})
	if err != nil || !created {
		t.Fatalf("first BootstrapAdmin = %v, %v; want created", created, err)
	}
	other := domain.Person{ID: uuid.NewString(), Name: "second", Admin: true, CreatedAt: at(time.Minute)}
	created, err = s.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: other, TokenHash: "tok-2"})
	if err != nil || created {
		t.Fatalf("second BootstrapAdmin = %v, %v; want not created", created, err)
	}
	got, tok, err := s.TokenByHash(ctx, "tok-1")
	must(t, "TokenByHash(tok-1)", err)
	admin.CreatedAt = micro(admin.CreatedAt)
	admin.UpdatedAt, admin.Role, admin.Active = admin.CreatedAt, domain.RoleAdmin, true
	diff(t, "admin", admin, got)
	if tok.PersonID != admin.ID || tok.Name != "bootstrap" || tok.RevokedAt != nil || tok.ExpiresAt != nil || !tok.CreatedAt.Equal(admin.CreatedAt) {
		t.Fatalf("bootstrap token = %+v", tok)
	}
	_, _, err = s.TokenByHash(ctx, "tok-2")
	wantErr(t, "TokenByHash(second token)", err, domain.ErrNotFound)
	_, _, err = s.TokenByHash(ctx, "unknown")
	wantErr(t, "TokenByHash(unknown)", err, domain.ErrNotFound)
}

func testBootstrapAdminRace(t *testing.T, in Instance) {
	var wins atomic.Int32
	errs := parallel(4, func(i int) error {
		p := domain.Person{ID: uuid.NewString(), Name: "admin", Admin: true, CreatedAt: Base}
		created, err := in.Store.BootstrapAdmin(ctxOf(t), store.BootstrapAdminParams{
			Person: p, TokenHash: "tok-" + p.ID,
		})
		if created {
			wins.Add(1)
		}
		return err
	})
	for _, err := range errs {
		must(t, "BootstrapAdmin", err)
	}
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d concurrent BootstrapAdmin calls created a person, want exactly 1", n)
	}
}

func testAgentCreateGet(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := newAgent("alpha", ownerID, "build", "deploy")
	a.CreatedAt = at(1234567 * time.Nanosecond) // sub-µs part must be dropped
	a.UpdatedAt = a.CreatedAt
	a.BillingModes = nil // nil lists read back as []
	v := vend(t, s, a)

	got, err := s.GetAgent(ctx, store.AgentRef{ID: a.ID})
	must(t, "GetAgent(id)", err)
	diff(t, "agent by id", wantAgent(a), got)
	got, err = s.GetAgent(ctx, store.AgentRef{Handle: "alpha"})
	must(t, "GetAgent(handle)", err)
	diff(t, "agent by handle", wantAgent(a), got)

	byCred, credID, err := s.AgentByCredentialHash(ctx, v.CredHash)
	must(t, "AgentByCredentialHash", err)
	diff(t, "agent by credential", wantAgent(a), byCred)
	if credID != v.CredID {
		t.Errorf("credential id = %q, want %q", credID, v.CredID)
	}

	_, err = s.GetAgent(ctx, store.AgentRef{ID: uuid.NewString()})
	wantErr(t, "GetAgent(unknown id)", err, domain.ErrNotFound)
	_, err = s.GetAgent(ctx, store.AgentRef{Handle: "nobody"})
	wantErr(t, "GetAgent(unknown handle)", err, domain.ErrNotFound)
	_, err = s.GetAgent(ctx, store.AgentRef{})
	wantErr(t, "GetAgent(empty ref)", err, domain.ErrNotFound)
	_, _, err = s.AgentByCredentialHash(ctx, "cred-unknown")
	wantErr(t, "AgentByCredentialHash(unknown)", err, domain.ErrNotFound)

	es, err := s.ListAudit(ctx, store.ListAuditParams{})
	must(t, "ListAudit", err)
	if len(es) != 1 || es[0].Action != "agent.vend" || es[0].AgentID != a.ID || string(es[0].Data) != `{"handle":"alpha"}` {
		t.Fatalf("audit after vend = %+v, want one agent.vend entry for %s", es, a.ID)
	}
	sameTime(t, "vend audit at", &es[0].At, a.CreatedAt)
}

func testAgentHandleUnique(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	vend(t, s, newAgent("alpha", ownerID, "build"))

	p, dup := vendParams(newAgent("alpha", ownerID, "other"))
	wantErr(t, "CreateAgent(taken handle)", s.CreateAgent(ctx, p), domain.ErrConflict)
	_, err := s.GetAgent(ctx, store.AgentRef{ID: dup.ID})
	wantErr(t, "GetAgent(rejected agent)", err, domain.ErrNotFound)
	_, _, err = s.AgentByCredentialHash(ctx, dup.CredHash)
	wantErr(t, "AgentByCredentialHash(rejected agent)", err, domain.ErrNotFound)
	if n := auditCount(t, s); n != 1 {
		t.Errorf("audit entries after a rejected vend = %d, want 1", n)
	}

	// Same id, new handle: also a conflict.
	p, _ = vendParams(newAgent("beta", ownerID, "build"))
	p.Agent.ID = dup.ID
	must(t, "CreateAgent(beta)", s.CreateAgent(ctx, p))
	p2, _ := vendParams(newAgent("gamma", ownerID, "build"))
	p2.Agent.ID = dup.ID
	wantErr(t, "CreateAgent(taken id)", s.CreateAgent(ctx, p2), domain.ErrConflict)
	if n := auditCount(t, s); n != 2 {
		t.Errorf("audit entries = %d, want 2", n)
	}
}

func testAgentCreateAtomic(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	// A credential hash already in use rolls back the agent row too.
	first := vend(t, s, newAgent("alpha", ownerID, "build"))
	p, v := vendParams(newAgent("beta", ownerID, "build"))
	p.CredentialHash = first.CredHash
	wantErr(t, "CreateAgent(taken credential hash)", s.CreateAgent(ctx, p), domain.ErrConflict)
	_, err := s.GetAgent(ctx, store.AgentRef{ID: v.ID})
	wantErr(t, "GetAgent(rolled back agent)", err, domain.ErrNotFound)

	// An audit record that cannot be written rolls back the whole vend.
	p, v = vendParams(newAgent("gamma", ownerID, "build"))
	p.Audit.Data = make(chan int)
	if err := s.CreateAgent(ctx, p); err == nil {
		t.Fatal("CreateAgent with unmarshalable audit data succeeded")
	}
	_, err = s.GetAgent(ctx, store.AgentRef{Handle: "gamma"})
	wantErr(t, "GetAgent(rolled back agent)", err, domain.ErrNotFound)
	_, _, err = s.AgentByCredentialHash(ctx, v.CredHash)
	wantErr(t, "AgentByCredentialHash(rolled back agent)", err, domain.ErrNotFound)
	if n := auditCount(t, s); n != 1 {
		t.Errorf("audit entries = %d, want 1", n)
	}
}

func testListAgents(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	other := "0b6f7a44-0000-4000-8000-000000000002"
	c := vend(t, s, newAgent("charlie", ownerID, "q"))
	a := vend(t, s, newAgent("alpha", ownerID, "q"))
	b := vend(t, s, newAgent("bravo", other, "q"))

	got, err := s.ListAgents(ctx, store.ListAgentsParams{OwnerID: ownerID})
	must(t, "ListAgents(owner)", err)
	diff(t, "owner's agents", []domain.Agent{wantAgent(a.Agent), wantAgent(c.Agent)}, got)
	got, err = s.ListAgents(ctx, store.ListAgentsParams{})
	must(t, "ListAgents(all)", err)
	diff(t, "all agents", []domain.Agent{wantAgent(a.Agent), wantAgent(b.Agent), wantAgent(c.Agent)}, got)
	got, err = s.ListAgents(ctx, store.ListAgentsParams{OwnerID: "nobody"})
	must(t, "ListAgents(nobody)", err)
	if len(got) != 0 {
		t.Errorf("ListAgents(nobody) = %d agents, want 0", len(got))
	}
}

func testUpdateAgent(t *testing.T, in Instance) {
	s, ctx, v := withAlpha(t, in)
	want := wantAgent(v.Agent)

	got, err := s.UpdateAgent(ctx, store.UpdateAgentParams{
		ID: v.ID, Name: ptr("Renamed"), Now: at(time.Minute),
		Audit: &domain.AuditRecord{Actor: "operator:" + ownerID, Action: "agent.update", AgentID: v.ID},
	})
	must(t, "UpdateAgent(name)", err)
	want.Name, want.UpdatedAt = "Renamed", at(time.Minute)
	diff(t, "after name update", want, got)
	if n := auditCount(t, s); n != 2 {
		t.Errorf("audit entries = %d, want 2 (vend, update)", n)
	}

	got, err = s.UpdateAgent(ctx, store.UpdateAgentParams{
		ID: v.ID, BillingMode: ptr("api"), BillingModes: &[]string{"api"}, ToolClass: ptr("codex"),
		Active: ptr(false), Now: at(2 * time.Minute),
	})
	must(t, "UpdateAgent(billing, active)", err)
	want.BillingMode, want.BillingModes, want.ToolClass, want.Active = "api", []string{"api"}, "codex", false
	want.UpdatedAt = at(2 * time.Minute)
	diff(t, "after billing update", want, got)
	stored, err := s.GetAgent(ctx, store.AgentRef{ID: v.ID})
	must(t, "GetAgent", err)
	diff(t, "stored after updates", want, stored)
	if n := auditCount(t, s); n != 2 {
		t.Errorf("audit entries = %d, want 2 (no record passed)", n)
	}

	// Clearing to empty values is a change, not "unchanged".
	got, err = s.UpdateAgent(ctx, store.UpdateAgentParams{
		ID: v.ID, BillingMode: ptr(""), BillingModes: &[]string{}, Active: ptr(true), Now: at(3 * time.Minute),
	})
	must(t, "UpdateAgent(clear)", err)
	want.BillingMode, want.BillingModes, want.Active, want.UpdatedAt = "", []string{}, true, at(3*time.Minute)
	diff(t, "after clearing", want, got)

	_, err = s.UpdateAgent(ctx, store.UpdateAgentParams{ID: uuid.NewString(), Name: ptr("x"), Now: at(time.Hour)})
	wantErr(t, "UpdateAgent(unknown)", err, domain.ErrNotFound)

	_, err = s.RevokeAgent(ctx, store.RevokeAgentParams{ID: v.ID, Now: at(time.Hour),
		Audit: domain.AuditRecord{Actor: "operator:" + ownerID, Action: "agent.revoke", AgentID: v.ID}})
	must(t, "RevokeAgent", err)
	before := auditCount(t, s)
	_, err = s.UpdateAgent(ctx, store.UpdateAgentParams{ID: v.ID, Name: ptr("late"), Now: at(2 * time.Hour),
		Audit: &domain.AuditRecord{Actor: "operator:" + ownerID, Action: "agent.update", AgentID: v.ID}})
	wantErr(t, "UpdateAgent(revoked)", err, domain.ErrConflict)
	if n := auditCount(t, s); n != before {
		t.Errorf("audit entries after a refused update = %d, want %d", n, before)
	}
}

func revokeParams(id string, now time.Time) store.RevokeAgentParams {
	return store.RevokeAgentParams{ID: id, Now: now,
		Audit: domain.AuditRecord{Actor: "operator:" + ownerID, Action: "agent.revoke", AgentID: id}}
}

func testRevokeAgent(t *testing.T, in Instance) {
	s, ctx, v := withAlpha(t, in)
	keep := vend(t, s, newAgent("bravo", ownerID, "build"))

	got, err := s.RevokeAgent(ctx, revokeParams(v.ID, at(time.Hour)))
	must(t, "RevokeAgent", err)
	want := wantAgent(v.Agent)
	want.RevokedAt, want.Active, want.UpdatedAt = ptr(at(time.Hour)), false, at(time.Hour)
	diff(t, "revoked agent", want, got)
	if !got.Revoked() {
		t.Error("Revoked() = false after RevokeAgent")
	}
	stored, err := s.GetAgent(ctx, store.AgentRef{Handle: "alpha"})
	must(t, "GetAgent", err)
	diff(t, "stored revoked agent", want, stored)

	_, _, err = s.AgentByCredentialHash(ctx, v.CredHash)
	wantErr(t, "AgentByCredentialHash(revoked agent)", err, domain.ErrNotFound)
	if _, _, err := s.AgentByCredentialHash(ctx, keep.CredHash); err != nil {
		t.Errorf("another agent's credential stopped working: %v", err)
	}
	if n := auditCount(t, s); n != 3 {
		t.Errorf("audit entries = %d, want 3 (vend, vend, revoke)", n)
	}

	_, err = s.RevokeAgent(ctx, revokeParams(v.ID, at(2*time.Hour)))
	wantErr(t, "RevokeAgent(again)", err, domain.ErrConflict)
	_, err = s.RotateCredential(ctx, store.RotateCredentialParams{AgentID: v.ID, CredentialID: uuid.NewString(),
		CredentialHash: "cred-new", Now: at(2 * time.Hour),
		Audit: domain.AuditRecord{Actor: "operator:" + ownerID, Action: "agent.rotate", AgentID: v.ID}})
	wantErr(t, "RotateCredential(revoked)", err, domain.ErrConflict)
	_, _, err = s.AgentByCredentialHash(ctx, "cred-new")
	wantErr(t, "AgentByCredentialHash(refused rotation)", err, domain.ErrNotFound)
	if n := auditCount(t, s); n != 3 {
		t.Errorf("audit entries after refused changes = %d, want 3", n)
	}
	stored, err = s.GetAgent(ctx, store.AgentRef{ID: v.ID})
	must(t, "GetAgent", err)
	sameTime(t, "revoked_at after a second revoke", stored.RevokedAt, at(time.Hour))

	_, err = s.RevokeAgent(ctx, revokeParams(uuid.NewString(), at(time.Hour)))
	wantErr(t, "RevokeAgent(unknown)", err, domain.ErrNotFound)
}

func testRotateCredential(t *testing.T, in Instance) {
	s, ctx, v := withAlpha(t, in)
	other := vend(t, s, newAgent("bravo", ownerID, "build"))
	rotate := func(agentID, credID, hash string, now time.Time) ([]string, error) {
		return s.RotateCredential(ctx, store.RotateCredentialParams{AgentID: agentID, CredentialID: credID,
			CredentialHash: hash, Now: now,
			Audit: domain.AuditRecord{Actor: "operator:" + ownerID, Action: "agent.rotate", AgentID: agentID}})
	}

	id2 := uuid.NewString()
	revoked, err := rotate(v.ID, id2, "cred-2", at(time.Minute))
	must(t, "RotateCredential", err)
	diff(t, "revoked credential ids", []string{v.CredID}, revoked)
	_, _, err = s.AgentByCredentialHash(ctx, v.CredHash)
	wantErr(t, "AgentByCredentialHash(old)", err, domain.ErrNotFound)
	got, credID, err := s.AgentByCredentialHash(ctx, "cred-2")
	must(t, "AgentByCredentialHash(new)", err)
	if got.ID != v.ID || credID != id2 {
		t.Errorf("new credential → agent %s cred %s, want %s %s", got.ID, credID, v.ID, id2)
	}
	if n := auditCount(t, s); n != 3 {
		t.Errorf("audit entries = %d, want 3 (vend, vend, rotate)", n)
	}

	id3 := uuid.NewString()
	revoked, err = rotate(v.ID, id3, "cred-3", at(2*time.Minute))
	must(t, "RotateCredential(again)", err)
	diff(t, "revoked credential ids", []string{id2}, revoked)

	// A hash in use by another agent: conflict, and nothing changes.
	_, err = rotate(v.ID, uuid.NewString(), other.CredHash, at(3*time.Minute))
	wantErr(t, "RotateCredential(taken hash)", err, domain.ErrConflict)
	if _, _, err := s.AgentByCredentialHash(ctx, "cred-3"); err != nil {
		t.Errorf("current credential revoked by a failed rotation: %v", err)
	}
	if n := auditCount(t, s); n != 4 {
		t.Errorf("audit entries = %d, want 4", n)
	}

	_, err = rotate(uuid.NewString(), uuid.NewString(), "cred-x", at(time.Hour))
	wantErr(t, "RotateCredential(unknown)", err, domain.ErrNotFound)
}
