package domain_test

import (
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
)

func TestLastActiveAdmin(t *testing.T) {
	admin := domain.Person{Name: "ann", Role: domain.RoleAdmin, Admin: true, Active: true}
	member := domain.Person{Name: "bob", Role: domain.RoleMember, Active: true}
	demoted, gone, inactive := admin, admin, admin
	demoted.SetRole(domain.RoleMember)
	gone.Active = false
	inactive.Active = false
	renamed := admin
	renamed.Name = "Ann"
	for _, tc := range []struct {
		name          string
		before, after domain.Person
		activeAdmins  int
		refused       bool
	}{
		{"demote the last", admin, demoted, 1, true},
		{"deactivate the last", admin, gone, 1, true},
		{"demote with another", admin, demoted, 2, false},
		{"deactivate with another", admin, gone, 2, false},
		{"rename the last", admin, renamed, 1, false},
		{"member leaves", member, domain.Person{}, 1, false},
		{"inactive admin demoted", inactive, domain.Person{}, 1, false},
		{"promote", member, admin, 1, false},
	} {
		if got := domain.LeavesNoActiveAdmin(tc.before, tc.after, tc.activeAdmins); got != tc.refused {
			t.Errorf("%s: LeavesNoActiveAdmin = %v, want %v", tc.name, got, tc.refused)
		}
		err := domain.CheckActiveAdmin(tc.before, tc.after, tc.activeAdmins)
		if !tc.refused {
			if err != nil {
				t.Errorf("%s: CheckActiveAdmin = %v, want nil", tc.name, err)
			}
			continue
		}
		want := &domain.Error{Code: domain.CodeConflict, Reason: "last_admin", Detail: "ann is the last active admin; make another person admin first"}
		if de, ok := err.(*domain.Error); !ok || *de != *want {
			t.Errorf("%s: CheckActiveAdmin = %#v, want %#v", tc.name, err, want)
		}
	}
}
