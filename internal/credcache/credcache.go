// Package credcache holds the short-lived caches of credential lookups
// (design: Credential cache): Cache maps an agent credential hash to the
// principal it authenticated, for the MCP requests that follow; Verdicts
// remembers, per token hash, the edge's answer to "could this token
// authenticate" (design: The failed-auth limit). Entries live a TTL.
// Revoking, rotating or deactivating drops an agent's entries
// (ForgetAgent); a lost bus signal is bounded by the TTL. Each holds at
// most maxEntries entries.
package credcache

import (
	"errors"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// maxEntries bounds each cache: past it, expired entries go, then all.
const maxEntries = 10000

// ttlMap is a map whose entries are served for ttl after they were put;
// safe for concurrent use.
type ttlMap[V any] struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]stamped[V]
}

type stamped[V any] struct {
	v  V
	at time.Time
}

func newTTLMap[V any](ttl time.Duration) ttlMap[V] {
	return ttlMap[V]{ttl: ttl, m: map[string]stamped[V]{}}
}

// get returns the value put for k less than the TTL before now (and not
// after now).
func (c *ttlMap[V]) get(k string, now time.Time) (V, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || now.Sub(e.at) >= c.ttl || now.Sub(e.at) < 0 {
		var zero V
		return zero, false
	}
	return e.v, true
}

func (c *ttlMap[V]) put(k string, v V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxEntries {
		for key, e := range c.m {
			if now.Sub(e.at) >= c.ttl {
				delete(c.m, key)
			}
		}
		if len(c.m) >= maxEntries {
			clear(c.m)
		}
	}
	c.m[k] = stamped[V]{v: v, at: now}
}

func (c *ttlMap[V]) drop(k string) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// Cache is the agent credential cache; safe for concurrent use.
type Cache struct{ m ttlMap[domain.Principal] }

// New returns an empty cache whose entries live ttl.
func New(ttl time.Duration) *Cache { return &Cache{m: newTTLMap[domain.Principal](ttl)} }

// Get returns a copy of the principal cached for hash when it was put
// less than the TTL before now (and not after now).
func (c *Cache) Get(hash string, now time.Time) (domain.Principal, bool) {
	p, ok := c.m.get(hash, now)
	if !ok {
		return domain.Principal{}, false
	}
	return clone(p), true
}

// Put caches a copy of the agent principal p for hash at now.
func (c *Cache) Put(hash string, p domain.Principal, now time.Time) { c.m.put(hash, clone(p), now) }

// Drop forgets the lookup of one credential hash.
func (c *Cache) Drop(hash string) { c.m.drop(hash) }

// ForgetAgent forgets every cached lookup of the agent.
func (c *Cache) ForgetAgent(agentID string) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	for k, v := range c.m.m {
		if v.v.Agent.ID == agentID {
			delete(c.m.m, k)
		}
	}
}

func clone(p domain.Principal) domain.Principal {
	a := *p.Agent
	return domain.Principal{Agent: &a, CredentialID: p.CredentialID}
}

// Verdicts remembers, per token hash, whether a token could authenticate:
// yes for a person token that did, no for a hash no credential has. Safe
// for concurrent use.
type Verdicts struct{ m ttlMap[bool] }

// NewVerdicts returns an empty set of verdicts that live ttl.
func NewVerdicts(ttl time.Duration) *Verdicts { return &Verdicts{m: newTTLMap[bool](ttl)} }

// Get returns the verdict remembered for hash (seen false when none is
// younger than the TTL).
func (v *Verdicts) Get(hash string, now time.Time) (ok, seen bool) { return v.m.get(hash, now) }

// Put remembers the verdict ok for hash at now.
func (v *Verdicts) Put(hash string, ok bool, now time.Time) { v.m.put(hash, ok, now) }

// Decide answers for hash from a verdict younger than the TTL, else from
// lookup, which reports whether the token could authenticate and whether a
// yes is to be remembered: a lookup failing with domain.ErrNotFound (no
// credential has the hash) is remembered as no; any other error answers yes,
// so that the handler, not the limit, decides while the store cannot tell.
func (v *Verdicts) Decide(hash string, now time.Time, lookup func() (ok, keep bool, err error)) bool {
	if ok, seen := v.Get(hash, now); seen {
		return ok
	}
	ok, keep, err := lookup()
	switch {
	case errors.Is(err, domain.ErrNotFound):
		v.Put(hash, false, now)
		return false
	case err != nil:
		return true
	}
	if ok && keep {
		v.Put(hash, true, now)
	}
	return ok
}
