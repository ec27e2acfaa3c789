package domain

import (
	"slices"
	"time"
)

// Pool is a person's named set of member agents sharing queues (design:
// Pools). A todo pushed to the pool belongs to no agent until a member
// claims it; its doorbell rings one eligible member at a time (design: Pool
// routing).
type Pool struct {
	ID        string       `json:"id"`
	OwnerID   string       `json:"owner_id"`
	Name      string       `json:"name"`
	Queues    []string     `json:"queues"`
	Members   []PoolMember `json:"members"`
	CreatedAt time.Time    `json:"created_at"`
}

// PoolMember is one member agent of a pool and when a todo of the pool
// last rang it (nil: never), what the least-recently-rung pick orders by.
type PoolMember struct {
	AgentID    string     `json:"agent_id"`
	Handle     string     `json:"handle,omitempty"`
	LastRungAt *time.Time `json:"last_rung_at,omitempty"`
}

// Bounds of a pool (design: Pools).
const (
	MaxPoolQueues  = 100
	MaxPoolMembers = 200
)

// HasMember reports whether the agent is a member of the pool.
func (p *Pool) HasMember(agentID string) bool {
	return slices.ContainsFunc(p.Members, func(m PoolMember) bool { return m.AgentID == agentID })
}

// HasQueue reports whether q is one of the pool's queues.
func (p *Pool) HasQueue(q string) bool { return slices.Contains(p.Queues, q) }

// ValidatePool checks a pool's name (the handle form, pointer /name), its
// queues (one to MaxPoolQueues distinct queue names, /queues/N) and that
// it has one to MaxPoolMembers members (/members).
func ValidatePool(name string, queues []string, members int) error {
	if !ValidName(name) {
		return Errorf(CodeInvalidArgument, "name %q must match ^[a-z0-9][a-z0-9._-]*$ (at most %d bytes)", name, MaxHandleLen).At("/name")
	}
	if len(queues) == 0 || len(queues) > MaxPoolQueues {
		return Errorf(CodeInvalidArgument, "a pool has 1 to %d queues", MaxPoolQueues).At("/queues")
	}
	for i, q := range queues {
		if !ValidName(q) {
			return Errorf(CodeInvalidArgument, "queue %q must match ^[a-z0-9][a-z0-9._-]*$", q).At("/queues/" + itoa(i))
		}
		if slices.Contains(queues[:i], q) {
			return Errorf(CodeInvalidArgument, "queue %q is listed twice", q).At("/queues/" + itoa(i))
		}
	}
	if members == 0 || members > MaxPoolMembers {
		return Errorf(CodeInvalidArgument, "a pool has 1 to %d members", MaxPoolMembers).At("/members")
	}
	return nil
}

// PoolGrant is an agent owner's grant to another person: that person may
// make the agent a member of their pools (design: Pool grants). At most
// one per agent and person; revoking it takes the agent out of that
// person's pools.
type PoolGrant struct {
	AgentID     string    `json:"agent_id"`
	AgentHandle string    `json:"agent_handle,omitempty"`
	PersonID    string    `json:"person_id"`
	GrantedBy   string    `json:"granted_by"`
	CreatedAt   time.Time `json:"created_at"`
}
