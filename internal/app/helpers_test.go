package app_test

import (
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/testkit"
)

// openStore opens a fresh SQLite store in tb's temp dir, closed when tb ends.
func openStore(tb testing.TB) *sqlite.Store { return testkit.OpenSQLite(tb) }

// bootstrapAdmin bootstraps the first admin on s and returns them
// authenticated by their personal token.
func bootstrapAdmin(t *testing.T, s *app.Service) domain.Person {
	t.Helper()
	admin, _ := testkit.BootstrapAdmin(t, s)
	return admin
}

// vendAgent vends in on s as admin and returns the new agent
// authenticated by its credential.
func vendAgent(t *testing.T, s *app.Service, admin domain.Person, in app.VendInput) domain.Principal {
	t.Helper()
	v, err := s.Vend(t.Context(), admin, in)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.AuthenticateAgent(t.Context(), v.Credential)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
