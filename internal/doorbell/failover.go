package doorbell

import (
	"context"
	"slices"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
	"github.com/rollcall/rollcall/internal/store"
)

// FailoverOnce handles the failover checks that are due (design:
// Doorbell failover): a todo rung on one of several sessions of its agent here
// and still pending failover_after later is rung on a session not rung yet
// for it and streaming, not stalled and not itself failed over from — the
// rings of one pass counted in one conditional statement
// (store.FailoverRings: budget and unclaimed state hold) — and the session
// that did not answer is not preferred until its client acts again. Held
// doorbells (agent out, queue not ready) are not failed over. Pooled rings
// pass from member to member (poolFailoverOnce; design: Pool routing). It
// returns how many todos were rung again.
func (d *Engine) FailoverOnce(ctx context.Context) int {
	return d.poolFailoverOnce(ctx) + d.failoverSessions(ctx)
}

// failoverSessions is FailoverOnce across the sessions of one agent.
func (d *Engine) failoverSessions(ctx context.Context) int {
	now := d.now()
	d.mu.Lock()
	var due []failover
	for d.foHead < len(d.fo) && !d.fo[d.foHead].due.After(now) {
		due = append(due, d.fo[d.foHead])
		d.fo[d.foHead] = failover{}
		d.foHead++
	}
	if d.foHead > 1024 && d.foHead*2 >= len(d.fo) {
		n := copy(d.fo, d.fo[d.foHead:])
		clear(d.fo[n:])
		d.fo, d.foHead = d.fo[:n], 0
	}
	for id, at := range d.suspect {
		if now.Sub(at) >= SuspectFor {
			delete(d.suspect, id)
		}
	}
	d.mu.Unlock()
	hub := d.sessionHub()
	if hub == nil || len(due) == 0 {
		return 0
	}
	// Filter in memory, then count the whole batch in one statement.
	type cand struct {
		f      failover
		others []SessionInfo
	}
	var cands []cand
	rings := make([]store.FailoverRing, 0, len(due))
	bad := d.bad(now)
	for _, f := range due {
		// Only sessions that can take it now: an open stream the client is
		// not known to ignore (a killed client's session lingers streamless).
		var others []SessionInfo
		for _, si := range hub.AgentSessions(f.r.AgentID) {
			if !slices.Contains(f.tried, si.ID) && si.Streaming && !si.Stalled && !bad(si) {
				others = append(others, si)
			}
		}
		if p, ok := d.presence.Presence(f.r.AgentID, now); !ok || p != presence.In || d.presence.NotReady(f.r.AgentID, f.r.Queue) {
			continue // held: not failed over
		}
		if len(others) == 0 {
			// None can take it at this moment (a stream reconnecting, a
			// session stalled): look again later rather than leave it to
			// the sweep's minutes. Nothing was counted.
			d.again(f, f.rungAt, now)
			continue
		}
		cands = append(cands, cand{f, others})
		rings = append(rings, store.FailoverRing{TodoID: f.r.TodoID, RungAt: f.rungAt})
	}
	if len(rings) == 0 {
		return 0
	}
	ok := map[string]bool{}
	for batch := range slices.Chunk(rings, failoverBatch) {
		counted, err := d.store.FailoverRings(ctx, store.FailoverRingsParams{Rings: batch, At: now})
		if err != nil {
			d.log.Warn("doorbell failovers not rung", "todos", len(batch), "err", err)
			continue
		}
		for _, id := range counted {
			ok[id] = true
		}
	}
	rung := 0
	for _, c := range cands {
		f, others := c.f, c.others
		if !ok[f.r.TodoID] {
			continue // claimed, done, budget spent, or rung since by the sweep
		}
		delete(ok, f.r.TodoID) // listed twice: rung once
		d.mu.Lock()
		d.suspect[f.session] = now
		order := pickOrder(others, d.rr[f.r.AgentID], d.badLocked(now))
		d.rr[f.r.AgentID]++
		d.mu.Unlock()
		msg := domain.TodoDoorbell(f.r)
		taken := false
		for _, si := range order {
			if hub.Notify(si.ID, msg) != nil {
				continue
			}
			taken = true
			rung++
			d.metrics.DoorbellRung()
			d.log.Info("doorbell failed over to another session", "todo_id", f.r.TodoID, "agent_id", f.r.AgentID, "from", f.session, "to", si.ID)
			if len(others) > 1 {
				d.watch(f.r, si.ID, append(slices.Clone(f.tried), si.ID), now)
			}
			break
		}
		if !taken {
			// No session could queue it (their outboxes full, or they
			// closed since): try again one failover period later rather
			// than leave it to the sweep's minutes.
			d.log.Warn("doorbell failover found no session to take it; trying again later", "todo_id", f.r.TodoID, "agent_id", f.r.AgentID)
			d.again(f, now, now) // counted at now by FailoverRings
		}
	}
	return rung
}

// Redeliver hands doorbells a session could not take — it closed, or its
// stream ended before they were written — to another session of the agent
// here at once (design: Redelivery on session loss). They were counted when
// first rung; this is the same ring reaching a session that can read. The
// session they were queued on is not preferred until its client acts
// again. It returns how many were handed on.
func (d *Engine) Redeliver(agentID, fromSession string, msgs []domain.ChannelMessage) int {
	hub := d.sessionHub()
	if hub == nil || len(msgs) == 0 {
		return 0
	}
	now := d.now()
	var others []SessionInfo
	for _, si := range hub.AgentSessions(agentID) {
		if si.ID != fromSession {
			others = append(others, si)
		}
	}
	d.mu.Lock()
	d.suspect[fromSession] = now
	d.mu.Unlock()
	if len(others) == 0 {
		return 0
	}
	n := 0
	for _, msg := range msgs {
		d.mu.Lock()
		order := pickOrder(others, d.rr[agentID], d.badLocked(now))
		d.rr[agentID]++
		d.mu.Unlock()
		for _, si := range order {
			if hub.Notify(si.ID, msg) != nil {
				continue
			}
			n++
			d.log.Info("doorbell handed to another session", "todo_id", msg.Meta["todo_id"], "agent_id", agentID, "from", fromSession, "to", si.ID)
			break
		}
	}
	return n
}
