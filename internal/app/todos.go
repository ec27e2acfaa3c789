package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// PushTodo creates a todo for an agent the person owns (attributed to the
// owner and push-eligible; design: Push eligibility, Idempotency keys). With an idempotency key that a live
// todo of the agent already has, it returns that todo and created=false. On
// creation the todo-ready signal is published after commit (design: Ring on create).
// Errors: not_found, conflict (revoked agent), invalid_argument (queue not in
// the agent's scope, bad fields; with pointer).
func (s *Service) PushTodo(ctx context.Context, by domain.Person, ref string, in PushInput) (domain.Todo, bool, error) {
	a, err := s.pushTarget(ctx, by, ref)
	if err != nil {
		return domain.Todo{}, false, err
	}
	if a.Revoked() {
		return domain.Todo{}, false, domain.Errorf(domain.CodeConflict, "agent %s is revoked; it takes no todos", a.Handle)
	}
	if in.Queue == "" {
		return domain.Todo{}, false, domain.Errorf(domain.CodeInvalidArgument, "queue is required").At("/queue")
	}
	if !a.Scope.HasQueue(in.Queue) {
		return domain.Todo{}, false, domain.Errorf(domain.CodeInvalidArgument, "queue %q is not in agent %s's scope (queues %v)", in.Queue, a.Handle, a.Scope.Queues).At("/queue")
	}
	t, err := s.PushedTodo(by, in)
	if err != nil {
		return domain.Todo{}, false, err
	}
	t.AgentID = a.ID
	got, created, err := s.store.CreateTodo(ctx, store.CreateTodoParams{Todo: t})
	if err != nil {
		return domain.Todo{}, false, err
	}
	if created && got.PushEligible {
		s.publishTodoReady(ctx, got)
	}
	return got, created, nil
}

// pushTarget is OwnedAgent for a push, from the agent cache when a lookup
// of ref younger than CredentialCacheTTL is there (design: Credential
// cache): what a push reads of the agent — owner, revocation, scope — is
// dropped from the cache at once on this instance when it changes (revoke,
// hand-over), and on the others when the bus signal arrives.
func (s *Service) pushTarget(ctx context.Context, by domain.Person, ref string) (domain.Agent, error) {
	now := s.clock.Now()
	a, ok := s.targets.Get(ref, now)
	if !ok {
		gen := s.targets.Gen()
		var err error
		if a, err = s.AgentByRef(ctx, ref); err != nil {
			return domain.Agent{}, err
		}
		s.targets.PutAt(ref, a, now, gen)
	}
	if a.OwnerID != by.ID {
		return domain.Agent{}, domain.Errorf(domain.CodeNotFound, "agent %q not found", ref)
	}
	return a, nil
}

// PushedTodo is the todo an operator push of in makes, with no receiver
// yet, after the bounds every push checks (title, payload, kind, source,
// idempotency key, max_attempts; design: Input bounds): the agent push and
// the pool push (design: Pools, internal/pools) share them. Errors:
// invalid_argument with pointer.
func (s *Service) PushedTodo(by domain.Person, in PushInput) (domain.Todo, error) {
	// A title may hold any text but NUL; the doorbell neutralises line
	// breaks and channel tags when it puts the title into a notification.
	if strings.TrimSpace(in.Title) == "" {
		return domain.Todo{}, domain.Errorf(domain.CodeInvalidArgument, "title is required").At("/title")
	}
	if err := domain.ValidateNote("title", in.Title, domain.MaxTitleLen); err != nil {
		return domain.Todo{}, err
	}
	if err := domain.ValidateJSON("payload", in.Payload, domain.MaxPayloadLen); err != nil {
		return domain.Todo{}, err
	}
	if err := domain.ValidateCode("kind", in.Kind); err != nil {
		return domain.Todo{}, err
	}
	if err := domain.ValidateCode("source", in.Source); err != nil {
		return domain.Todo{}, err
	}
	if err := domain.ValidateText("idempotency_key", in.IdempotencyKey, domain.MaxKeyLen, false); err != nil {
		return domain.Todo{}, err
	}
	if in.MaxAttempts < 0 || in.MaxAttempts > 100 {
		return domain.Todo{}, domain.Errorf(domain.CodeInvalidArgument, "max_attempts must be between 1 and 100").At("/max_attempts")
	}
	if in.MaxAttempts == 0 {
		in.MaxAttempts = domain.DefaultMaxAttempts
	}
	now := s.now()
	return domain.Todo{
		ID: newID(), Queue: in.Queue, Title: in.Title, Payload: in.Payload, Kind: in.Kind, Source: in.Source,
		IdempotencyKey: in.IdempotencyKey, PushEligible: true, CreatedBy: "operator:" + by.ID,
		State: domain.TodoPending, MaxAttempts: in.MaxAttempts, CreatedAt: now, UpdatedAt: now,
	}, nil
}

