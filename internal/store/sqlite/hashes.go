package sqlite

import (
	"context"
	"sync"
)

// hashSet holds the hash of every agent credential and personal token in
// the database (revoked ones too), so that the failed-auth limit's
// question "could this hash authenticate" is answered for an unknown hash
// without a statement (design: The failed-auth limit). It is exact because
// this Store is the database's only writer: Open takes the file's lock, and
// every credential and token is inserted through it, which adds the hash
// before the insert (a rolled-back insert leaves a hash that only costs a
// probe). A hash in the set still goes to the store, which decides
// revoked, expired, deactivated.
type hashSet struct {
	mu sync.RWMutex
	m  map[string]struct{}
}

func (h *hashSet) add(hash string) {
	h.mu.Lock()
	if h.m == nil {
		h.m = make(map[string]struct{})
	}
	h.m[hash] = struct{}{}
	h.mu.Unlock()
}

func (h *hashSet) has(hash string) bool {
	h.mu.RLock()
	_, ok := h.m[hash]
	h.mu.RUnlock()
	return ok
}

// load reads every stored hash (at Open, after the migrations).
func (s *Store) loadHashes(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, `SELECT hash FROM credentials UNION ALL SELECT hash FROM person_tokens`)
	if err != nil {
		return mapErr("load credential hashes", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			return mapErr("load credential hashes", err)
		}
		s.hashes.add(h)
	}
	return mapErr("load credential hashes", rows.Err())
}
