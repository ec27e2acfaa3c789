// Package credcache holds the short-lived cache of agent credential
// lookups that MCP requests use (design: Credential cache): a credential
// hash maps to the principal it authenticated, for a TTL. Revoking,
// rotating or deactivating drops an agent's entries (ForgetAgent); a lost
// bus signal is bounded by the TTL. It holds at most maxEntries lookups.
package credcache

import (
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// maxEntries bounds the cache: past it, expired entries go, then all.
const maxEntries = 10000

type entry struct {
	p  domain.Principal
	at time.Time
}

// Cache is safe for concurrent use.
type Cache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]entry // credential hash → lookup
}

// New returns an empty cache whose entries live ttl.
func New(ttl time.Duration) *Cache { return &Cache{ttl: ttl, m: map[string]entry{}} }

// Get returns a copy of the principal cached for hash when it was put
// less than the TTL before now (and not after now).
func (c *Cache) Get(hash string, now time.Time) (domain.Principal, bool) {
	c.mu.Lock()
	e, ok := c.m[hash]
	c.mu.Unlock()
	if !ok || now.Sub(e.at) >= c.ttl || now.Sub(e.at) < 0 {
		return domain.Principal{}, false
	}
	return clone(e.p), true
}

// Put caches a copy of the agent principal p for hash at now.
func (c *Cache) Put(hash string, p domain.Principal, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxEntries {
		for k, v := range c.m {
			if now.Sub(v.at) >= c.ttl {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxEntries {
			clear(c.m)
		}
	}
	c.m[hash] = entry{p: clone(p), at: now}
}

// Drop forgets the lookup of one credential hash.
func (c *Cache) Drop(hash string) {
	c.mu.Lock()
	delete(c.m, hash)
	c.mu.Unlock()
}

// ForgetAgent forgets every cached lookup of the agent.
func (c *Cache) ForgetAgent(agentID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.m {
		if v.p.Agent.ID == agentID {
			delete(c.m, k)
		}
	}
}

func clone(p domain.Principal) domain.Principal {
	a := *p.Agent
	return domain.Principal{Agent: &a, CredentialID: p.CredentialID}
}
