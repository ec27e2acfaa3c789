// Package store defines the store port: the one interface through which the
// use cases read and write durable state. Two adapters implement it, SQLite
// (store/sqlite, the embedded default) and PostgreSQL (store/postgres), and
// both must pass the one contract suite in store/storetest (design: Store contract).
//
// Conventions every adapter keeps:
//   - Every method is atomic: it commits as one transaction or changes nothing.
//   - Times are passed in by the caller (an injected clock), stored in UTC with
//     microsecond precision, and returned in UTC.
//   - Missing rows return domain.ErrNotFound (wrapped); a state that forbids the
//     change returns domain.ErrConflict (wrapped). Use cases turn them into
//     domain.Error values.
//   - Audit records passed in a params struct are appended in the same
//     transaction as the change, extending the hash chain (domain.AuditHash).
//   - Every method takes a small …Params struct, so adding a field never breaks
//     a call site (the River driver convention).
package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// Store is the store port. Implementations are safe for concurrent use.
type Store interface {
	// PresenceStore serves in/out presence, digests and the sweep (design: Store contract).
	PresenceStore
	// LivenessStore serves heartbeat liveness and the reported-change audit (design: Store contract).
	LivenessStore
	// HookStore serves intake: hooks and their deliveries (design: Hooks).
	HookStore
	// OwnerLeaseStore serves the instances' owner leases (design: Owner lease).
	OwnerLeaseStore
	// OAuthStore serves the authorization server for /mcp (design: Sign-in for MCP clients).
	OAuthStore
	// PoolStore serves pools and the routing of their todos (design: Pools, Pool routing).
	PoolStore

	// Dialect names the adapter: "sqlite" or "postgres".
	Dialect() string
	// Close releases the database handle.
	Close() error

	// Persons and their API tokens.

	// BootstrapAdmin creates the admin person with the token hash if and only
	// if there is no person yet; created reports whether it did.
	BootstrapAdmin(ctx context.Context, p BootstrapAdminParams) (created bool, err error)
	// TeamStore serves persons, personal tokens and console sessions.
	TeamStore

	// Agents and credentials.

	// CreateAgent inserts the agent and its first credential and appends the
	// audit record. A taken handle returns ErrConflict.
	CreateAgent(ctx context.Context, p CreateAgentParams) error
	// GetAgent returns an agent by id (Ref.ID) or handle (Ref.Handle).
	GetAgent(ctx context.Context, ref AgentRef) (domain.Agent, error)
	// ListAgents lists the owner's agents ordered by handle ("" owner = all).
	ListAgents(ctx context.Context, p ListAgentsParams) ([]domain.Agent, error)
	// UpdateAgent changes name, billing configuration and active flag; nil
	// fields keep their value. A revoked agent returns ErrConflict.
	UpdateAgent(ctx context.Context, p UpdateAgentParams) (domain.Agent, error)
	// RevokeAgent marks the agent revoked (permanent) and revokes all its
	// credentials. An already revoked agent returns ErrConflict.
	RevokeAgent(ctx context.Context, p RevokeAgentParams) (domain.Agent, error)
	// RotateCredential revokes every live credential of the agent and inserts
	// the new one. A revoked agent returns ErrConflict. It returns the ids of
	// the credentials it revoked.
	RotateCredential(ctx context.Context, p RotateCredentialParams) (revoked []string, err error)
	// AgentByCredentialHash returns the agent of a live (unrevoked) credential
	// and the credential's id; ErrNotFound when none.
	AgentByCredentialHash(ctx context.Context, hash string) (domain.Agent, string, error)

	// Todos.

	// CreateTodo inserts a todo, or, when IdempotencyKey is set and a live todo
	// of the agent has that key, returns that todo with created=false. The
	// store sets next_ring_at = domain.NextRingAt(RingAttempts, LastRingedAt
	// or CreatedAt) (design: Ring budget). With Audit set, concurrent calls
	// share one transaction, each with its own outcome (design: Group commit).
	CreateTodo(ctx context.Context, p CreateTodoParams) (t domain.Todo, created bool, err error)
	// GetTodo returns a todo by id.
	GetTodo(ctx context.Context, id string) (domain.Todo, error)
	// ListTodos lists todos matching the filter, oldest first.
	ListTodos(ctx context.Context, p ListTodosParams) ([]domain.Todo, error)
	// ClaimTodo claims one todo of the agent if it is claimable at Now
	// (pending, or failed with RetryAt <= Now) and in one of Queues: state
	// claimed, attempt+1, lease until Now+Lease. Not claimable → ErrConflict;
	// no such todo of that agent → ErrNotFound. Exactly one of two racing
	// claims wins. An unclaimed todo of one of the agent's pools is
	// claimable too: the claim sets AgentID and clears RingAgentID.
	ClaimTodo(ctx context.Context, p ClaimTodoParams) (domain.Todo, error)
	// ClaimNext claims the oldest claimable todo of the agent in Queues (the
	// agent's granted queues, or the one requested), its own or an
	// unclaimed one of its pools (design: Pools). None → ErrNotFound.
	ClaimNext(ctx context.Context, p ClaimNextParams) (domain.Todo, error)
	// ClaimNextN is ClaimNext of up to p.N todos at once (design: Claiming
	// in batches): the p.N oldest claimable ones, own and pooled, in one
	// conditional update, each with its own lease of p.Lease, returned
	// oldest first (created_at, then id). N <= 1 claims one; N is at most
	// domain.MaxClaimBatch. None claimable → an empty slice and nil.
	ClaimNextN(ctx context.Context, p ClaimNextParams) ([]domain.Todo, error)
	// RenewLease extends the lease of a todo the agent holds (claimed, lease
	// not expired at Now) to Now+Lease; else ErrConflict.
	RenewLease(ctx context.Context, p RenewLeaseParams) (domain.Todo, error)
	// CompleteTodo marks a claimed todo whose lease has not expired done with
	// its result; else ErrConflict.
	CompleteTodo(ctx context.Context, p CompleteTodoParams) (domain.Todo, error)
	// CompleteAndClaim is CompleteTodo of c and ClaimNextN of next in one
	// transaction (design: Complete and claim the next): the claims are
	// made only if the complete is, and commit with it. Errors are
	// CompleteTodo's; nothing is claimed then.
	CompleteAndClaim(ctx context.Context, c CompleteTodoParams, next ClaimNextParams) (done domain.Todo, claimed []domain.Todo, err error)
	// FailTodo records a failed attempt of a claimed, unexpired todo in one
	// transaction: state failed, LastError = Reason, RetryAt =
	// domain.NextAfterFailure(attempt, max_attempts, Now) (nil = dead letter).
	FailTodo(ctx context.Context, p FailTodoParams) (domain.Todo, error)
	// FailAndClaim is FailTodo of f and ClaimNextN of next in one
	// transaction, as CompleteAndClaim. The failed todo itself is not
	// among the claims (its retry is not due yet, or it is dead).
	FailAndClaim(ctx context.Context, f FailTodoParams, next ClaimNextParams) (failed domain.Todo, claimed []domain.Todo, err error)
	// ReapExpiredLeases returns claimed todos whose lease expired at or before
	// Now: pending again while attempt < max_attempts, otherwise dead-lettered
	// (failed, no retry) with LastError "lease expired". At most Limit rows;
	// it returns the todos reaped, each with its agent.
	ReapExpiredLeases(ctx context.Context, p ReapParams) ([]Reaped, error)
	// MarkRungBatch records doorbell rings, each of marks in their order (a
	// todo named twice counts two rings), in one transaction: per mark
	// ring_attempts+1, last_ringed_at = At and next_ring_at =
	// domain.NextRingAt(new ring_attempts, At) (none once the budget is
	// spent; design: Ring budget), only while the todo is pending. The
	// doorbell's ring records are written together. It returns how many of
	// them changed a todo; on an error none did.
	MarkRungBatch(ctx context.Context, marks []MarkRungParams) (int, error)

	// Audit log.

	// AppendAudit appends one entry to the chain.
	AppendAudit(ctx context.Context, at time.Time, r domain.AuditRecord) (domain.AuditEntry, error)
	// ListAudit returns entries in ascending seq after AfterSeq, at most Limit,
	// optionally only for one agent.
	ListAudit(ctx context.Context, p ListAuditParams) ([]domain.AuditEntry, error)
	// VerifyAudit walks the whole chain and reports breaks; with Scoped set
	// it counts and names only the entries of AgentIDs (design: Persons and roles).
	VerifyAudit(ctx context.Context, p VerifyAuditParams) (domain.AuditVerifyResult, error)

	// MarkFirstStream records that the agent opened a notification stream
	// at now, and reports whether it was the agent's first ever: true for
	// exactly one caller across instances, false afterwards and for an
	// unknown agent (the digest reason "connect" vs "reconnect";
	// design: Connect and reconnect digests).
	MarkFirstStream(ctx context.Context, agentID string, now time.Time) (bool, error)
}

