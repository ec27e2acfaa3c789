package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// hookTests cover the HookStore part of the port (design: Hooks) and the
// handoff grants of the scope.
var hookTests = []contractTest{
	{"HookCreateListRotateDelete", testHookCRUD},
	{"HandoffGrantsRoundTrip", testHandoffGrants},
	{"RecordDeliveryDedupes", testRecordDelivery},
	{"RecordDeliveryRace", testRecordDeliveryRace},
	{"PruneDeliveriesByAge", testPruneDeliveries},
	{"CreateTodoAuditOnlyWhenCreated", testCreateTodoAudit},
}

func newHook(agent vended, kind string) domain.Hook {
	return domain.Hook{
		ID: uuid.NewString(), OwnerID: agent.OwnerID, AgentID: agent.ID, Kind: kind, Queue: agent.Scope.Queues[0],
		Filter:        domain.HookFilter{Repositories: []string{"acme/widgets"}, Labels: []string{"bug"}, Actions: []string{"issues.opened"}},
		TitleTemplate: "{title}", KindLabel: "triage", Secret: "whsec_" + uuid.NewString(),
		CreatedAt: Base, UpdatedAt: Base,
	}
}

func hookAudit(h domain.Hook, action string) domain.AuditRecord {
	return domain.AuditRecord{Actor: "operator:" + h.OwnerID, Action: action, AgentID: h.AgentID, Data: map[string]any{"hook_id": h.ID}}
}

func createHook(t *testing.T, s store.Store, h domain.Hook) {
	t.Helper()
	if err := s.CreateHook(t.Context(), store.CreateHookParams{Hook: h, Audit: hookAudit(h, "hook.create")}); err != nil {
		t.Fatalf("CreateHook: %v", err)
	}
}

func testHookCRUD(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("reviewer", ownerID, "reviews"))
	b := vend(t, s, newAgent("other", "0b6f7a44-0000-4000-8000-000000000002", "ops"))
	h1, h2, h3 := newHook(a, domain.HookGitHub), newHook(a, domain.HookStandard), newHook(b, domain.HookGitHub)
	h2.CreatedAt, h2.UpdatedAt, h2.Filter, h2.TitleTemplate, h2.KindLabel = at(time.Second), at(time.Second), domain.HookFilter{}, "", ""
	for _, h := range []domain.Hook{h1, h2, h3} {
		createHook(t, s, h)
	}
	bad := newHook(a, domain.HookGitHub)
	bad.AgentID = uuid.NewString()
	if err := s.CreateHook(ctx, store.CreateHookParams{Hook: bad, Audit: hookAudit(bad, "hook.create")}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("hook of an unknown agent: %v, want ErrNotFound", err)
	}
	got, err := s.GetHook(ctx, h1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(h1, got); d != "" {
		t.Fatalf("GetHook (-want +got):\n%s", d)
	}
	if _, err := s.GetHook(ctx, uuid.NewString()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown hook: %v", err)
	}
	list, err := s.ListHooks(ctx, store.ListHooksParams{OwnerID: ownerID})
	if err != nil || len(list) != 2 || list[0].ID != h1.ID || list[1].ID != h2.ID {
		t.Fatalf("ListHooks(owner) = %v, %v", list, err)
	}
	if d := cmp.Diff(h2, list[1]); d != "" {
		t.Fatalf("listed hook (-want +got):\n%s", d)
	}
	list, err = s.ListHooks(ctx, store.ListHooksParams{AgentID: b.ID})
	if err != nil || len(list) != 1 || list[0].ID != h3.ID {
		t.Fatalf("ListHooks(agent) = %v, %v", list, err)
	}
	rot, err := s.RotateHookSecret(ctx, store.RotateHookSecretParams{ID: h1.ID, Secret: "whsec_new", Now: at(time.Minute), Audit: hookAudit(h1, "hook.rotate_secret")})
	if err != nil || rot.Secret != "whsec_new" || !rot.UpdatedAt.Equal(at(time.Minute)) || !rot.CreatedAt.Equal(Base) {
		t.Fatalf("rotate = %+v, %v", rot, err)
	}
	if _, err := s.RotateHookSecret(ctx, store.RotateHookSecretParams{ID: uuid.NewString(), Secret: "x", Now: at(time.Minute), Audit: hookAudit(h1, "hook.rotate_secret")}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("rotate unknown: %v", err)
	}
	// A reseal replaces the stored form only while it is still the one
	// read, and touches neither updated_at nor the audit log.
	audits := auditCount(t, s)
	if ok, err := s.ResealHookSecret(ctx, store.ResealHookSecretParams{ID: h1.ID, Old: "whsec_stale", New: "sealed:v1:x"}); ok || err != nil {
		t.Fatalf("reseal of a changed secret = %v, %v; want false", ok, err)
	}
	if ok, err := s.ResealHookSecret(ctx, store.ResealHookSecretParams{ID: h1.ID, Old: "whsec_new", New: "sealed:v1:x"}); !ok || err != nil {
		t.Fatalf("reseal = %v, %v; want true", ok, err)
	}
	if got, err := s.GetHook(ctx, h1.ID); err != nil || got.Secret != "sealed:v1:x" || !got.UpdatedAt.Equal(at(time.Minute)) {
		t.Fatalf("resealed hook = %+v, %v", got, err)
	}
	if ok, err := s.ResealHookSecret(ctx, store.ResealHookSecretParams{ID: uuid.NewString(), Old: "a", New: "b"}); ok || err != nil {
		t.Fatalf("reseal of an unknown hook = %v, %v; want false", ok, err)
	}
	if n := auditCount(t, s); n != audits {
		t.Fatalf("audit entries %d → %d: a reseal is not audited", audits, n)
	}
	record(t, s, domain.HookDelivery{ID: uuid.NewString(), HookID: h1.ID, Key: "k1", Outcome: domain.DeliveryIgnored, ReceivedAt: at(time.Minute)}, nil)
	before := auditCount(t, s)
	if err := s.DeleteHook(ctx, store.DeleteHookParams{ID: h1.ID, Now: at(2 * time.Minute), Audit: hookAudit(h1, "hook.delete")}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteHook(ctx, store.DeleteHookParams{ID: h1.ID, Now: at(2 * time.Minute), Audit: hookAudit(h1, "hook.delete")}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if n := auditCount(t, s); n != before+1 {
		t.Fatalf("audit entries %d → %d, want one for the delete", before, n)
	}
	if ds, err := s.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: h1.ID}); err != nil || len(ds) != 0 {
		t.Fatalf("deliveries of a deleted hook: %v, %v", ds, err)
	}
	es, err := s.ListAudit(ctx, store.ListAuditParams{AgentID: a.ID})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range es {
		actions = append(actions, e.Action)
	}
	if d := cmp.Diff([]string{"agent.vend", "hook.create", "hook.create", "hook.rotate_secret", "hook.delete"}, actions); d != "" {
		t.Fatalf("audit actions (-want +got):\n%s", d)
	}
}

