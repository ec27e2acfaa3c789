package doorbell

import (
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
)

// pooling is the engine's pool routing state (design: Pool routing).
type pooling struct {
	pool    map[string]poolRing // pooled rings made here and watched, by todo id
	ringing map[string]int      // per member, how many of pool ring it unanswered (reserved as picked)
	bus     bus.Bus             // tells every instance of a pooled todo to route
}

// reserveLocked counts one more pooled ring on member. Callers hold d.mu.
func (p *pooling) reserveLocked(member string) {
	if p.ringing == nil {
		p.ringing = map[string]int{}
	}
	p.ringing[member]++
}

// releaseLocked counts one pooled ring on member less. Callers hold d.mu.
func (p *pooling) releaseLocked(member string) {
	if p.ringing[member] <= 1 {
		delete(p.ringing, member)
		return
	}
	p.ringing[member]--
}

// watchLocked watches a pooled ring made here; its member is reserved
// already. A ring of the same todo watched before (passed on) releases its
// member. Callers hold d.mu.
func (p *pooling) watchLocked(pr poolRing) {
	if p.pool == nil {
		p.pool = map[string]poolRing{}
	}
	if old, ok := p.pool[pr.r.TodoID]; ok {
		p.releaseLocked(old.member)
	}
	p.pool[pr.r.TodoID] = pr
}

// poolRing is a ring of a pooled todo this instance made and watches.
type poolRing struct {
	r      domain.TodoReady
	member string
	due    time.Time
}
