package storetest

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// The stored-data fixture: WriteFixture fills an empty store with a small
// data set touching persons, tokens, agents, credentials, todos, presence,
// liveness, hooks, deliveries and the audit chain; Snapshot reads it back
// through the port. An adapter keeps a database written by an earlier
// release (testdata/) with the snapshot that release read from it, and
// checks that the current code opens it, migrates it and reads the same
// (stored data does not change between releases).

// WriteFixture writes the fixture data set into the empty store s.
func WriteFixture(ctx context.Context, s store.Store) error {
	admin := domain.Person{ID: "fx-person-admin", Name: "ann", Admin: true, CreatedAt: Base, UpdatedAt: Base, Active: true}
	if _, err := s.BootstrapAdmin(ctx, store.BootstrapAdminParams{Person: admin, TokenHash: "fx-token-ann", TokenID: "fx-token-1"}); err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	a := newAgent("fx-ada", admin.ID, "q", "reviews")
	a.ID = "fx-agent-ada"
	p, _ := vendParams(a)
	p.CredentialID, p.CredentialHash = "fx-cred-1", "fx-cred-hash-1"
	if err := s.CreateAgent(ctx, p); err != nil {
		return fmt.Errorf("vend: %w", err)
	}
	for i, q := range []string{"q", "q", "reviews"} {
		td := newTodo(a.ID, q, at(time.Duration(i+1)*time.Second))
		td.ID = fmt.Sprintf("fx-todo-%d", i+1)
		td.Payload = json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`)
		if i == 2 {
			td.IdempotencyKey = "fx-key"
		}
		if _, _, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: td}); err != nil {
			return fmt.Errorf("push: %w", err)
		}
	}
	if _, err := s.ClaimTodo(ctx, store.ClaimTodoParams{AgentID: a.ID, TodoID: "fx-todo-1", Queues: a.Scope.Queues,
		Lease: time.Minute, Now: at(time.Minute)}); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if _, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: "fx-todo-1",
		Result: json.RawMessage(`{"ok":true}`), Now: at(90 * time.Second)}); err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if _, err := markOne(ctx, s, store.MarkRungParams{TodoID: "fx-todo-2", At: at(3 * time.Minute)}); err != nil {
		return fmt.Errorf("mark rung: %w", err)
	}
	if _, err := s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at(4 * time.Minute),
		SetShift: true, Shift: "Mon-Fri 09:00-17:00 Europe/Berlin",
		Audit: domain.AuditRecord{Actor: "operator:" + admin.ID, Action: "agent.presence", AgentID: a.ID}}); err != nil {
		return fmt.Errorf("presence: %w", err)
	}
	if _, err := s.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{Rows: []store.HeartbeatRow{{AgentID: a.ID,
		State: "online", LastHeartbeatAt: at(5 * time.Minute)}}}); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	h := domain.Hook{ID: "fx-hook-1", OwnerID: admin.ID, AgentID: a.ID, Kind: "github", Queue: "reviews",
		Secret: "fx-secret", CreatedAt: at(6 * time.Minute), UpdatedAt: at(6 * time.Minute)}
	if err := s.CreateHook(ctx, store.CreateHookParams{Hook: h,
		Audit: domain.AuditRecord{Actor: "operator:" + admin.ID, Action: "hook.create", AgentID: a.ID}}); err != nil {
		return fmt.Errorf("hook: %w", err)
	}
	d := domain.HookDelivery{ID: "fx-delivery-1", HookID: h.ID, Key: "fx-gh-1", Event: "pull_request",
		Action: "opened", Outcome: "created", ReceivedAt: at(7 * time.Minute)}
	td := newTodo(a.ID, "reviews", at(7*time.Minute))
	td.ID, td.Source = "fx-todo-hook", "hook:"+h.ID
	d.TodoID = td.ID
	if _, err := s.RecordDelivery(ctx, store.RecordDeliveryParams{Delivery: d, Todo: &td}); err != nil {
		return fmt.Errorf("delivery: %w", err)
	}
	return nil
}

// snapshotAgent is an agent with the columns its JSON form leaves out.
type snapshotAgent struct {
	domain.Agent
	Presence domain.PresenceColumns
	Liveness domain.LivenessColumns
}

// Snapshot reads the fixture back through the port as indented JSON.
func Snapshot(ctx context.Context, s store.Store) ([]byte, error) {
	out := map[string]any{}
	persons, err := s.ListPersons(ctx)
	if err != nil {
		return nil, err
	}
	out["persons"] = persons
	tokens, err := s.ListTokens(ctx, "fx-person-admin")
	if err != nil {
		return nil, err
	}
	out["tokens"] = tokens
	agents, err := s.ListAgents(ctx, store.ListAgentsParams{})
	if err != nil {
		return nil, err
	}
	var as []snapshotAgent
	for _, a := range agents {
		as = append(as, snapshotAgent{Agent: a, Presence: a.Presence, Liveness: a.Liveness})
	}
	out["agents"] = as
	byCred, credID, err := s.AgentByCredentialHash(ctx, "fx-cred-hash-1")
	if err != nil {
		return nil, err
	}
	out["credential"] = []string{byCred.ID, credID}
	if out["todos"], err = s.ListTodos(ctx, store.ListTodosParams{}); err != nil {
		return nil, err
	}
	if out["audit"], err = s.ListAudit(ctx, store.ListAuditParams{}); err != nil {
		return nil, err
	}
	if out["verify"], err = s.VerifyAudit(ctx, store.VerifyAuditParams{}); err != nil {
		return nil, err
	}
	if out["hooks"], err = s.ListHooks(ctx, store.ListHooksParams{}); err != nil {
		return nil, err
	}
	if out["deliveries"], err = s.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: "fx-hook-1"}); err != nil {
		return nil, err
	}
	return json.MarshalIndent(out, "", "  ")
}

// mainSnapshot is what the store code of the release that wrote the
// adapters' testdata fixtures read from them (the same for both dialects),
// with the read rules changed since: a done todo has no next_ring_at
// (design: Ring budget). The stored rows are as that release wrote them.
//
//go:embed testdata/main-fixture.json
var mainSnapshot []byte

// CheckFixture fails t unless Snapshot(s) reads what the writing release
// read: s is an adapter opened on its testdata fixture.
func CheckFixture(t *testing.T, s store.Store) {
	t.Helper()
	got, err := Snapshot(t.Context(), s)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if d := cmp.Diff(strings.TrimSpace(string(mainSnapshot)), string(got)); d != "" {
		t.Errorf("the fixture reads differently from the release that wrote it (-then +now):\n%s", d)
	}
}