// publishTodoReady rings the todo's doorbell on this instance's sessions
// directly (design: Catch-up after a lost listener; they do not depend on the bus listener), then
// signals every instance without waiting for the signal to go out (the
// push's answer does not wait on it); this instance's own echo is
// deduplicated by the doorbell.
func (s *Service) publishTodoReady(ctx context.Context, t domain.Todo) {
	r := domain.TodoReady{AgentID: t.AgentID, TodoID: t.ID, Queue: t.Queue, Title: t.Title, Kind: t.Kind, Source: t.Source}
	s.bell.Ring(r)
	bus.Post(s.bus, bus.TodoReady{TodoReady: r}, func(err error) {
		// Lossy by design (design: Bus delivery): the sweep re-rings.
		s.log.Warn("todo-ready signal not published", "todo_id", t.ID, "err", err)
	})
	s.events.TodosChanged(ctx, t.AgentID)
}

// todosChanged publishes agent.todos_changed for the agent of a todo the
// use case changed (err == nil), after commit (design: Operator event
// stream), and passes t and err through.
func (s *Service) todosChanged(ctx context.Context, t domain.Todo, err error) (domain.Todo, error) {
	if err == nil && t.AgentID != "" {
		s.events.TodosChanged(ctx, t.AgentID)
	}
	return t, err
}

// claimed tells the doorbell of todos just claimed (err nil): a pooled
// ring they answer frees its member (design: Pool routing).
func (s *Service) claimed(err error, ts ...domain.Todo) {
	if err == nil {
		s.bell.Claimed(ts...)
	}
}

// ListAgentTodos lists the todos of an agent the person owns.
func (s *Service) ListAgentTodos(ctx context.Context, by domain.Person, ref string, f TodoFilter) ([]domain.Todo, error) {
	a, err := s.OwnedAgent(ctx, by, ref)
	if err != nil {
		return nil, err
	}
	return s.ListTodosOf(ctx, &a, f)
}

// ListTodosOf lists the todos of an agent the caller already resolved
// (OwnedAgent), without reading the agent again: the console's cards and
// agent page. Errors: invalid_argument (/state, /limit), the store's.
func (s *Service) ListTodosOf(ctx context.Context, a *domain.Agent, f TodoFilter) ([]domain.Todo, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	p := store.ListTodosParams{AgentID: a.ID, State: f.State, Limit: f.Limit}
	if f.Queue != "" {
		p.Queues = []string{f.Queue}
	}
	return s.store.ListTodos(ctx, p)
}

// GetTodo returns a todo of one of the person's agents; others are not_found.
func (s *Service) GetTodo(ctx context.Context, by domain.Person, id string) (domain.Todo, error) {
	t, err := s.store.GetTodo(ctx, id)
	if err == nil && !s.poolTodoOwned(ctx, by, t) {
		_, err = s.OwnedAgent(ctx, by, t.AgentID)
	}
	if err != nil {
		if errors.Is(err, domain.ErrNotFound) || domain.CodeOf(err) == domain.CodeNotFound {
			return domain.Todo{}, domain.Errorf(domain.CodeNotFound, "todo %q not found", id)
		}
		return domain.Todo{}, err
	}
	return t, nil
}

// --- agent verbs (MCP scope verbs; design: Todo lifecycle) ---

func todoNotFound(id string) error {
	return domain.Errorf(domain.CodeNotFound, "todo %q not found among this agent's todos", id).At("/todo_id")
}

func (s *Service) agentQueues(a *domain.Agent, queue string) ([]string, error) {
	if queue == "" {
		return a.Scope.Queues, nil
	}
	if !a.Scope.HasQueue(queue) {
		return nil, domain.Errorf(domain.CodeInvalidArgument, "queue %q is not in this agent's scope (queues %v)", queue, a.Scope.Queues).At("/queue")
	}
	return []string{queue}, nil
}

// AgentListTodos is the list_todos verb: the agent's todos in its scope's
// queues (or one of them), and the unclaimed todos of its pools there
// (design: Pools), optionally by state, oldest first.
func (s *Service) AgentListTodos(ctx context.Context, a *domain.Agent, f TodoFilter) ([]domain.Todo, error) {
	qs, err := s.agentQueues(a, f.Queue)
	if err != nil {
		return nil, err
	}
	if err := f.Check(); err != nil {
		return nil, err
	}
	return s.store.ListTodos(ctx, store.ListTodosParams{AgentID: a.ID, Queues: qs, State: f.State, Limit: f.Limit, WithPools: true})
}

