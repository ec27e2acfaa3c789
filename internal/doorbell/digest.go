package doorbell

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Digest reasons of a (re)connect (design: Connect and reconnect digests):
// ReasonConnect on an agent's first notification stream ever, and
// ReasonReconnect on its first stream on this instance after that.
const (
	ReasonConnect   = "connect"
	ReasonReconnect = "reconnect"
)

// ReconnectDigestGate is the least time between two reconnect digests of
// one agent on one instance (design: Connect and reconnect digests).
const ReconnectDigestGate = 10 * time.Minute

// maxDigestTodos bounds what one digest counts and marks.
const maxDigestTodos = 10000

// Digest sends one digest doorbell — one notification that tells a
// returning agent its backlog: counts, queue names and the oldest pending
// age, never a title or payload — with the given reason to one of this
// instance's open-stream sessions of the agent, if there is one and the agent has at
// least one push-eligible pending todo in a ready queue. After the
// notification is queued, last_ringed_at is set on exactly the counted
// todos (ring_attempts unchanged); a failed write is logged and marks
// nothing. It reports whether a digest was sent.
func (d *Engine) Digest(ctx context.Context, agentID, reason string) bool {
	return d.digest(ctx, agentID, reason, time.Time{})
}

// digest is Digest counting, when openedAt is set, only the todos created at or
// before it: a (re)connect digest tells the backlog the new stream found; a
// todo pushed after the stream opened gets its own doorbell and must not be
// told twice.
func (d *Engine) digest(ctx context.Context, agentID, reason string, openedAt time.Time) bool {
	hub := d.sessionHub()
	if hub == nil {
		return false
	}
	var target string
	for _, si := range pickOrder(hub.AgentSessions(agentID), 0, d.bad(d.now())) {
		if si.Streaming {
			target = si.ID
			break
		}
	}
	if target == "" {
		return false
	}
	// A digest is for an agent that is in when it is sent: the handling of a
	// transition to in can run late (its broadcast reaches this instance
	// after the agent went out again), and then it tells nothing (design:
	// Digest on return).
	if p, ok := d.presence.Presence(agentID, d.now()); !ok || p != "in" {
		return false
	}
	pend, err := d.store.PendingDoorbellTodos(ctx, store.PendingParams{AgentID: agentID, ExcludeQueues: d.presence.NotReadyQueues(agentID), Limit: maxDigestTodos})
	if err != nil {
		d.log.Warn("digest not built", "agent_id", agentID, "reason", reason, "err", err)
		return false
	}
	if reason == ReasonReconnect || reason == ReasonConnect {
		pend = withoutTold(hub, target, pend)
	}
	if !openedAt.IsZero() {
		pend = slices.DeleteFunc(pend, func(t store.PendingTodo) bool { return t.CreatedAt.After(openedAt) })
	}
	if len(pend) == 0 {
		return false
	}
	now := d.now()
	msg := BuildDigest(pend, reason, now)
	if err := hub.Notify(target, msg); err != nil {
		d.log.Warn("digest not delivered; nothing marked", "agent_id", agentID, "session", target, "reason", reason, "err", err)
		return false
	}
	d.metrics.DigestSent()
	ids := make([]string, len(pend))
	for i, t := range pend {
		ids[i] = t.ID
	}
	if _, err := d.store.MarkDigestRung(ctx, store.MarkDigestParams{AgentID: agentID, IDs: ids, At: now}); err != nil {
		d.log.Warn("digest sent but not recorded", "agent_id", agentID, "err", err)
	}
	d.log.Info("digest sent", "agent_id", agentID, "reason", reason, "pending", len(pend))
	return true
}

// withoutTold drops from pend the todos the target session's opening
// stream delivers by itself (ToldReporter).
func withoutTold(hub SessionHub, sessionID string, pend []store.PendingTodo) []store.PendingTodo {
	tr, ok := hub.(ToldReporter)
	if !ok {
		return pend
	}
	told := tr.ToldOnOpen(sessionID)
	if len(told) == 0 {
		return pend
	}
	skip := make(map[string]bool, len(told))
	for _, id := range told {
		skip[id] = true
	}
	out := pend[:0:0]
	for _, t := range pend {
		if !skip[t.ID] {
			out = append(out, t)
		}
	}
	return out
}

