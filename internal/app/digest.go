package app

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// ReconnectDigestGate is the least time between two reconnect digests of
// one agent on one instance (DESIGN.md §3.7).
const ReconnectDigestGate = 10 * time.Minute

// maxDigestTodos bounds what one digest counts and marks.
const maxDigestTodos = 10000

// Digests sends digest doorbells: one notification that tells a returning
// agent its backlog — counts, queue names and the oldest pending age, never
// a title or payload (DESIGN.md §3.7).
type Digests struct {
	s *Service

	mu        sync.Mutex
	reconnect map[string]time.Time // agent id → last reconnect digest here

	// OnDigest, when set, observes every digest queued (metrics, tests).
	OnDigest func(sessionID string, m domain.ChannelMessage)
}

func newDigests(s *Service) *Digests { return &Digests{s: s, reconnect: map[string]time.Time{}} }

// Send sends one digest with the given reason to one of this instance's
// open-stream sessions of the agent, if there is one and the agent has at
// least one push-eligible pending todo in a ready queue. After the
// notification is queued, last_ringed_at is set on exactly the counted
// todos (ring_attempts unchanged); a failed write is logged and marks
// nothing. It reports whether a digest was sent.
func (d *Digests) Send(ctx context.Context, agentID, reason string) bool {
	hub := d.s.sessionHub()
	if hub == nil {
		return false
	}
	var target string
	for _, si := range pickOrder(hub.AgentSessions(agentID), 0, d.s.Doorbell.bad(d.s.now())) {
		if si.Streaming {
			target = si.ID
			break
		}
	}
	if target == "" {
		return false
	}
	ps := d.s.presenceStore()
	pend, err := ps.PendingDoorbellTodos(ctx, store.PendingParams{AgentID: agentID, ExcludeQueues: d.s.Evaluator.notReadyQueues(agentID), Limit: maxDigestTodos})
	if err != nil {
		d.s.log.Warn("digest not built", "agent_id", agentID, "reason", reason, "err", err)
		return false
	}
	if len(pend) == 0 {
		return false
	}
	now := d.s.now()
	msg := BuildDigest(pend, reason, now)
	if err := hub.Notify(target, msg); err != nil {
		d.s.log.Warn("digest not delivered; nothing marked", "agent_id", agentID, "session", target, "reason", reason, "err", err)
		return false
	}
	d.s.metrics.DigestSent()
	if d.OnDigest != nil {
		d.OnDigest(target, msg)
	}
	ids := make([]string, len(pend))
	for i, t := range pend {
		ids[i] = t.ID
	}
	if _, err := ps.MarkDigestRung(ctx, store.MarkDigestParams{AgentID: agentID, IDs: ids, At: now}); err != nil {
		d.s.log.Warn("digest sent but not recorded", "agent_id", agentID, "err", err)
	}
	d.s.log.Info("digest sent", "agent_id", agentID, "reason", reason, "pending", len(pend))
	return true
}

// BuildDigest renders the digest notification: meta kind=digest, pending
// (decimal), queues (sorted, comma-joined), reason; no todo_id. Content is
// one line of counts, queue names and the oldest pending age.
func BuildDigest(pend []store.PendingTodo, reason string, now time.Time) domain.ChannelMessage {
	counts := map[string]int{}
	oldest := now
	for _, t := range pend {
		counts[t.Queue]++
		if t.CreatedAt.Before(oldest) {
			oldest = t.CreatedAt
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
	content := fmt.Sprintf("digest: %d pending %s (%s); oldest waiting %s. Drain them with claim_next.",
		len(pend), noun, strings.Join(parts, ", "), humanAge(now.Sub(oldest)))
	return domain.ChannelMessage{Content: domain.Neutralize(content), Meta: map[string]string{
		"kind": "digest", "pending": strconv.Itoa(len(pend)), "queues": strings.Join(queues, ","), "reason": reason,
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
// open notification stream on this instance. If the agent is in, it sends a
// reconnect digest, at most once per agent per ReconnectDigestGate here.
func (d *Digests) StreamOpened(agentID string) {
	now := d.s.now()
	if p, ok := d.s.Evaluator.Presence(agentID, now); !ok || p != "in" {
		return
	}
	d.mu.Lock()
	last, had := d.reconnect[agentID]
	if had && now.Sub(last) < ReconnectDigestGate {
		d.mu.Unlock()
		return
	}
	d.reconnect[agentID] = now // reserve the gate so concurrent opens send one digest
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !d.Send(ctx, agentID, ReasonReconnect) {
		d.mu.Lock()
		if had {
			d.reconnect[agentID] = last
		} else {
			delete(d.reconnect, agentID)
		}
		d.mu.Unlock()
	}
}
