package tracker

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/liveness"
)

// Ownership of an agent's deadline across instances (design:
// Deadline ownership: "no instance reports an agent offline while another
// holds a heartbeat fresher than the timeout").
//
//   - The instance that receives a heartbeat for an agent it does not own
//     takes ownership and broadcasts "<agent_id>:<instance>:<unix_micro>" on
//     bus.ChannelLiveness, carrying its heartbeat time. Every other
//     instance that tracks the agent drops its deadline WITHOUT publishing
//     and keeps the newer heartbeat time. The bus delivers in one order to
//     every instance, so the last claim delivered is the owner everywhere.
//   - A starting instance loads agents stored online (start rule) and asks
//     "?:<instance>"; every owner answers with claims for the agents it
//     holds fresh heartbeats of, so the newcomer does not time out agents
//     that heartbeat elsewhere.
//   - An instance that lost ownership keeps a watch: from the last known
//     heartbeat + timeout on, it reads the row once per persist interval and
//     keeps the newest stored heartbeat. The owner flushes within one
//     persist interval, so a stored heartbeat older than timeout + 2 ×
//     persist interval proves that no instance holds a fresh one: if the
//     row is not offline by then, the owner is gone, and this instance takes
//     over and reports offline once (no ghost). With owner leases on
//     (lease.go; design: Owner lease) the lease's take-over tells it within
//     2 s instead; the watch stays the net.

// maxClaimPayload keeps a batch of claims under PostgreSQL's NOTIFY limit.
const maxClaimPayload = 7000

func (t *Tracker) publishClaim(agentID string, hb time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	claim := bus.LivenessClaims{Claims: []bus.LivenessClaim{{AgentID: agentID, Instance: t.instance, Heartbeat: hb}}}
	if err := bus.Send(ctx, t.bus, claim); err != nil {
		t.log.Warn("liveness claim not broadcast; another instance may time the agent out early", "agent_id", agentID, "err", err)
	}
}

// RequestClaims asks every other instance to claim the agents whose fresh
// heartbeats it holds (Start does; the server also calls it after the bus
// reconnected, since claims sent meanwhile were lost).
func (t *Tracker) RequestClaims(ctx context.Context) {
	if err := bus.Send(ctx, t.bus, bus.LivenessSync{Instance: t.instance}); err != nil {
		t.log.Warn("liveness claim request not broadcast", "err", err)
	}
}

// onClaims yields the agents another instance claims. It runs on the bus's
// delivery goroutine and only takes entry locks.
func (t *Tracker) onClaims(sig bus.LivenessClaims) {
	for _, c := range sig.Claims {
		if c.Instance == t.instance {
			continue
		}
		if e := t.lookup(c.AgentID); e != nil {
			t.yield(e, c.Heartbeat)
		}
	}
}

// onSync answers another instance's claim request off the bus's delivery
// goroutine.
func (t *Tracker) onSync(sig bus.LivenessSync) {
	if sig.Instance != t.instance && !t.stopped.Load() {
		go t.answerClaimRequest()
	}
}

// yield hands the entry's deadline to another instance that holds a
// heartbeat at hb: the timer becomes the watch, nothing is published.
func (t *Tracker) yield(e *lvEntry, hb time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if hb.After(e.lastHB) {
		e.lastHB = hb
	}
	if e.fromStart {
		e.fromStart = false // the claim proves a heartbeat; StateAt decides from now on
	}
	if e.reported == "" {
		e.reported = liveness.StateOnline
	}
	e.state = e.reported // the claim proves a heartbeat
	e.owned = false
	t.log.Debug("liveness: agent claimed by another instance", "agent_id", e.id, "heartbeat", hb)
	t.armLocked(e, e.lastHB.Add(t.cfg.PresenceTimeout))
}

// answerClaimRequest broadcasts claims for every agent this instance owns
// and holds a fresh heartbeat of, batched under the NOTIFY limit.
func (t *Tracker) answerClaimRequest() {
	now := t.now()
	var all bus.LivenessClaims
	for _, e := range t.entries() {
		e.mu.Lock()
		if e.owned && !e.fromStart && !e.lastHB.IsZero() && t.stateOf(e, now) != liveness.StateOffline {
			all.Claims = append(all.Claims, bus.LivenessClaim{AgentID: e.id, Instance: t.instance, Heartbeat: e.lastHB})
		}
		e.mu.Unlock()
	}
	for _, batch := range all.Batches(maxClaimPayload) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := bus.Send(ctx, t.bus, batch); err != nil {
			t.log.Warn("liveness claims not broadcast", "err", err)
		}
		cancel()
	}
}