func testHandoffGrants(t *testing.T, in Instance) {
	s := in.Store
	target := vend(t, s, newAgent("builder", ownerID, "builds"))
	a := newAgent("planner", ownerID, "plans")
	a.Scope.Handoff = []domain.HandoffGrant{{AgentID: target.ID, Handle: "builder", Queue: "builds"}}
	vend(t, s, a)
	got, err := s.GetAgent(t.Context(), store.AgentRef{Handle: "planner"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a.Scope.Handoff, got.Scope.Handoff); d != "" {
		t.Fatalf("handoff (-want +got):\n%s", d)
	}
	if got, _ := s.GetAgent(t.Context(), store.AgentRef{ID: target.ID}); got.Scope.Handoff != nil {
		t.Fatalf("no grants read back as %v, want nil", got.Scope.Handoff)
	}
}

func record(t *testing.T, s store.Store, d domain.HookDelivery, td *domain.Todo) store.RecordDeliveryResult {
	t.Helper()
	res, err := s.RecordDelivery(t.Context(), store.RecordDeliveryParams{Delivery: d, Todo: td})
	if err != nil {
		t.Fatalf("RecordDelivery: %v", err)
	}
	return res
}

func testRecordDelivery(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("reviewer", ownerID, "reviews"))
	h := newHook(a, domain.HookGitHub)
	createHook(t, s, h)
	td := newTodo(a.ID, "reviews", at(time.Second))
	td.IdempotencyKey, td.Source, td.Kind, td.CreatedBy = "delivery-1", "github", "pull_request", "hook:"+h.ID
	d1 := domain.HookDelivery{ID: uuid.NewString(), HookID: h.ID, Key: "delivery-1", Event: "pull_request", Action: "opened", Outcome: domain.DeliveryCreated, ReceivedAt: at(time.Second)}
	res := record(t, s, d1, &td)
	if res.Duplicate || !res.Created || res.Todo.ID != td.ID || res.Delivery.TodoID != td.ID {
		t.Fatalf("first delivery: %+v", res)
	}
	// Done, the todo no longer holds its key; a redelivery still creates nothing.
	claim(t, s, a, td.ID, time.Minute, at(2*time.Second))
	if _, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: a.ID, TodoID: td.ID, Now: at(3 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	again := newTodo(a.ID, "reviews", at(time.Minute))
	again.IdempotencyKey = "delivery-1"
	d2 := d1
	d2.ID, d2.ReceivedAt = uuid.NewString(), at(time.Minute)
	res = record(t, s, d2, &again)
	if !res.Duplicate || res.Created || res.Delivery.ID != d1.ID || res.Delivery.TodoID != td.ID {
		t.Fatalf("redelivery: %+v", res)
	}
	if _, err := s.GetTodo(ctx, again.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("redelivery created todo: %v", err)
	}
	// Refused deliveries have no key and are all recorded.
	for i := range 2 {
		record(t, s, domain.HookDelivery{ID: uuid.NewString(), HookID: h.ID, Outcome: domain.DeliveryRefused, Reason: "bad signature", ReceivedAt: at(time.Duration(2+i) * time.Minute)}, nil)
	}
	// An ignored delivery keeps its key: its redelivery is a duplicate.
	ign := domain.HookDelivery{ID: uuid.NewString(), HookID: h.ID, Key: "delivery-2", Event: "star", Outcome: domain.DeliveryIgnored, ReceivedAt: at(5 * time.Minute)}
	record(t, s, ign, nil)
	ign2 := ign
	ign2.ID = uuid.NewString()
	if res := record(t, s, ign2, nil); !res.Duplicate {
		t.Fatalf("ignored redelivery: %+v", res)
	}
	ds, err := s.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: h.ID})
	if err != nil || len(ds) != 4 {
		t.Fatalf("ListDeliveries = %d, %v; want 4", len(ds), err)
	}
	if ds[0].ID != ign.ID || ds[3].ID != d1.ID || ds[3].TodoID != td.ID || !ds[3].ReceivedAt.Equal(at(time.Second)) {
		t.Fatalf("newest first: %+v", ds)
	}
	if d := cmp.Diff(ign, ds[0]); d != "" {
		t.Fatalf("delivery (-want +got):\n%s", d)
	}
	if ds, _ := s.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: h.ID, Limit: 2}); len(ds) != 2 {
		t.Fatalf("limit 2: %d", len(ds))
	}
	// A delivery whose todo key a live todo holds records that todo.
	live := newTodo(a.ID, "reviews", at(6*time.Minute))
	live.IdempotencyKey = "shared"
	push(t, s, live)
	dup := newTodo(a.ID, "reviews", at(6*time.Minute))
	dup.IdempotencyKey = "shared"
	res = record(t, s, domain.HookDelivery{ID: uuid.NewString(), HookID: h.ID, Key: "shared", Outcome: domain.DeliveryCreated, ReceivedAt: at(6 * time.Minute)}, &dup)
	if res.Duplicate || res.Created || res.Todo.ID != live.ID || res.Delivery.TodoID != live.ID {
		t.Fatalf("live key: %+v", res)
	}
}

