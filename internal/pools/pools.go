// Package pools holds the pool use cases (design: Pools, Pool grants): a
// person's named sets of member agents sharing queues, pushes to them, and
// the grants that let another person's agent join. internal/app embeds
// Pools, so its Service answers these operations as its own; the routing
// of a pooled todo's doorbell is the doorbell engine's (design: Pool
// routing, internal/doorbell), reached through the Router port.
package pools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/rollcall/rollcall/api/wire"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// Agents is what the pool use cases need of internal/app's Service, which
// embeds them.
type Agents interface {
	// OwnedAgent loads an agent the person owns (not_found otherwise).
	OwnedAgent(ctx context.Context, by domain.Person, ref string) (domain.Agent, error)
	// AgentByRef loads any agent by id or handle (not_found when unknown).
	AgentByRef(ctx context.Context, ref string) (domain.Agent, error)
	// PushedTodo is the todo a person's push of in makes, bounds checked,
	// with no receiver yet (design: Input bounds).
	PushedTodo(by domain.Person, in wire.PushInput) (domain.Todo, error)
}

// Router routes a pooled todo's doorbell to one member (the doorbell
// engine; design: Pool routing).
type Router interface {
	// RoutePooledIn rings one eligible member of pool for t, or holds it.
	RoutePooledIn(ctx context.Context, t domain.Todo, pool *domain.Pool) bool
	// RoutePooledID routes the pooled todo id again (its ring was taken
	// from a member).
	RoutePooledID(ctx context.Context, id string)
	// RouteHeldOf routes the pool's held todos (ringing nobody) as pushes
	// are routed.
	RouteHeldOf(ctx context.Context, pool *domain.Pool)
}

// Metrics counts pool pushes.
type Metrics interface {
	// PoolPushed counts one todo created by a push to a pool.
	PoolPushed()
}

// Config is what Pools are built from.
type Config struct {
	Store   store.Store
	Agents  Agents
	Router  Router
	Metrics Metrics
	Now     func() time.Time // the database clock, as the store keeps it
	NewID   func() string
	Log     *slog.Logger
}

// Pools holds the pool use cases. It is safe for concurrent use.
type Pools struct {
	store   store.Store
	agents  Agents
	router  Router
	metrics Metrics
	now     func() time.Time
	newID   func() string
	log     *slog.Logger
}

// New builds the pool use cases.
func New(c Config) *Pools {
	return &Pools{store: c.Store, agents: c.Agents, router: c.Router, metrics: c.Metrics, now: c.Now, newID: c.NewID, log: c.Log}
}

// Pools (design: Pools): a person's named set of member agents sharing
// queues, and pushes to it. A pooled todo belongs to no agent until a
// member claims it; its doorbell is routed to one member at a time
// (design: Pool routing, internal/doorbell).

// CreatePool creates a pool of the person's agents. Every member must be
// an unrevoked agent of the person, or of another person who granted it to
// the person (design: Pool grants), whose scope has every queue of the
// pool, so that any member can take any of the pool's todos. Errors:
// invalid_argument (with pointer; an unknown agent and another person's
// agent without a grant answer alike), conflict (the person has a pool of
// that name).
func (ps *Pools) CreatePool(ctx context.Context, by domain.Person, in wire.PoolInput) (domain.Pool, error) {
	if err := domain.ValidatePool(in.Name, in.Queues, len(in.Members)); err != nil {
		return domain.Pool{}, err
	}
	p := domain.Pool{ID: ps.newID(), OwnerID: by.ID, Name: in.Name, Queues: in.Queues, CreatedAt: ps.now()}
	members, err := ps.members(ctx, by, in.Members, in.Queues)
	if err != nil {
		return domain.Pool{}, err
	}
	p.Members = members
	err = ps.store.CreatePool(ctx, store.CreatePoolParams{Pool: p, Audit: domain.AuditRecord{
		Actor: "operator:" + by.ID, Action: "pool.create",
		Data: map[string]any{"pool_id": p.ID, "name": p.Name, "queues": p.Queues, "members": memberIDs(p)}}})
	if err != nil {
		return domain.Pool{}, domain.StoreError(err, "a member is gone, or its pool grant was revoked", fmt.Sprintf("you already have a pool named %q", in.Name))
	}
	ps.log.Info("pool created", "pool_id", p.ID, "name", p.Name, "by", by.ID)
	return ps.ownedPool(ctx, by, p.Name)
}

