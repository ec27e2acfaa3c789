package pools_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/testkit"
)

// TestPoolGrants: an agent's owner grants another person the right to pool
// it (docs/design.md, "Pool grants"): without the grant that person's pool
// refuses it at /members/N naming the command; with it the pool takes it,
// and the agent claims the pool's todo; a person who does not own the
// agent cannot grant it; revoking the grant takes the agent out of the
// pool, keeps the lease of what it holds, and its pool claims stop.
func TestPoolGrants(t *testing.T) {
	ctx := t.Context()
	s := app.New(app.Options{Store: testkit.OpenSQLite(t)})
	t.Cleanup(s.Close)
	admin := firstAdmin(t, s)
	person := func(name string) domain.Person {
		pc, err := s.CreatePerson(ctx, admin, app.PersonInput{Name: name, Role: "member"})
		if err != nil {
			t.Fatal(err)
		}
		return pc.Person
	}
	alice, bob := person("alice"), person("bob")
	vend := func(by domain.Person, handle string) *domain.Agent {
		v, err := s.Vend(ctx, by, app.VendInput{Handle: handle, Queues: []string{"build"}, Verbs: domain.ScopeVerbs})
		if err != nil {
			t.Fatal(err)
		}
		return &v.Agent
	}
	mine, bobs := vend(alice, "alice-bot"), vend(bob, "bob-bot")
	poolOf := func(name string, members ...string) (domain.Pool, error) {
		return s.CreatePool(ctx, alice, app.PoolInput{Name: name, Queues: []string{"build"}, Members: members})
	}

	_, err := poolOf("builders", "alice-bot", "bob-bot")
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Pointer != "/members/1" ||
		!strings.Contains(de.Detail, "rollcall agent grant create bob-bot "+alice.ID) {
		t.Fatalf("pool with bob's agent, no grant: %v; want invalid_argument at /members/1 naming the command", err)
	}
	_, err = poolOf("builders", "no-such-bot")
	if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || !strings.Contains(de.Detail, "rollcall agent grant create") {
		t.Errorf("pool with an unknown agent: %v; want the same answer as another person's", err)
	}

	// Only bob (or an admin) grants bob's agent; alice cannot grant it to herself.
	if _, _, err := s.GrantPool(ctx, alice, "bob-bot", app.PoolGrantInput{Person: alice.ID}); domain.CodeOf(err) != domain.CodeNotFound {
		t.Errorf("alice grants bob's agent: %v, want not_found", err)
	}
	if _, _, err := s.GrantPool(ctx, admin, "bob-bot", app.PoolGrantInput{Person: admin.ID}); !errors.As(err, &de) || de.Reason != "grant_to_self" {
		t.Errorf("an admin grants bob's agent to themself: %v, want forbidden grant_to_self", err)
	}
	for _, bad := range []string{"", bob.ID, "no-such-person"} {
		if _, _, err := s.GrantPool(ctx, bob, "bob-bot", app.PoolGrantInput{Person: bad}); !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Pointer != "/person" {
			t.Errorf("grant to %q: %v, want invalid_argument at /person", bad, err)
		}
	}
	g, created, err := s.GrantPool(ctx, bob, "bob-bot", app.PoolGrantInput{Person: alice.ID})
	if err != nil || !created || g.AgentID != bobs.ID || g.PersonID != alice.ID || g.GrantedBy != bob.ID || g.AgentHandle != "bob-bot" {
		t.Fatalf("bob grants alice: %+v created %v, %v", g, created, err)
	}
	if again, created, err := s.GrantPool(ctx, bob, bobs.ID, app.PoolGrantInput{Person: alice.ID}); err != nil || created || !again.CreatedAt.Equal(g.CreatedAt) {
		t.Errorf("grant again: %+v created %v, %v; want the stored grant, not created", again, created, err)
	}
	if gs, err := s.ListPoolGrants(ctx, bob, "bob-bot"); err != nil || len(gs) != 1 || gs[0].PersonID != alice.ID {
		t.Errorf("ListPoolGrants = %+v, %v", gs, err)
	}
	if _, err := s.ListPoolGrants(ctx, alice, "bob-bot"); domain.CodeOf(err) != domain.CodeNotFound {
		t.Errorf("alice lists bob's agent's grants: %v, want not_found", err)
	}

	p, err := poolOf("builders", "alice-bot", "bob-bot")
	if err != nil || !p.HasMember(bobs.ID) || !p.HasMember(mine.ID) {
		t.Fatalf("pool with the granted agent: %+v, %v", p, err)
	}
	held, _, err := s.PushPoolTodo(ctx, alice, "builders", app.PushInput{Queue: "build", Title: "held"})
	if err != nil {
		t.Fatal(err)
	}
	waiting, _, err := s.PushPoolTodo(ctx, alice, "builders", app.PushInput{Queue: "build", Title: "waiting"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Claim(ctx, bobs, held.ID, 600); err != nil || c.AgentID != bobs.ID {
		t.Fatalf("bob's agent claims alice's pooled todo: %+v, %v", c, err)
	}
	if _, err := s.GetTodo(ctx, alice, held.ID); err != nil {
		t.Errorf("alice reads her pool's todo held by bob's agent: %v", err)
	}

	// Revoking takes the agent out of alice's pool; what it holds stays its own.
	if _, err := s.RevokePoolGrant(ctx, alice, "bob-bot", alice.ID); domain.CodeOf(err) != domain.CodeNotFound {
		t.Errorf("alice revokes bob's grant: %v, want not_found", err)
	}
	r, err := s.RevokePoolGrant(ctx, bob, "bob-bot", alice.ID)
	if err != nil || r.PersonID != alice.ID || r.AgentID != bobs.ID {
		t.Fatalf("revoke: %+v, %v", r, err)
	}
	if _, err := s.RevokePoolGrant(ctx, bob, "bob-bot", alice.ID); domain.CodeOf(err) != domain.CodeNotFound {
		t.Errorf("revoke again: %v, want not_found", err)
	}
	if got, err := s.GetPool(ctx, alice, "builders"); err != nil || got.HasMember(bobs.ID) || !got.HasMember(mine.ID) {
		t.Errorf("pool after revoke: %+v, %v; want alice-bot only", got, err)
	}
	if _, err := s.Claim(ctx, bobs, waiting.ID, 60); domain.CodeOf(err) != domain.CodeNotFound {
		t.Errorf("bob's agent claims from the pool after revoke: %v, want not_found", err)
	}
	if _, err := s.Complete(ctx, bobs, held.ID, nil); err != nil {
		t.Errorf("bob's agent completes the todo it held: %v", err)
	}

	var actions []string
	es, err := s.ListAudit(ctx, admin, app.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if strings.HasPrefix(e.Action, "pool.") {
			actions = append(actions, e.Action)
		}
	}
	if strings.Join(actions, ",") != "pool.grant,pool.create,pool.revoke_grant" {
		t.Errorf("pool audit entries = %v, want pool.grant, pool.create, pool.revoke_grant", actions)
	}

	// A pool whose only member's grant is revoked takes no pushes: nobody
	// could ever claim them, and a pool with live todos cannot be deleted.
	if _, _, err := s.GrantPool(ctx, bob, "bob-bot", app.PoolGrantInput{Person: alice.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := poolOf("bobs-only", "bob-bot"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokePoolGrant(ctx, bob, "bob-bot", alice.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.PushPoolTodo(ctx, alice, "bobs-only", app.PushInput{Queue: "build", Title: "orphan"}); !errors.As(err, &de) || de.Code != domain.CodeConflict || !strings.Contains(de.Detail, "no members") {
		t.Errorf("push to a pool with no members left: %v, want conflict naming it", err)
	}
	if _, err := s.DeletePool(ctx, alice, "bobs-only"); err != nil {
		t.Errorf("delete the empty pool: %v", err)
	}

	// A granted member without the pool's queue: the refusal names the
	// missing queue, never the other queues of another person's agent.
	v, err := s.Vend(ctx, bob, app.VendInput{Handle: "bob-secret", Queues: []string{"secret-project"}, Verbs: domain.ScopeVerbs})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GrantPool(ctx, bob, v.Agent.Handle, app.PoolGrantInput{Person: alice.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := poolOf("leaky", "bob-secret"); !errors.As(err, &de) || de.Pointer != "/members/0" || strings.Contains(de.Detail, "secret-project") || !strings.Contains(de.Detail, `"build"`) {
		t.Errorf("pool with a granted member lacking the queue: %v; want /members/0 naming \"build\" and not the member's queues", err)
	}
}

// firstAdmin bootstraps the first admin on s.
func firstAdmin(t *testing.T, s *app.Service) domain.Person {
	t.Helper()
	admin, _ := testkit.BootstrapAdmin(t, s)
	return admin
}
