package storeutil

import (
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// ChangePerson runs the use case's change of a person (store.UpdatePersonParams.Change)
// on cur, read under the write's lock, with others the active admins other
// than cur (design: Last active admin). It returns the person to write,
// its ID and CreatedAt kept, and its deactivated_at: now when Active turns
// false, kept while it stays false, nil while active. Change's error is
// returned as is.
func ChangePerson(cur domain.Person, others int64, now time.Time, change func(cur domain.Person, activeAdmins int) (domain.Person, error)) (domain.Person, *time.Time, error) {
	n := int(others)
	if cur.ActiveAdmin() {
		n++
	}
	next, err := change(cur, n)
	if err != nil {
		return domain.Person{}, nil, err
	}
	next.ID, next.CreatedAt = cur.ID, cur.CreatedAt
	var deact *time.Time
	switch {
	case next.Active:
	case cur.Active:
		deact = &now
	default:
		deact = cur.DeactivatedAt
	}
	return next, deact, nil
}