// members checks the member refs of a pool of the person with queues
// (CreatePool's rules; pointers /members/N) and returns them in order.
func (ps *Pools) members(ctx context.Context, by domain.Person, refs, queues []string) ([]domain.PoolMember, error) {
	var pool domain.Pool // the members so far
	for i, ref := range refs {
		ptr := fmt.Sprintf("/members/%d", i)
		if ref == "" {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "a member is an agent id or handle, not empty").At(ptr)
		}
		a, err := ps.poolMember(ctx, by, ref)
		if domain.CodeOf(err) == domain.CodeNotFound {
			return nil, domain.Errorf(domain.CodeInvalidArgument,
				"member %q is not one of your agents, nor one its owner granted you: another person's agent joins your pools once its owner runs `rollcall agent grant create %s %s` (POST /v1/agents/{ref}/pool-grants)", ref, ref, by.ID).At(ptr)
		}
		if err != nil {
			return nil, err
		}
		if a.Revoked() {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "member %s is revoked", a.Handle).At(ptr)
		}
		if pool.HasMember(a.ID) {
			return nil, domain.Errorf(domain.CodeInvalidArgument, "member %s is listed twice", a.Handle).At(ptr)
		}
		for _, q := range queues {
			if !a.Scope.HasQueue(q) {
				return nil, domain.Errorf(domain.CodeInvalidArgument,
					"member %s cannot take the pool's queue %q (not in its scope)", a.Handle, q).At(ptr) // names no other queue: the member may be another person's
			}
		}
		pool.Members = append(pool.Members, domain.PoolMember{AgentID: a.ID, Handle: a.Handle})
	}
	return pool.Members, nil
}

// UpdatePool replaces the members of one of the person's pools (its name
// and queues stay): members as in CreatePool. A member that leaves stops
// being rung at once — the pool's todos rung at it are routed again — and
// keeps a todo it holds until it finishes it or its lease ends; a member
// that joins is rung for the pool's held todos. Audited as pool.update.
// Errors: not_found (no such pool), invalid_argument (with pointer).
func (ps *Pools) UpdatePool(ctx context.Context, by domain.Person, name string, in wire.PoolUpdate) (domain.Pool, error) {
	p, err := ps.ownedPoolRow(ctx, by, name)
	if err != nil {
		return domain.Pool{}, err
	}
	if err := domain.ValidatePool(p.Name, p.Queues, len(in.Members)); err != nil { // the member bound of a create
		return domain.Pool{}, err
	}
	members, err := ps.members(ctx, by, in.Members, p.Queues)
	if err != nil {
		return domain.Pool{}, err
	}
	ids := memberIDs(domain.Pool{Members: members})
	unrung, err := ps.store.SetPoolMembers(ctx, store.SetPoolMembersParams{PoolID: p.ID, Members: ids, Now: ps.now(),
		Audit: func(was []string) domain.AuditRecord {
			return domain.AuditRecord{Actor: "operator:" + by.ID, Action: "pool.update",
				Data: map[string]any{"pool_id": p.ID, "name": p.Name, "members": ids, "was": was}}
		}})
	if err != nil {
		return domain.Pool{}, domain.StoreError(err,
			fmt.Sprintf("pool %q was deleted, or a member's agent or pool grant went, while it was updated; read the pool and try again", name), "")
	}
	ps.log.Info("pool updated", "pool_id", p.ID, "name", p.Name, "members", len(ids), "unrung", len(unrung), "by", by.ID)
	got, err := ps.ownedPool(ctx, by, name)
	if err != nil {
		return domain.Pool{}, err
	}
	for _, id := range unrung { // rung at a member that left: routed again at once, like a revoked grant's
		ps.router.RoutePooledID(ctx, id)
	}
	ps.router.RouteHeldOf(ctx, &got) // and what was held, to the members as they now are
	return got, nil
}

// poolMember loads an agent the person may make a member of their pools:
// their own, or another person's that granted it to them (design: Pool
// grants). Anything else answers not_found, an unknown agent alike.
func (ps *Pools) poolMember(ctx context.Context, by domain.Person, ref string) (domain.Agent, error) {
	a, err := ps.agents.AgentByRef(ctx, ref)
	if err != nil || a.OwnerID == by.ID {
		return a, err
	}
	gs, err := ps.store.ListPoolGrants(ctx, store.ListPoolGrantsParams{AgentID: a.ID, PersonID: by.ID})
	if err != nil {
		return domain.Agent{}, err
	}
	if len(gs) == 0 {
		return domain.Agent{}, domain.Errorf(domain.CodeNotFound, "agent %q not found", ref)
	}
	return a, nil
}

func memberIDs(p domain.Pool) []string {
	ids := make([]string, len(p.Members))
	for i, m := range p.Members {
		ids[i] = m.AgentID
	}
	return ids
}

// ownedPool reads the person's pool by name with its members' handles;
// another person's pool is not_found like a missing one.
func (ps *Pools) ownedPool(ctx context.Context, by domain.Person, name string) (domain.Pool, error) {
	p, err := ps.ownedPoolRow(ctx, by, name)
	if err != nil {
		return domain.Pool{}, err
	}
	ps.withHandles(ctx, &p)
	return p, nil
}

// ownedPoolRow is ownedPool without the members' handles (one agent read
// per member): a push and a listing of the pool's todos need only its id
// and queues (design: Pools).
func (ps *Pools) ownedPoolRow(ctx context.Context, by domain.Person, name string) (domain.Pool, error) {
	p, err := ps.store.GetPool(ctx, store.GetPoolParams{OwnerID: by.ID, Name: name})
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Pool{}, domain.Errorf(domain.CodeNotFound, "pool %q not found", name)
	}
	return p, err
}

