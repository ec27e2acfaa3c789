package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/client"
	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store/sqlite"
)

// TestCLIPersonsAndTokens walks `rollcall person …` and `rollcall token …`
// against the real stack.
func TestCLIPersonsAndTokens(t *testing.T) {
	env := startAPIEnv(t)

	r := run("person", "add", "bob", "--json").ok(t)
	var created app.PersonCreated
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.Person.Role != domain.RoleMember || !strings.HasPrefix(created.Token.Token, app.PersonTokenPrefix) {
		t.Fatalf("person add: %v %+v", err, created)
	}
	r = run("person", "list").ok(t)
	if !strings.Contains(r.stdout, "bob") || !strings.Contains(r.stdout, "admin") {
		t.Fatalf("person list:\n%s", r.stdout)
	}
	run("person", "update", created.Person.ID, "--role", "admin").ok(t)
	admin, _ := env.Service.AuthenticatePerson(t.Context(), env.AdminToken)
	run("person", "update", created.Person.ID, "--role", "member").ok(t)
	run("person", "deactivate", admin.ID).fails(t, 1, "you cannot deactivate yourself")
	run("person", "update", created.Person.ID).fails(t, 2, "nothing to change")

	// bob's own tokens; bob's first token stops working once he is deactivated.
	bob := []string{"--token", created.Token.Token}
	r = run(append([]string{"person", "show", "me"}, bob...)...).ok(t)
	if want := "person bob (" + created.Person.ID + "): role member, active\n"; r.stdout != want {
		t.Fatalf("person show me as bob: %q, want %q", r.stdout, want)
	}
	run(append([]string{"person", "show", admin.ID}, bob...)...).fails(t, 1, "not found")
	r = run(append([]string{"token", "create", "laptop", "--expires", "720h", "--json"}, bob...)...).ok(t)
	var minted app.MintedToken
	if err := json.Unmarshal([]byte(r.stdout), &minted); err != nil || minted.ExpiresAt == nil {
		t.Fatalf("token create: %v %s", err, r.stdout)
	}
	r = run(append([]string{"token", "list"}, bob...)...).ok(t)
	if !strings.Contains(r.stdout, "laptop") || !strings.Contains(r.stdout, "first") || strings.Contains(r.stdout, minted.Token) {
		t.Fatalf("token list:\n%s", r.stdout)
	}
	run(append([]string{"token", "revoke", minted.ID}, bob...)...).ok(t)
	run(append([]string{"token", "revoke", minted.ID}, bob...)...).fails(t, 1, "not found")
	if _, err := client.New(env.URL, minted.Token).ListTokens(t.Context()); client.StatusOf(err) != 401 {
		t.Fatalf("revoked token: %v, want 401", err)
	}
	run("person", "deactivate", created.Person.ID).ok(t)
	if _, err := client.New(env.URL, created.Token.Token).ListTokens(t.Context()); client.StatusOf(err) != 401 {
		t.Fatalf("deactivated person's token: %v, want 401", err)
	}
}

// TestCLIAdminTokenRecovery: `rollcall admin token --store` prints a new
// admin token straight from the store (the server stopped), audited.
func TestCLIAdminTokenRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	st, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	svc := app.New(app.Options{Store: st})
	if _, _, err := svc.Bootstrap(t.Context(), ""); err != nil {
		t.Fatal(err)
	}
	svc.Close()
	st.Close()

	r := run("admin", "token", "--store", "sqlite:"+path).ok(t)
	token := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(token, app.PersonTokenPrefix) || !strings.Contains(r.stderr, "new token for admin") {
		t.Fatalf("admin token: stdout %q stderr %q", r.stdout, r.stderr)
	}
	st, err = sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc = app.New(app.Options{Store: st})
	defer svc.Close()
	p, err := svc.AuthenticatePerson(t.Context(), token)
	if err != nil || !p.Admin {
		t.Fatalf("recovered token authenticates %+v, %v", p, err)
	}
	entries, err := svc.ListAudit(t.Context(), p, app.AuditFilter{})
	if err != nil || len(entries) != 1 || entries[0].Action != "admin.recover" || entries[0].Actor != "system:recovery" {
		t.Fatalf("audit after recovery: %+v, %v", entries, err)
	}
}

// TestCLIAdminTokenRefusesAStrangeStore: a mistyped --store path is not
// created, and a store no server ever started on gets no token (it would
// work on no real server).
func TestCLIAdminTokenRefusesAStrangeStore(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo.db")
	run("admin", "token", "--store", "sqlite:"+missing).fails(t, 1, "no database there")
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("a database was created at the mistyped path: %v", err)
	}
	empty := filepath.Join(dir, "empty.db")
	st, err := sqlite.Open(t.Context(), empty)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	r := run("admin", "token", "--store", "sqlite:"+empty).fails(t, 1, "has no persons")
	if strings.Contains(r.stdout, app.PersonTokenPrefix) {
		t.Fatalf("a token was printed for an empty store: %q", r.stdout)
	}
}