// VerifyAuditParams scopes VerifyAudit. Scoped false = the whole chain, as
// an admin sees it; true = Checked counts only entries whose agent is in
// AgentIDs, and a break elsewhere is reported as one warning naming no
// sequence number (a member learns nothing about others' activity).
type VerifyAuditParams struct {
	Scoped   bool
	AgentIDs []string
}

// BootstrapAdminParams creates the first person.
type BootstrapAdminParams struct {
	Person    domain.Person
	TokenHash string
	// TokenID names the admin's first token ("" = one derived from the
	// person id, see Token).
	TokenID string
}

// Token is the admin's first token: named "bootstrap", made with the
// person, TokenID or else "bootstrap-" and the person id.
func (p BootstrapAdminParams) Token() domain.PersonToken {
	id := p.TokenID
	if id == "" {
		id = "bootstrap-" + p.Person.ID
	}
	return domain.PersonToken{ID: id, PersonID: p.Person.ID, Name: "bootstrap", CreatedAt: p.Person.CreatedAt}
}

// AgentRef addresses an agent by id or by handle (exactly one set).
type AgentRef struct {
	ID     string
	Handle string
}

// CreateAgentParams inserts an agent with its first credential.
type CreateAgentParams struct {
	Agent          domain.Agent
	CredentialID   string
	CredentialHash string
	Audit          domain.AuditRecord
}