func testRecordDeliveryRace(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("reviewer", ownerID, "reviews"))
	h := newHook(a, domain.HookGitHub)
	createHook(t, s, h)
	const n = 8
	var wg sync.WaitGroup
	results := make([]store.RecordDeliveryResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			td := newTodo(a.ID, "reviews", at(time.Second))
			td.IdempotencyKey = "race"
			results[i], errs[i] = s.RecordDelivery(t.Context(), store.RecordDeliveryParams{
				Delivery: domain.HookDelivery{ID: uuid.NewString(), HookID: h.ID, Key: "race", Outcome: domain.DeliveryCreated, ReceivedAt: at(time.Second)},
				Todo:     &td,
			})
		})
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("racer %d: %v", i, errs[i])
		}
		if results[i].Created {
			created++
		} else if !results[i].Duplicate {
			t.Fatalf("racer %d neither created nor duplicate: %+v", i, results[i])
		}
	}
	ts, err := s.ListTodos(t.Context(), store.ListTodosParams{AgentID: a.ID})
	if created != 1 || err != nil || len(ts) != 1 {
		t.Fatalf("created %d, todos %d (%v); want exactly one", created, len(ts), err)
	}
}

func testCreateTodoAudit(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("builder", ownerID, "builds"))
	td := newTodo(a.ID, "builds", at(time.Second))
	td.IdempotencyKey = "k"
	rec := &domain.AuditRecord{Actor: "agent:" + uuid.NewString(), Action: "todo.hand_off", AgentID: a.ID, Data: map[string]any{"todo_id": td.ID}}
	before := auditCount(t, s)
	if _, created, err := s.CreateTodo(t.Context(), store.CreateTodoParams{Todo: td, Audit: rec}); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	again := newTodo(a.ID, "builds", at(2*time.Second))
	again.IdempotencyKey = "k"
	if got, created, err := s.CreateTodo(t.Context(), store.CreateTodoParams{Todo: again, Audit: rec}); err != nil || created || got.ID != td.ID {
		t.Fatalf("dedup: %v %v %v", got.ID, created, err)
	}
	if n := auditCount(t, s); n != before+1 {
		t.Fatalf("audit entries %d → %d, want +1", before, n)
	}
}

