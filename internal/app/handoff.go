package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// resolveHandoff turns the vend body's grants into stored grants: each
// target must be another unrevoked agent the person owns, each queue in the
// target's scope. Errors: invalid_argument with pointer /handoff/N/….
func (s *Service) resolveHandoff(ctx context.Context, by domain.Person, in []HandoffInput) ([]domain.HandoffGrant, error) {
	if len(in) > 50 {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "at most 50 handoff grants are allowed").At("/handoff")
	}
	var out []domain.HandoffGrant
	for i, g := range in {
		ptr := fmt.Sprintf("/handoff/%d", i)
		if g.Agent == "" {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "handoff agent is required (id or handle)").At(ptr + "/agent")
		}
		t, err := s.OwnedAgent(ctx, by, g.Agent)
		if domain.CodeOf(err) == domain.CodeNotFound {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "handoff agent %q is not one of your agents", g.Agent).At(ptr + "/agent")
		}
		if err != nil {
			return nil, err
		}
		if t.Revoked() {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "handoff agent %s is revoked", t.Handle).At(ptr + "/agent")
		}
		if !t.Scope.HasQueue(g.Queue) {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "queue %q is not in agent %s's scope (queues %v)", g.Queue, t.Handle, t.Scope.Queues).At(ptr + "/queue")
		}
		out = append(out, domain.HandoffGrant{AgentID: t.ID, Handle: t.Handle, Queue: g.Queue})
	}
	return out, nil
}

// HandOffInput is the argument of the hand_off verb.
type HandOffInput struct {
	To             string          `json:"to"`
	Queue          string          `json:"queue"`
	Title          string          `json:"title"`
	Payload        json.RawMessage `json:"payload,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// HandOffResult is what hand_off returns: the todo and whether it is new
// (false: a live todo the sender handed over with the same key).
type HandOffResult struct {
	Todo    domain.Todo `json:"todo"`
	Created bool        `json:"created"`
}

// maxHandoffKeyLen leaves room for the sender namespace in the stored key.
const maxHandoffKeyLen = 150

// HandOff is the hand_off verb (design: Handoff): the agent pushes a todo
// to another agent of the same owner, only to an agent/queue pair its
// scope grants. The todo is attributed agent:<sender id>, push-eligible,
// source "handoff", and rings like a pushed todo; the creation is audited
// (todo.hand_off) in the same transaction. The idempotency key is kept per
// sender (stored as handoff:<sender id>:<key>), so senders cannot see each
// other's todos through it. Errors: invalid_argument with pointer (to or
// queue not granted — nothing changes —, bad title, payload or key),
// conflict (target revoked), forbidden (no grants).
func (s *Service) HandOff(ctx context.Context, a *domain.Agent, in HandOffInput) (HandOffResult, error) {
	target, err := a.Scope.HandoffTarget(in.To, in.Queue)
	if err != nil {
		return HandOffResult{}, err
	}
	if strings.TrimSpace(in.Title) == "" {
		return HandOffResult{}, domain.Errorf(domain.CodeInvalidArgument, "title is required").At("/title")
	}
	if err := domain.ValidateNote("title", in.Title, domain.MaxTitleLen); err != nil {
		return HandOffResult{}, err
	}
	if err := domain.ValidateJSON("payload", in.Payload, domain.MaxPayloadLen); err != nil {
		return HandOffResult{}, err
	}
	if err := domain.ValidateText("idempotency_key", in.IdempotencyKey, maxHandoffKeyLen, false); err != nil {
		return HandOffResult{}, err
	}
	t, err := s.store.GetAgent(ctx, store.AgentRef{ID: target.AgentID})
	if errors.Is(err, domain.ErrNotFound) || (err == nil && t.OwnerID != a.OwnerID) {
		return HandOffResult{}, domain.Errorf(domain.CodeInvalidArgument, "agent %s is no longer an agent of your owner", target.Handle).At("/to")
	}
	if err != nil {
		return HandOffResult{}, err
	}
	if t.Revoked() {
		return HandOffResult{}, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it takes no todos", t.Handle)
	}
	key := ""
	if in.IdempotencyKey != "" {
		key = "handoff:" + a.ID + ":" + in.IdempotencyKey
	}
	now := s.now()
	td := domain.Todo{
		ID: newID(), AgentID: t.ID, Queue: target.Queue, Title: in.Title, Payload: in.Payload, Source: "handoff",
		IdempotencyKey: key, PushEligible: true, CreatedBy: "agent:" + a.ID,
		State: domain.TodoPending, MaxAttempts: domain.DefaultMaxAttempts, CreatedAt: now, UpdatedAt: now,
	}
	got, created, err := s.store.CreateTodo(ctx, store.CreateTodoParams{Todo: td, Audit: &domain.AuditRecord{
		Actor: "agent:" + a.ID, Action: "todo.hand_off", AgentID: t.ID,
		Data: map[string]any{"todo_id": td.ID, "from": a.Handle, "to": t.Handle, "queue": target.Queue},
	}})
	if err != nil {
		return HandOffResult{}, storeErr(err, "", "the idempotency key is changing hands; retry")
	}
	if created {
		s.log.Info("todo handed off", "todo_id", got.ID, "from", a.ID, "to", t.ID, "queue", got.Queue)
		s.publishTodoReady(ctx, got)
	}
	return HandOffResult{Todo: got, Created: created}, nil
}
