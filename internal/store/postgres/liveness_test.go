package postgres

import (
	"testing"

	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/storetest"
)

// twinStore lets the liveness contract open a second pool on the same
// database, as a second Rollcall instance would (storetest.Twinner).
type twinStore struct {
	*Store
	url string
}

func (s twinStore) Twin(t *testing.T) store.Store { return openT(t, s.url) }

// TestLivenessContract runs the liveness part of the store contract
// (DESIGN.md §5.2) with two pools per database where it matters.
func TestLivenessContract(t *testing.T) {
	dbURL := pgtest.FreshDatabase(t)
	storetest.RunLiveness(t, storetest.Harness{Parallel: true, New: func(t *testing.T) storetest.Instance {
		u := pgtest.FreshSchema(t, dbURL)
		return storetest.Instance{Store: twinStore{Store: openT(t, u), url: u}}
	}})
}