// Claim is the claim verb. lease_seconds 0 = 300 s; max 86400.
// Errors: not_found (unknown or another agent's todo), conflict (not
// claimable: claimed, done, dead, or waiting for its retry), invalid_argument.
func (s *Service) Claim(ctx context.Context, a *domain.Agent, todoID string, leaseSeconds int64) (domain.Todo, error) {
	lease, err := domain.LeaseFor(leaseSeconds)
	if err != nil {
		return domain.Todo{}, err
	}
	if todoID == "" {
		return domain.Todo{}, domain.Errorf(domain.CodeInvalidArgument, "todo_id is required").At("/todo_id")
	}
	t, err := s.store.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: a.ID, TodoID: todoID, Queues: a.Scope.Queues, Lease: lease, Now: s.now()})
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Todo{}, todoNotFound(todoID)
	}
	s.claimed(err, t)
	return s.todosChanged(ctx, t, storeErr(err, "", fmt.Sprintf("todo %q is not claimable (already claimed, finished, or waiting for a retry)", todoID)))
}

// ClaimNext is the claim_next verb: the oldest claimable todo in the queue
// (or any scope queue). Errors: not_found when nothing is claimable.
func (s *Service) ClaimNext(ctx context.Context, a *domain.Agent, queue string, leaseSeconds int64) (domain.Todo, error) {
	p, err := s.nextClaim(a, NextClaim{Queue: queue, LeaseSeconds: leaseSeconds})
	if err != nil {
		return domain.Todo{}, err
	}
	t, err := s.store.ClaimNext(ctx, p)
	s.claimed(err, t)
	return s.todosChanged(ctx, t, storeErr(err, "no claimable todo in "+strings.Join(p.Queues, ","), ""))
}

// NextClaim is what a batched claim_next, or the claim that follows a
// complete or a fail, asks for (design: Claiming in batches): the queue
// ("" = every scope queue), the lease of each claim (0 = 300 s) and how
// many todos at most (0 = 1; 1..domain.MaxClaimBatch).
type NextClaim struct {
	Queue        string
	LeaseSeconds int64
	N            int64
}

// nextClaim checks c for agent a and returns the store's parameters.
// Errors: invalid_argument (/queue, /lease_seconds, /n).
func (s *Service) nextClaim(a *domain.Agent, c NextClaim) (store.ClaimNextParams, error) {
	lease, err := domain.LeaseFor(c.LeaseSeconds)
	if err != nil {
		return store.ClaimNextParams{}, err
	}
	if c.N < 0 || c.N > domain.MaxClaimBatch {
		return store.ClaimNextParams{}, domain.Errorf(domain.CodeInvalidArgument, "n must be between 1 and %d, got %d", domain.MaxClaimBatch, c.N).At("/n")
	}
	qs, err := s.agentQueues(a, c.Queue)
	if err != nil {
		return store.ClaimNextParams{}, err
	}
	return store.ClaimNextParams{AgentID: a.ID, Queues: qs, Lease: lease, Now: s.now(), N: max(int(c.N), 1)}, nil
}

// ClaimNextN is claim_next with n (design: Claiming in batches): up to c.N
// of the oldest claimable todos, own and pooled, each under its own lease,
// oldest first; none claimable is an empty slice, not an error. Errors:
// invalid_argument, the store's.
func (s *Service) ClaimNextN(ctx context.Context, a *domain.Agent, c NextClaim) ([]domain.Todo, error) {
	p, err := s.nextClaim(a, c)
	if err != nil {
		return nil, err
	}
	ts, err := s.store.ClaimNextN(ctx, p)
	if err != nil {
		return nil, err
	}
	s.claimed(nil, ts...)
	if len(ts) > 0 {
		s.events.TodosChanged(ctx, a.ID)
	}
	return ts, nil
}

// Renew is the renew verb: extends the lease of a todo the agent holds.
func (s *Service) Renew(ctx context.Context, a *domain.Agent, todoID string, leaseSeconds int64) (domain.Todo, error) {
	lease, err := domain.LeaseFor(leaseSeconds)
	if err != nil {
		return domain.Todo{}, err
	}
	t, err := s.store.RenewLease(ctx, store.RenewLeaseParams{AgentID: a.ID, TodoID: todoID, Lease: lease, Now: s.now()})
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Todo{}, todoNotFound(todoID)
	}
	return t, storeErr(err, "", fmt.Sprintf("todo %q is not held by this agent under a live lease", todoID))
}

// Complete is the complete verb; result is optional JSON (≤ 64 KiB).
func (s *Service) Complete(ctx context.Context, a *domain.Agent, todoID string, result json.RawMessage) (domain.Todo, error) {
	if err := domain.ValidateJSON("result", result, domain.MaxResultLen); err != nil {
		return domain.Todo{}, err
	}
	t, err := s.store.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: todoID, Result: result, Now: s.now()})
	return s.todosChanged(ctx, t, heldErr(todoID, err))
}

