package sqlite

import "sync"

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