// ListAgentsParams filters ListAgents.
type ListAgentsParams struct {
	OwnerID string // "" = every owner
}

// UpdateAgentParams changes the mutable agent fields; nil = unchanged.
// OwnerID hands the agent to another person (admin only, checked by the
// use case).
type UpdateAgentParams struct {
	ID string
	// OwnerID hands the agent over (design: Hand-over). Its memberships in
	// other persons' pools are kept through pool grants to each pool's
	// owner, granted by By (those it had as its owner's own agent get one
	// made now); its grant to the new owner, now needless, is deleted
	// (design: Pool grants).
	OwnerID      *string
	By           string
	Name         *string
	BillingMode  *string
	BillingModes *[]string
	ToolClass    *string
	Active       *bool
	Now          time.Time
	Audit        *domain.AuditRecord
}

// RevokeAgentParams revokes an agent.
type RevokeAgentParams struct {
	ID    string
	Now   time.Time
	Audit domain.AuditRecord
}

// RotateCredentialParams replaces an agent's credentials.
type RotateCredentialParams struct {
	AgentID        string
	CredentialID   string
	CredentialHash string
	Now            time.Time
	Audit          domain.AuditRecord
}

// CreateTodoParams inserts a todo (ID, times and counters already set by the
// use case; State is pending).
type CreateTodoParams struct {
	Todo domain.Todo
	// Audit, when set, is appended in the same transaction if (and only if)
	// the todo is created (design: Handoff; a handoff).
	Audit *domain.AuditRecord
}

// ListTodosParams filters ListTodos. Empty fields do not filter.
type ListTodosParams struct {
	AgentID string
	Queues  []string // any of
	State   string
	Limit   int
	// AfterID, when set, starts the list after that todo in the
	// (created_at, id) order: keyset paging (design: Paging).
	AfterID string
	// PoolID lists the todos of that pool (with AgentID: either).
	PoolID string
	// WithPools adds the unclaimed todos of AgentID's pools (design: Pools).
	WithPools bool
	// Live keeps only the live todos: pending, claimed, or failed with a
	// retry scheduled (domain.Todo.Live; a pool's backlog, design: Pools).
	Live bool
}

// ClaimTodoParams claims one todo.
type ClaimTodoParams struct {
	AgentID string
	TodoID  string
	Queues  []string
	Lease   time.Duration
	Now     time.Time
}

// ClaimNextParams claims the next todo, or the next N (ClaimNextN).
type ClaimNextParams struct {
	AgentID string
	Queues  []string
	Lease   time.Duration
	Now     time.Time
	// N is how many ClaimNextN claims at most (1..domain.MaxClaimBatch; <= 1
	// is one). ClaimNext claims one whatever N says.
	N int
}

// RenewLeaseParams extends a lease.
type RenewLeaseParams struct {
	AgentID string
	TodoID  string
	Lease   time.Duration
	Now     time.Time
}

// CompleteTodoParams completes a todo.
type CompleteTodoParams struct {
	AgentID string
	TodoID  string
	Result  json.RawMessage
	Now     time.Time
}

// FailTodoParams fails an attempt.
type FailTodoParams struct {
	AgentID string
	TodoID  string
	Reason  string
	Now     time.Time
}

// Reaped is a todo whose expired lease ReapExpiredLeases returned, and
// its agent; a pooled todo back in its pool has AgentID "" and its PoolID.
type Reaped struct{ ID, AgentID, PoolID string }

// ReapParams bounds one reaper pass.
type ReapParams struct {
	Now   time.Time
	Limit int
}

// MarkRungParams records one doorbell ring.
type MarkRungParams struct {
	TodoID string
	At     time.Time
}

// ListAuditParams pages the audit log.
type ListAuditParams struct {
	AgentID  string
	AfterSeq int64
	Limit    int
}