func (ps *Pools) withHandles(ctx context.Context, p *domain.Pool) {
	for i := range p.Members {
		if a, err := ps.store.GetAgent(ctx, store.AgentRef{ID: p.Members[i].AgentID}); err == nil {
			p.Members[i].Handle = a.Handle
		}
	}
}

// GetPool returns one of the person's pools by name.
func (ps *Pools) GetPool(ctx context.Context, by domain.Person, name string) (domain.Pool, error) {
	return ps.ownedPool(ctx, by, name)
}

// ListPools lists the person's pools by name.
func (ps *Pools) ListPools(ctx context.Context, by domain.Person) ([]domain.Pool, error) {
	list, err := ps.store.ListPools(ctx, store.ListPoolsParams{OwnerID: by.ID})
	for i := range list {
		ps.withHandles(ctx, &list[i])
	}
	return list, err
}

// DeletePool deletes one of the person's pools and returns it. A pool
// with live todos (pending, claimed or waiting for a retry) is a conflict:
// finish or let them fail first.
func (ps *Pools) DeletePool(ctx context.Context, by domain.Person, name string) (domain.Pool, error) {
	p, err := ps.ownedPool(ctx, by, name)
	if err != nil {
		return domain.Pool{}, err
	}
	err = ps.store.DeletePool(ctx, store.DeletePoolParams{ID: p.ID, Now: ps.now(), Audit: domain.AuditRecord{
		Actor: "operator:" + by.ID, Action: "pool.delete",
		Data: map[string]any{"pool_id": p.ID, "name": p.Name}}})
	if err != nil {
		return domain.Pool{}, domain.StoreError(err, fmt.Sprintf("pool %q not found", name),
			fmt.Sprintf("pool %q has live todos (pending, claimed or waiting for a retry); it can be deleted once they are done or dead", name))
	}
	ps.log.Info("pool deleted", "pool_id", p.ID, "name", p.Name, "by", by.ID)
	return p, nil
}

// PushPoolTodo pushes a todo to one of the person's pools: the body,
// bounds and idempotency key of an agent push (PushTodo), the key unique
// among the pool's live todos. On creation the doorbell routes it to one
// member (design: Pool routing). Errors: not_found, invalid_argument
// (queue not one of the pool's, bad fields; with pointer), conflict (the
// pool has no members left, design: Pool grants).
func (ps *Pools) PushPoolTodo(ctx context.Context, by domain.Person, name string, in wire.PushInput) (domain.Todo, bool, error) {
	p, err := ps.ownedPoolRow(ctx, by, name)
	if err != nil {
		return domain.Todo{}, false, err
	}
	if in.Queue == "" {
		return domain.Todo{}, false, domain.Errorf(domain.CodeInvalidArgument, "queue is required").At("/queue")
	}
	if !p.HasQueue(in.Queue) {
		return domain.Todo{}, false, domain.Errorf(domain.CodeInvalidArgument, "queue %q is not one of pool %s's queues %v", in.Queue, p.Name, p.Queues).At("/queue")
	}
	if len(p.Members) == 0 { // every grant it used was revoked: nobody could ever claim the todo
		return domain.Todo{}, false, domain.Errorf(domain.CodeConflict, "pool %s has no members (their grants were revoked); add members with `rollcall pool update %s --member …` (PATCH /v1/pools/{name}) or delete the pool", p.Name, p.Name)
	}
	t, err := ps.agents.PushedTodo(by, in)
	if err != nil {
		return domain.Todo{}, false, err
	}
	t.PoolID = p.ID
	got, created, err := ps.store.CreateTodo(ctx, store.CreateTodoParams{Todo: t, Audit: &domain.AuditRecord{
		Actor: "operator:" + by.ID, Action: "todo.push_pool",
		Data: map[string]any{"pool_id": p.ID, "todo_id": t.ID, "queue": t.Queue}}})
	if err != nil {
		return domain.Todo{}, false, domain.StoreError(err, fmt.Sprintf("pool %q not found", name), "")
	}
	if created {
		ps.metrics.PoolPushed()
		ps.router.RoutePooledIn(ctx, got, &p) // the pool as read above: one read per push
	}
	return got, created, nil
}

// ListPoolTodos lists the live todos of one of the person's pools
// (pending, claimed or waiting for a retry), oldest first: its backlog,
// and who holds or is rung for what (design: Pools).
func (ps *Pools) ListPoolTodos(ctx context.Context, by domain.Person, name string) ([]domain.Todo, error) {
	p, err := ps.ownedPoolRow(ctx, by, name)
	if err != nil {
		return nil, err
	}
	return ps.store.ListTodos(ctx, store.ListTodosParams{PoolID: p.ID, Live: true})
}
