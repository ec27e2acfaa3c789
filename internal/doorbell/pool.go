package doorbell

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// Pool routing (design: Pool routing). A pooled todo rings exactly one
// member at a time: one that can answer now — in, not offline, its queue
// ready, an open stream on this instance — and among those the one rung
// least recently. Every decision is a conditional update in the store
// (store.RouteRing: ring_agent_id only from the value this instance read),
// so instances never repeat or undo one another's decision and need no
// in-memory coordination; what this instance keeps in memory (the rings it
// watches) only tells it when to try a conditional update again.

// maxHeldRoutes bounds the held todos one member's return routes.
const maxHeldRoutes = 100

// RoutePooled rings a pooled todo that no member is rung for (just pushed,
// or back in its pool) at one eligible member here. Nobody eligible here:
// the todo is held, and every instance is told (bus.TodoReady with the
// pool) so one hosting an eligible member rings it. It reports whether it
// rang here.
func (d *Engine) RoutePooled(ctx context.Context, t domain.Todo) bool {
	return d.RoutePooledIn(ctx, t, nil)
}

// RoutePooledIn is RoutePooled of a todo of pool, as the caller has just
// read it (the pool push: one pool read per push instead of two); nil
// reads it. Its members' last_rung_at only order the pick.
func (d *Engine) RoutePooledIn(ctx context.Context, t domain.Todo, pool *domain.Pool) bool {
	if d.routeIn(ctx, t, "", pool) {
		return true
	}
	d.tellInstances(ctx, t)
	return false
}

// RoutePooledID is RoutePooled of a todo known by id (a reaped lease).
func (d *Engine) RoutePooledID(ctx context.Context, id string) {
	t, err := d.store.GetTodo(ctx, id)
	if err != nil {
		d.log.Warn("pooled todo not routed", "todo_id", id, "err", err)
		return
	}
	d.RoutePooled(ctx, t)
}

func (d *Engine) tellInstances(ctx context.Context, t domain.Todo) {
	if d.bus == nil {
		return
	}
	bus.Post(d.bus, bus.TodoReady{TodoReady: readyOf(t)}, func(err error) {
		// Lossy by design (design: Bus delivery): a member's return and the sweep route held todos.
		d.log.Warn("pool signal not published", "todo_id", t.ID, "err", err)
	})
}

// onPooledSignal routes, here only, a pooled todo another instance could
// not ring (or just pushed): off the bus goroutine, it reads the store.
func (d *Engine) onPooledSignal(r domain.TodoReady) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if t, err := d.store.GetTodo(ctx, r.TodoID); err == nil {
			d.route(ctx, t, "")
		}
	}()
}

// route rings t at the least recently rung member eligible here, passing
// the ring on from prev ("" = t rings nobody now). A todo that rings
// someone other than prev, is claimed or is not pooled is left alone.
func (d *Engine) route(ctx context.Context, t domain.Todo, prev string) bool {
	return d.routeIn(ctx, t, prev, nil)
}

// routeIn is route with t's pool as read by the caller (nil: read here).
func (d *Engine) routeIn(ctx context.Context, t domain.Todo, prev string, pool *domain.Pool) bool {
	if t.PoolID == "" || t.AgentID != "" || t.State != domain.TodoPending || t.RingAgentID != prev {
		return false
	}
	if pool == nil || pool.ID != t.PoolID {
		p, err := d.store.GetPool(ctx, store.GetPoolParams{ID: t.PoolID})
		if err != nil {
			d.log.Warn("pooled todo not routed", "todo_id", t.ID, "err", err)
			return false
		}
		pool = &p
	}
	now := d.now()
	m := d.pick(ctx, *pool, t.Queue, prev, now)
	if m == "" {
		return false
	}
	ok, err := d.store.RouteRing(ctx, store.RouteRingParams{TodoID: t.ID, AgentID: m, Prev: prev, At: now})
	if err != nil || !ok {
		d.mu.Lock()
		d.releaseLocked(m) // pick reserved it
		d.mu.Unlock()
		if err != nil {
			d.log.Warn("pooled todo not routed", "todo_id", t.ID, "err", err)
		}
		return false // or: another instance decided, a member claimed it, or its ring budget is spent
	}
	r := readyOf(t)
	r.AgentID = m
	d.deliver(r, ringSweep) // counted by RouteRing
	d.mu.Lock()
	d.watchLocked(poolRing{r: r, member: m, due: now.Add(d.failoverAfter)})
	d.mu.Unlock()
	return true
}

