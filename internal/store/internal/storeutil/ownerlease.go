package storeutil

import "slices"

// TakeOverOwnerLease is store.OwnerLeaseStore.TakeOverOwnerLease over
// either dialect (design: Owner lease): in one transaction (run, which may
// retry it from the start), drop deletes the lease of the instance taken
// over if it has expired and reports whether it did; only then move hands
// its agents to the taker and returns their ids. It reports whether the
// lease was taken and the ids, sorted.
func TakeOverOwnerLease[Tx any](run func(func(Tx) error) error, drop func(Tx) (bool, error), move func(Tx) ([]string, error)) (bool, []string, error) {
	var won bool
	var ids []string
	err := run(func(tx Tx) error {
		won, ids = false, nil
		dropped, err := drop(tx)
		if err != nil || !dropped {
			return err
		}
		won = true
		ids, err = move(tx)
		return err
	})
	if err != nil {
		return false, nil, err
	}
	slices.Sort(ids)
	return won, ids, nil
}
