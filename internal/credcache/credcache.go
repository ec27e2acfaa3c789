// Package credcache holds the short-lived caches of credential lookups
// (design: Credential cache): Cache maps an agent credential hash to the
// principal it authenticated, for the MCP requests that follow; Tokens
// maps a personal token hash to its person and token, for the REST
// requests that follow; Agents maps an agent ref to the agent a push
// addresses; Verdicts remembers, per token hash, the edge's answer to
// "could this token authenticate" (design: The failed-auth limit). Entries
// live a TTL. Revoking, rotating, deactivating or handing over drops an
// agent's entries (ForgetAgent), revoking a token or changing a person
// drops theirs (ForgetToken, ForgetPerson); a lost bus signal is bounded
// by the TTL. A lookup that raced such a forget is not cached (Gen, PutAt).
// Each holds at most maxEntries entries.
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
	gen uint64 // counts forgets: a put of a lookup begun before one is dropped
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

func (c *ttlMap[V]) put(k string, v V, now time.Time) { c.putAt(k, v, now, 0, false) }

// generation is the count of forgets so far: taken before a store lookup,
// it lets putAt refuse what the lookup read when a forget came in between.
func (c *ttlMap[V]) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// putAt puts v for k unless check is set and a forget happened since gen.
func (c *ttlMap[V]) putAt(k string, v V, now time.Time, gen uint64, check bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if check && c.gen != gen {
		return // the row read may predate a revocation: read it again next time
	}
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

// forget drops every entry whose value matches and counts a forget.
func (c *ttlMap[V]) forget(match func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for k, v := range c.m {
		if match(v.v) {
			delete(c.m, k)
		}
	}
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
	c.m.forget(func(p domain.Principal) bool { return p.Agent.ID == agentID })
}

// Gen is taken before a store lookup and handed to PutAt.
func (c *Cache) Gen() uint64 { return c.m.generation() }

// PutAt is Put unless ForgetAgent ran since gen (Gen): a lookup that began
// before a revocation may have read the row as it was.
func (c *Cache) PutAt(hash string, p domain.Principal, now time.Time, gen uint64) {
	c.m.putAt(hash, clone(p), now, gen, true)
}

// PersonToken is a personal token's lookup: its person and the token.
type PersonToken struct {
	Person domain.Person
	Token  domain.PersonToken
}

// Tokens is the personal token cache (design: Credential cache); safe for
// concurrent use. Callers do not change what the pointers in an entry
// point at.
type Tokens struct{ m ttlMap[PersonToken] }

// NewTokens returns an empty token cache whose entries live ttl.
func NewTokens(ttl time.Duration) *Tokens { return &Tokens{m: newTTLMap[PersonToken](ttl)} }

// Get returns the lookup cached for hash less than the TTL before now.
func (c *Tokens) Get(hash string, now time.Time) (PersonToken, bool) { return c.m.get(hash, now) }

// Gen is taken before a store lookup and handed to PutAt.
func (c *Tokens) Gen() uint64 { return c.m.generation() }

// PutAt caches v for hash at now unless a Forget ran since gen.
func (c *Tokens) PutAt(hash string, v PersonToken, now time.Time, gen uint64) {
	c.m.putAt(hash, v, now, gen, true)
}

// Drop forgets the lookup of one token hash.
func (c *Tokens) Drop(hash string) { c.m.drop(hash) }

// ForgetToken forgets the lookups of the token with this id.
func (c *Tokens) ForgetToken(id string) {
	c.m.forget(func(v PersonToken) bool { return v.Token.ID == id })
}

// ForgetPerson forgets the lookups of every token of the person.
func (c *Tokens) ForgetPerson(id string) {
	c.m.forget(func(v PersonToken) bool { return v.Person.ID == id })
}

// Agents caches the agent a ref (id or handle) named, for pushes (design:
// Credential cache); safe for concurrent use. Callers do not change what
// an entry's slices and pointers point at.
type Agents struct{ m ttlMap[domain.Agent] }

// NewAgents returns an empty agent cache whose entries live ttl.
func NewAgents(ttl time.Duration) *Agents { return &Agents{m: newTTLMap[domain.Agent](ttl)} }

// Get returns the agent cached for ref less than the TTL before now.
func (c *Agents) Get(ref string, now time.Time) (domain.Agent, bool) { return c.m.get(ref, now) }

// Gen is taken before a store lookup and handed to PutAt.
func (c *Agents) Gen() uint64 { return c.m.generation() }

// PutAt caches a for ref at now unless ForgetAgent ran since gen.
func (c *Agents) PutAt(ref string, a domain.Agent, now time.Time, gen uint64) {
	c.m.putAt(ref, a, now, gen, true)
}

// ForgetAgent forgets every ref cached for the agent.
func (c *Agents) ForgetAgent(agentID string) {
	c.m.forget(func(a domain.Agent) bool { return a.ID == agentID })
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