// testPruneDeliveries: deliveries of every hook received before the cutoff
// go, in batches until none is left; those at or after it stay; a pruned
// key is new again (design: Delivery log retention).
func testPruneDeliveries(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("reviewer", ownerID, "reviews"))
	h1, h2 := newHook(a, domain.HookGitHub), newHook(a, domain.HookStandard)
	createHook(t, s, h1)
	createHook(t, s, h2)
	cutoff := at(24 * time.Hour)
	var old []string
	for i := range 7 { // 7 old deliveries over both hooks, keyed and refused
		d := domain.HookDelivery{ID: uuid.NewString(), HookID: h1.ID, Key: fmt.Sprintf("old-%d", i), Outcome: domain.DeliveryIgnored,
			ReceivedAt: cutoff.Add(-time.Duration(7-i) * time.Hour)}
		if i%2 == 1 {
			d.HookID = h2.ID
		}
		if i == 6 {
			d.Key, d.Outcome, d.Reason, d.ReceivedAt = "", domain.DeliveryRefused, "bad signature", cutoff.Add(-time.Microsecond)
		}
		record(t, s, d, nil)
		old = append(old, d.ID)
	}
	keep := map[string]bool{}
	for i, hid := range []string{h1.ID, h2.ID} {
		d := domain.HookDelivery{ID: uuid.NewString(), HookID: hid, Key: fmt.Sprintf("new-%d", i), Outcome: domain.DeliveryIgnored,
			ReceivedAt: cutoff.Add(time.Duration(i) * time.Hour)} // the first exactly at the cutoff
		record(t, s, d, nil)
		keep[d.ID] = true
	}
	n, err := s.PruneDeliveries(ctx, store.PruneDeliveriesParams{Before: cutoff, Batch: 3})
	if err != nil || n != 7 {
		t.Fatalf("PruneDeliveries = %d, %v; want 7 in batches of 3", n, err)
	}
	left := map[string]bool{}
	for _, hid := range []string{h1.ID, h2.ID} {
		ds, err := s.ListDeliveries(ctx, store.ListDeliveriesParams{HookID: hid, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			left[d.ID] = true
		}
	}
	if d := cmp.Diff(keep, left); d != "" {
		t.Fatalf("deliveries left (-want +got):\n%s\npruned ids: %v", d, old)
	}
	if n, err := s.PruneDeliveries(ctx, store.PruneDeliveriesParams{Before: cutoff}); err != nil || n != 0 {
		t.Fatalf("second PruneDeliveries = %d, %v; want 0 (idempotent)", n, err)
	}
	// A pruned key is new again; a kept one is still a duplicate.
	if res := record(t, s, domain.HookDelivery{ID: uuid.NewString(), HookID: h1.ID, Key: "old-0", Outcome: domain.DeliveryIgnored, ReceivedAt: at(25 * time.Hour)}, nil); res.Duplicate {
		t.Fatalf("pruned key old-0 redelivered: %+v, want new", res)
	}
	if res := record(t, s, domain.HookDelivery{ID: uuid.NewString(), HookID: h1.ID, Key: "new-0", Outcome: domain.DeliveryIgnored, ReceivedAt: at(25 * time.Hour)}, nil); !res.Duplicate {
		t.Fatalf("kept key new-0 redelivered: %+v, want duplicate", res)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.PruneDeliveries(done, store.PruneDeliveriesParams{Before: at(48 * time.Hour)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("PruneDeliveries on an ended ctx = %v, want context.Canceled", err)
	}
}