// CompleteAndClaim is complete with next (design: Complete and claim the
// next): it completes the todo and, in the same transaction, claims up to
// next.N more as ClaimNextN does, so a worker pays one round trip and one
// commit per todo. The claims are made only if the complete is. Errors:
// Complete's, and next's invalid_argument with pointers under /next.
func (s *Service) CompleteAndClaim(ctx context.Context, a *domain.Agent, todoID string, result json.RawMessage, next NextClaim) (domain.Todo, []domain.Todo, error) {
	return s.finishAndClaim(ctx, a, todoID, domain.ValidateJSON("result", result, domain.MaxResultLen), next,
		func(p store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
			return s.store.CompleteAndClaim(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: todoID, Result: result, Now: p.Now}, p)
		})
}

// finishAndClaim runs finish (the store's complete or fail with the next
// claim p) unless invalid, the finishing verb's argument check, or next
// is refused, and words its errors.
func (s *Service) finishAndClaim(ctx context.Context, a *domain.Agent, todoID string, invalid error, next NextClaim,
	finish func(p store.ClaimNextParams) (domain.Todo, []domain.Todo, error)) (domain.Todo, []domain.Todo, error) {
	if invalid != nil {
		return domain.Todo{}, nil, invalid
	}
	p, err := s.nextClaim(a, next)
	if err != nil {
		return domain.Todo{}, nil, underNext(err)
	}
	t, claimed, err := finish(p)
	s.claimed(err, claimed...)
	t, err = s.todosChanged(ctx, t, heldErr(todoID, err))
	return t, claimed, err
}

// Fail is the fail verb: records a failed attempt; retried with backoff
// until max_attempts, then dead-lettered.
func (s *Service) Fail(ctx context.Context, a *domain.Agent, todoID, reason string) (domain.Todo, error) {
	if err := domain.ValidateNote("reason", reason, 2000); err != nil {
		return domain.Todo{}, err
	}
	t, err := s.store.FailTodo(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: todoID, Reason: reason, Now: s.now()})
	return s.todosChanged(ctx, t, heldErr(todoID, err))
}

// FailAndClaim is fail with next, as CompleteAndClaim is complete with
// next (design: Complete and claim the next).
func (s *Service) FailAndClaim(ctx context.Context, a *domain.Agent, todoID, reason string, next NextClaim) (domain.Todo, []domain.Todo, error) {
	return s.finishAndClaim(ctx, a, todoID, domain.ValidateNote("reason", reason, 2000), next,
		func(p store.ClaimNextParams) (domain.Todo, []domain.Todo, error) {
			return s.store.FailAndClaim(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: todoID, Reason: reason, Now: p.Now}, p)
		})
}

// heldErr words the store's error of a verb on a todo the agent must hold
// under a live lease (complete, fail).
func heldErr(todoID string, err error) error {
	if errors.Is(err, domain.ErrNotFound) {
		return todoNotFound(todoID)
	}
	return storeErr(err, "", fmt.Sprintf("todo %q is not held by this agent under a live lease", todoID))
}

// underNext moves a domain error's pointer under /next (the next claim's
// arguments of complete and fail).
func underNext(err error) error {
	var de *domain.Error
	if errors.As(err, &de) && de.Pointer != "" {
		c := *de
		c.Pointer = "/next" + de.Pointer
		return &c
	}
	return err
}

// ReapOnce returns expired leases once (see store.ReapExpiredLeases) and
// publishes agent.todos_changed for their agents: one todo read per reaped
// lease tells its agent (the store returns todo ids only).
func (s *Service) ReapOnce(ctx context.Context) (int, error) {
	reaped, err := s.store.ReapExpiredLeases(ctx, store.ReapParams{Now: s.now(), Limit: 1000})
	if len(reaped) > 0 {
		s.log.Info("expired leases returned", "count", len(reaped))
	}
	for _, r := range reaped {
		if r.PoolID != "" { // back in its pool: ring a member (design: Pool routing)
			s.bell.RoutePooledID(ctx, r.ID)
			continue
		}
		s.events.TodosChanged(ctx, r.AgentID)
	}
	return len(reaped), err
}

// poolTodoOwned reports whether a todo pushed to a pool belongs to a pool
// of the person (GetTodo of a pooled todo), whoever holds it now: the
// member that claimed it may be another person's agent (design: Pool
// grants).
func (s *Service) poolTodoOwned(ctx context.Context, by domain.Person, t domain.Todo) bool {
	if t.PoolID == "" {
		return false
	}
	p, err := s.store.GetPool(ctx, store.GetPoolParams{ID: t.PoolID})
	return err == nil && p.OwnerID == by.ID
}