// BuildDigest renders the digest notification (design: Digest names the
// oldest todo): meta kind=digest, pending (decimal), queues (sorted,
// comma-joined), reason and oldest_todo_id (the pending todo created
// first; on a tie the smaller id); no todo_id. Content is one line that
// stands alone (design: Doorbell message): counts, queue names, the oldest
// pending age, the oldest todo's id and how to drain them, e.g.
//
//	digest: 3 pending todos (q1 2, q2 1), oldest waiting 5m is todo 01J… — take it first with claim {"todo_id":"01J…"}, or call claim_next {} (or claim_next {"queue":"<name>"}), complete each todo it gives you, and repeat until it answers not_found
//
// Never a title or payload. pend must not be empty.
func BuildDigest(pend []store.PendingTodo, reason string, now time.Time) domain.ChannelMessage {
	counts := map[string]int{}
	oldest := pend[0]
	for _, t := range pend {
		counts[t.Queue]++
		if t.CreatedAt.Before(oldest.CreatedAt) || (t.CreatedAt.Equal(oldest.CreatedAt) && t.ID < oldest.ID) {
			oldest = t
		}
	}
	queues := make([]string, 0, len(counts))
	for q := range counts {
		queues = append(queues, q)
	}
	sort.Strings(queues)
	parts := make([]string, len(queues))
	for i, q := range queues {
		parts[i] = fmt.Sprintf("%s %d", q, counts[q])
	}
	noun := "todos"
	if len(pend) == 1 {
		noun = "todo"
	}
	age := now.Sub(oldest.CreatedAt)
	if age < 0 {
		age = 0
	}
	content := fmt.Sprintf(`digest: %d pending %s (%s), oldest waiting %s is todo %s — take it first with claim {"todo_id":%q}, or call claim_next {} (or claim_next {"queue":"<name>"}), complete each todo it gives you, and repeat until it answers not_found`,
		len(pend), noun, strings.Join(parts, ", "), humanAge(age), oldest.ID, oldest.ID)
	return domain.ChannelMessage{Content: domain.Neutralize(content), Meta: map[string]string{
		"kind": "digest", "pending": strconv.Itoa(len(pend)), "queues": strings.Join(queues, ","), "reason": reason,
		"oldest_todo_id": oldest.ID,
	}}
}

func humanAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// StreamOpened is called by the session hub when an agent gains its first
// open notification stream on this instance. It records the agent's first
// stream ever (store.MarkFirstStream); if the agent is in, it sends a
// digest, at most once per agent per ReconnectDigestGate here, with reason
// "connect" on the agent's first stream ever and "reconnect" after that.
func (d *Engine) StreamOpened(agentID string) {
	now := d.now()
	mctx, mcancel := context.WithTimeout(context.Background(), 10*time.Second)
	first, err := d.store.MarkFirstStream(mctx, agentID, now)
	mcancel()
	if err != nil {
		d.log.Warn("recording an agent's first stream failed", "agent_id", agentID, "err", err)
	}
	reason := ReasonReconnect
	if first {
		reason = ReasonConnect
	}
	if p, ok := d.presence.Presence(agentID, now); !ok || p != "in" {
		return
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	d.RouteHeld(rctx, agentID) // a member with a stream here: its pools' held todos (design: Pool routing)
	rcancel()
	d.digestMu.Lock()
	last, had := d.reconnect[agentID]
	if had && now.Sub(last) < ReconnectDigestGate {
		d.digestMu.Unlock()
		return
	}
	d.reconnect[agentID] = now // reserve the gate so concurrent opens send one digest
	d.digestMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !d.digest(ctx, agentID, reason, now) {
		d.digestMu.Lock()
		if had {
			d.reconnect[agentID] = last
		} else {
			delete(d.reconnect, agentID)
		}
		d.digestMu.Unlock()
	}
}