// Claimed tells the engine that the todos were just claimed here (claim,
// claim_next, the claim after complete or fail): a pooled ring this
// instance watches for one of them is answered, so its member counts as
// free again at once rather than at the ring's failover check, and the
// next pooled todo rings a member holding no unanswered ring while one is
// free (design: Pool routing). Todos not rung from here are ignored.
func (d *Engine) Claimed(todos ...domain.Todo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range todos {
		if t.PoolID == "" {
			continue
		}
		if pr, ok := d.pool[t.ID]; ok {
			delete(d.pool, t.ID)
			d.releaseLocked(pr.member)
		}
	}
}

// pick returns the member of pool that can answer a todo of queue now
// here (skip left out) and has the fewest pooled rings from this instance
// outstanding — none, while one is free — among those the one rung least
// recently (never rung first, then by id); "" when none can. The pick is
// reserved (pooling.ringing) under d.mu, so routes running at once on this
// instance spread over the members instead of all reading the same
// last_rung_at; the caller releases it when its RouteRing does not take.
// Memory is asked first; the store (liveness) only for the member about
// to be picked.
func (d *Engine) pick(ctx context.Context, pool domain.Pool, queue, skip string, now time.Time) string {
	ms := append([]domain.PoolMember{}, pool.Members...)
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i].LastRungAt, ms[j].LastRungAt
		switch {
		case a == nil || b == nil:
			return a == nil && b != nil
		case !a.Equal(*b):
			return a.Before(*b)
		}
		return ms[i].AgentID < ms[j].AgentID
	})
	var able []string
	for _, m := range ms {
		if m.AgentID != skip && d.canAnswer(m.AgentID, queue, now) {
			able = append(able, m.AgentID)
		}
	}
	for len(able) > 0 {
		d.mu.Lock()
		best := 0
		for i, id := range able {
			if d.ringing[id] < d.ringing[able[best]] {
				best = i
			}
		}
		m := able[best]
		d.reserveLocked(m)
		d.mu.Unlock()
		if !d.offline(ctx, m) {
			return m
		}
		d.mu.Lock()
		d.releaseLocked(m)
		d.mu.Unlock()
		able = slices.Delete(able, best, best+1)
	}
	return ""
}

// canAnswer reports, from memory, whether the agent is in, its queue is
// ready and it has an open, unstalled stream here.
func (d *Engine) canAnswer(agentID, queue string, now time.Time) bool {
	if p, ok := d.presence.Presence(agentID, now); !ok || p != presence.In || d.presence.NotReady(agentID, queue) {
		return false
	}
	hub := d.sessionHub()
	if hub == nil {
		return false
	}
	for _, si := range hub.AgentSessions(agentID) {
		if si.Streaming && !si.Stalled {
			return true
		}
	}
	return false
}

// offline reports whether the agent's stored liveness is offline.
func (d *Engine) offline(ctx context.Context, agentID string) bool {
	a, err := d.store.GetAgent(ctx, store.AgentRef{ID: agentID})
	return err != nil || a.Liveness.State == "offline"
}

