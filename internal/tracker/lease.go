package tracker

import (
	"context"
	"errors"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/workgroup"
)

// Owner leases (design: Owner lease: an instance that dies releases its
// agents; the others publish them offline within presence timeout + 2 s).
//
//   - Each instance holds a lease row in the store that expires
//     Config.OwnerLease (default 1.5 s) after it was last renewed, on the
//     database's clock (the tracker's now). It renews it every
//     Config.OwnerLeaseRenew (default 0.5 s) and, in the same pass, looks
//     for leases of other instances that expired.
//   - The store records the owner of every agent's deadline: the instance
//     that took it (a first heartbeat here, a claim, coming back), as of
//     that heartbeat (a monotone write), or that took a dead instance's
//     agents over.
//   - An expired lease is taken over by exactly one instance (the store's
//     conditional delete decides), which then owns the dead instance's
//     agents: each one's deadline is the take-over + agent.presence_timeout
//     (the stored heartbeat may lag the last one by a persist interval;
//     every heartbeat the dead instance took came before its lease ran
//     out), so it is published offline once, by the winner, never early
//     and within timeout + 2 s of the death. The winner broadcasts a claim for
//     each, so every other instance drops its watch without publishing.
//   - An agent that reconnects to any instance before its deadline is
//     owned by that instance again and never goes offline.
//   - A clean shutdown flushes, then releases its lease at once (expires it
//     now): the take-over follows at the next check of another instance.
//   - An instance takes no lease over until it has renewed its own without
//     a break for one lease: after a database outage every instance gets
//     that long to renew its lease before it counts as dead.
//   - An instance that finds its own lease gone (it was taken over while
//     the instance was stalled or cut off from the database) claims its
//     agents again, on the bus and in the store.

// leaseLoop renews the lease and checks the others' every
// Config.OwnerLeaseRenew until ctx ends.
func (t *Tracker) leaseLoop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	timer := t.clock.NewTimer(t.cfg.OwnerLeaseRenew)
	defer timer.Stop()
	workgroup.After(ctx.Done(), timer, t.cfg.OwnerLeaseRenew, func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := t.checkLeases(cctx); err != nil && ctx.Err() == nil {
			if !t.leaseFailing.Swap(true) { // once per outage, not twice a second
				t.log.Warn("owner lease: renewal or check failed; retrying", "err", err)
			}
		} else if err == nil && t.leaseFailing.Swap(false) {
			t.log.Info("owner lease: renewed again")
		}
	})
}

// checkLeases is one pass of the lease loop: renew this instance's lease,
// then take over every expired lease of another instance that this
// instance wins, and own those agents. It returns how many agents it took
// over. Errors: a store call failed (the next pass tries again).
func (t *Tracker) checkLeases(ctx context.Context) (int, error) {
	t.leaseMu.Lock() // one pass at a time: leaseSince follows the renewals in order
	defer t.leaseMu.Unlock()
	now := t.now()
	held, err := t.store.RenewOwnerLease(ctx, store.RenewOwnerLeaseParams{Instance: t.instance, ExpiresAt: now.Add(t.cfg.OwnerLease)})
	if err != nil {
		t.leaseSince.Store(0)
		return 0, err
	}
	if !held && t.leaseHeld.Load() {
		t.log.Warn("owner lease: this instance's lease was taken over (a stall or a lost database connection); claiming its agents again")
		t.reclaim(ctx)
	}
	t.leaseHeld.Store(true)
	since := t.leaseSince.Load()
	if since == 0 {
		since = now.UnixMicro()
		t.leaseSince.Store(since)
	}
	if now.Sub(time.UnixMicro(since)) < t.cfg.OwnerLease {
		// This instance has renewed without a break for less than one
		// lease: it just started or was cut off from the database, as the
		// others may have been. Their leases get one full lease to be
		// renewed before any is taken as a death.
		return 0, nil
	}
	dead, err := t.store.ExpiredOwnerLeases(ctx, now, t.instance)
	if err != nil {
		return 0, err
	}
	taken := 0
	for _, from := range dead {
		won, ids, err := t.store.TakeOverOwnerLease(ctx, store.TakeOverOwnerLeaseParams{From: from, To: t.instance, Now: now})
		if err != nil {
			return taken, err
		}
		if !won {
			continue // another instance won it
		}
		t.log.Info("owner lease: took over the agents of an instance whose lease expired", "instance", from, "agents", len(ids))
		for _, id := range ids {
			if t.adopt(ctx, id) {
				taken++
			}
		}
	}
	return taken, nil
}