// TeamStore is the part of the port for persons, their personal tokens and
// console sessions (design: Persons and roles, Personal tokens, Console sessions). Every change
// appends its audit record in the same transaction.
type TeamStore interface {
	// CreatePerson inserts a person with its first token.
	CreatePerson(ctx context.Context, p CreatePersonParams) error
	// GetPerson returns a person by id; ErrNotFound when none.
	GetPerson(ctx context.Context, id string) (domain.Person, error)
	// ListPersons lists every person, oldest first.
	ListPersons(ctx context.Context) ([]domain.Person, error)
	// UpdatePerson reads the person and the number of active admins,
	// passes them to p.Change and writes the name, role and active flag of
	// the person it returns, all in one write transaction with the persons
	// locked: of racing changes each sees the ones before it, so two cannot
	// both pass a check on the same state (design: Last active admin). An
	// error of Change is returned as is and nothing is written; ErrNotFound
	// when no person has the id. Deactivating ends the person's console
	// sessions.
	UpdatePerson(ctx context.Context, p UpdatePersonParams) (domain.Person, error)

	// CreateToken inserts a personal token of an existing person
	// (ErrNotFound otherwise).
	CreateToken(ctx context.Context, p CreateTokenParams) error
	// ListTokens lists the person's unrevoked tokens, oldest first.
	ListTokens(ctx context.Context, personID string) ([]domain.PersonToken, error)
	// RevokeToken revokes one unrevoked token of the person and ends the
	// console sessions made from it; ErrNotFound when the person has no
	// such unrevoked token.
	RevokeToken(ctx context.Context, p RevokeTokenParams) (domain.PersonToken, error)
	// TokenByHash returns a token (revoked or not) and its person;
	// ErrNotFound when none has that hash.
	TokenByHash(ctx context.Context, hash string) (domain.Person, domain.PersonToken, error)
	// TokenByID returns a token and its person; ErrNotFound when none.
	TokenByID(ctx context.Context, id string) (domain.Person, domain.PersonToken, error)
	// TouchToken sets last_used_at = At when it is older than At-Every (or
	// unset): at most one write per token per Every.
	TouchToken(ctx context.Context, p TouchTokenParams) error

	// CreateConsoleSession inserts a console session.
	CreateConsoleSession(ctx context.Context, s domain.ConsoleSession) error
	// ConsoleSessionByID returns a session with its token and person;
	// ErrNotFound when none.
	ConsoleSessionByID(ctx context.Context, id string) (domain.ConsoleSession, domain.PersonToken, domain.Person, error)
	// EndConsoleSession sets ended_at (sign-out); ending an ended or
	// unknown session is not an error.
	EndConsoleSession(ctx context.Context, id string, at time.Time) error

	// CredentialMayAuthenticate reports whether an unrevoked agent
	// credential has the hash and its agent is not revoked (active or not):
	// the failed-auth limit's check, one indexed probe that reads no row
	// (design: The failed-auth limit).
	CredentialMayAuthenticate(ctx context.Context, hash string) (bool, error)
	// TokenMayAuthenticate reports whether a personal token has the hash,
	// unrevoked and unexpired at now, and its person is active: the
	// failed-auth limit's check, one indexed probe that reads no row
	// (design: The failed-auth limit).
	TokenMayAuthenticate(ctx context.Context, hash string, now time.Time) (bool, error)

	// LiveCredentials returns which of the agent credential ids are still
	// live: credential not revoked, its agent active and not revoked. Open
	// gateway connections and MCP sessions re-check with it (design: Revocation within 5 s).
	LiveCredentials(ctx context.Context, ids []string) (map[string]bool, error)
}

// CreatePersonParams inserts a person and its first token.
type CreatePersonParams struct {
	Person    domain.Person
	Token     domain.PersonToken
	TokenHash string
	Audit     domain.AuditRecord
}

// UpdatePersonParams changes a person through Change.
type UpdatePersonParams struct {
	ID string
	// Change returns the person to write from cur, the person as stored,
	// and activeAdmins, how many persons are active admins (cur included
	// when it is one), both read under the lock of the write. It is the
	// use case's rule: pure, called at most once, no I/O. Its Name, Role
	// (with Admin) and Active are written; the other fields are the
	// store's (deactivated_at is set when Active turns false, kept while
	// it stays false, cleared when it turns true).
	Change func(cur domain.Person, activeAdmins int) (domain.Person, error)
	Now    time.Time
	Audit  domain.AuditRecord
}

// CreateTokenParams inserts a personal token.
type CreateTokenParams struct {
	Token domain.PersonToken
	Hash  string
	Audit domain.AuditRecord
}

// RevokeTokenParams revokes a personal token of PersonID.
type RevokeTokenParams struct {
	PersonID string
	ID       string
	Now      time.Time
	Audit    domain.AuditRecord
}

// TouchTokenParams records a use of a token.
type TouchTokenParams struct {
	ID    string
	At    time.Time
	Every time.Duration
}