// poolFailoverOnce passes on the pooled rings this instance watches whose
// member can no longer answer (out, queue not ready, no open stream here)
// at once, and those unclaimed failover_after after the ring, to the next
// eligible member; with nobody eligible here the ring is released (held)
// and every instance is told. It returns how many rings it passed on or
// released.
func (d *Engine) poolFailoverOnce(ctx context.Context) int {
	now := d.now()
	d.mu.Lock() // take the watched rings; canAnswer asks the presence cache and the hub, not under d.mu
	watched := make([]poolRing, 0, len(d.pool))
	for _, pr := range d.pool {
		watched = append(watched, pr)
	}
	d.mu.Unlock()
	var check []poolRing
	for _, pr := range watched {
		if !pr.due.After(now) || !d.canAnswer(pr.member, pr.r.Queue, now) {
			check = append(check, pr)
		}
	}
	d.mu.Lock()
	for i := 0; i < len(check); i++ { // taken out; one claimed meanwhile was released by Claimed
		if cur, ok := d.pool[check[i].r.TodoID]; ok && cur == check[i] {
			delete(d.pool, check[i].r.TodoID)
			continue
		}
		check = slices.Delete(check, i, i+1)
		i--
	}
	d.mu.Unlock()
	n := 0
	for _, pr := range check {
		d.mu.Lock()
		d.releaseLocked(pr.member) // no longer watched, unless kept below
		d.mu.Unlock()
		t, err := d.store.GetTodo(ctx, pr.r.TodoID)
		if err != nil || t.RingAgentID != pr.member || t.AgentID != "" || t.State != domain.TodoPending {
			continue // claimed, done, or passed on by another instance
		}
		if d.route(ctx, t, pr.member) {
			n++
			continue
		}
		if d.canAnswer(pr.member, pr.r.Queue, now) && !d.offline(ctx, pr.member) && d.isMember(ctx, t.PoolID, pr.member) {
			d.mu.Lock() // nobody else can answer; the member still can: keep ringing it
			d.reserveLocked(pr.member)
			d.watchLocked(poolRing{r: pr.r, member: pr.member, due: now.Add(d.failoverAfter)})
			d.mu.Unlock()
			continue
		}
		if ok, err := d.store.ReleaseRing(ctx, store.ReleaseRingParams{TodoID: t.ID, AgentID: pr.member}); err == nil && ok {
			n++
			t.RingAgentID = ""
			d.tellInstances(ctx, t)
		}
	}
	return n
}

// isMember reports whether the agent is still a member of the pool: one
// whose pool grant was revoked while a route rang it is not kept ringing
// (design: Pool grants).
func (d *Engine) isMember(ctx context.Context, poolID, agentID string) bool {
	p, err := d.store.GetPool(ctx, store.GetPoolParams{ID: poolID})
	return err == nil && p.HasMember(agentID)
}

// RouteHeld routes the held todos (pending, unclaimed, ringing nobody) of
// the pools the agents are members of, each pool once, oldest todo first,
// when an agent may have become eligible here (its first stream here, a
// transition to in) and on each sweep (all receivers: one pool read per
// pass): the first member to become eligible gets them (design: Pool
// routing). It returns how many it rang.
func (d *Engine) RouteHeld(ctx context.Context, agentIDs ...string) int {
	if len(agentIDs) == 0 {
		return 0
	}
	pools, err := d.store.ListPools(ctx, store.ListPoolsParams{MemberIDs: agentIDs})
	if err != nil {
		d.log.Warn("held pooled todos not routed", "err", err)
		return 0
	}
	n := 0
	for i := range pools {
		p := &pools[i]
		d.eachHeld(ctx, p, func(t domain.Todo) bool {
			if d.routeIn(ctx, t, "", p) {
				n++
			}
			return true
		})
	}
	return n
}

// RouteHeldOf routes the held todos of pool (as the caller has just read
// it, with its members as they now are): each rings a member eligible
// here, or every instance is told, as a push would (RoutePooledIn).
func (d *Engine) RouteHeldOf(ctx context.Context, pool *domain.Pool) {
	d.eachHeld(ctx, pool, func(t domain.Todo) bool {
		d.RoutePooledIn(ctx, t, pool)
		return true
	})
}

// maxHeldScan bounds the pending todos of one pool eachHeld reads (in
// pages of maxHeldRoutes).
const maxHeldScan = 10 * maxHeldRoutes

// eachHeld calls f with the pool's held todos that can still ring (ring
// budget left), oldest first, at most maxHeldRoutes of them, until f
// returns false. Pending todos that ring someone are read past, not
// counted, so a pool whose oldest todos all ring (or spent their budget)
// still reaches the held ones behind them, up to maxHeldScan read.
func (d *Engine) eachHeld(ctx context.Context, pool *domain.Pool, f func(domain.Todo) bool) {
	after, held := "", 0
	for read := 0; read < maxHeldScan; {
		ts, err := d.store.ListTodos(ctx, store.ListTodosParams{PoolID: pool.ID, State: domain.TodoPending, Limit: maxHeldRoutes, AfterID: after})
		if err != nil {
			d.log.Warn("held pooled todos not routed", "pool_id", pool.ID, "err", err)
			return
		}
		for _, t := range ts {
			if t.AgentID != "" || t.RingAgentID != "" || t.RingAttempts >= domain.MaxRings {
				continue
			}
			if held++; !f(t) || held >= maxHeldRoutes {
				return
			}
		}
		if len(ts) < maxHeldRoutes {
			return
		}
		read += len(ts)
		after = ts[len(ts)-1].ID
	}
}