// adopt makes this instance the owner of an agent taken over from a dead
// instance: its deadline is one timeout from the take-over (never before
// the agent's last heartbeat + timeout), and the other instances are told
// by a claim. An agent
// already owned here (a heartbeat reached this instance first, or the
// start rule loaded it) keeps its deadline; one stored offline or never
// heartbeated has nothing to publish. It reports whether it armed a
// deadline.
func (t *Tracker) adopt(ctx context.Context, id string) bool {
	a, err := t.store.GetAgent(ctx, store.AgentRef{ID: id})
	if err != nil {
		if !errors.Is(err, domain.ErrNotFound) {
			t.log.Warn("owner lease: reading a taken-over agent failed; the watch stays the net", "agent_id", id, "err", err)
		}
		return false
	}
	e := t.entryFor(&a)
	e.mu.Lock()
	if hb := a.Liveness.LastHeartbeatAt; hb != nil && hb.After(e.lastHB) {
		e.lastHB = hb.UTC()
	}
	if e.owned || t.stopped.Load() {
		e.mu.Unlock()
		return false
	}
	e.owned = true
	if pair, ok := t.events.LastPair(e.id); ok {
		e.pub = pair
	}
	live := a.Liveness.State == liveness.StateOnline || a.Liveness.State == liveness.StateDegraded
	if !live || e.lastHB.IsZero() {
		// Offline (or never heartbeated) as stored: the dead owner wrote
		// its transition already; follow silently.
		if e.state != liveness.StateUnknown || a.Liveness.State != "" {
			e.state = a.Liveness.State
		}
		e.fromStart = false
		e.mu.Unlock()
		return false
	}
	if e.reported == "" {
		e.reported = a.Liveness.State
	}
	e.state = e.reported
	hb := e.lastHB
	// The stored heartbeat may be up to one persist interval older than
	// the agent's last one (the dead owner flushed it that rarely), so a
	// deadline from it could make a live agent offline early. Every
	// heartbeat the dead owner took came before its lease ran out, which
	// is before now: one presence timeout from now is never early, and
	// within the lease and one check of the death it is the bound (design:
	// Owner lease). A heartbeat anywhere ends this deadline, as after a
	// start (the start rule's mechanism).
	now := t.now()
	e.fromStart, e.startDeadline = true, now.Add(t.cfg.PresenceTimeout)
	t.log.Debug("owner lease: agent taken over", "agent_id", e.id, "last_heartbeat", hb, "deadline", t.deadline(e))
	t.assessLocked(e, now)
	t.armLocked(e, t.deadline(e))
	e.mu.Unlock()
	t.publishClaim(id, hb)
	return true
}

// recordOwner stores this instance as the owner of the agent's deadline as
// of the heartbeat at hb (leases on only). A failure is logged: the
// agent's deadline is then found by the watch of another instance instead.
func (t *Tracker) recordOwner(ctx context.Context, agentID string, hb time.Time) {
	if t.cfg.OwnerLease <= 0 {
		return
	}
	if _, err := t.store.SetAgentOwner(ctx, store.SetAgentOwnerParams{AgentID: agentID, Instance: t.instance, HeartbeatAt: hb}); err != nil &&
		!errors.Is(err, domain.ErrNotFound) {
		t.log.Warn("owner lease: owner of the agent not recorded; if this instance dies its agent goes offline by the watch instead", "agent_id", agentID, "err", err)
	}
}

// reclaim records this instance again as the owner of every agent it owns
// a fresh heartbeat of, and claims them on the bus, after its lease was
// taken over while it was alive.
func (t *Tracker) reclaim(ctx context.Context) {
	now := t.now()
	for _, e := range t.entries() {
		e.mu.Lock()
		fresh := e.owned && !e.fromStart && !e.lastHB.IsZero() && t.stateOf(e, now) != liveness.StateOffline
		hb := e.lastHB
		e.mu.Unlock()
		if fresh {
			t.recordOwner(ctx, e.id, hb)
		}
	}
	t.answerClaimRequest()
}

// releaseLease ends this instance's lease at once (Stop, after the final
// flush), so another instance takes its agents over at its next check.
func (t *Tracker) releaseLease(ctx context.Context) {
	if t.cfg.OwnerLease <= 0 || !t.leaseHeld.Load() {
		return
	}
	if err := t.store.ReleaseOwnerLease(ctx, t.instance, t.now()); err != nil {
		t.log.Warn("owner lease not released; the others take its agents over when it expires", "err", err)
	}
}
