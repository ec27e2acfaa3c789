package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
)

// The use cases of claim_next with n (design: Claiming in batches) and of
// complete and fail with next (design: Complete and claim the next): the
// arguments are checked before anything is written, with next's pointers
// under /next; a refused complete claims nothing.
func TestClaimBatchUseCases(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	s := app.New(app.Options{Store: openStore(t), Clock: clock, InstanceID: "i1"})
	defer s.Close()
	admin := bootstrapAdmin(t, s)
	a := vendAgent(t, s, admin, app.VendInput{Handle: "worker", Queues: []string{"q", "r"}, Verbs: domain.ScopeVerbs}).Agent
	var ids []string
	for i := range 4 {
		td, _, err := s.PushTodo(ctx, admin, a.ID, app.PushInput{Queue: "q", Title: "job " + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, td.ID)
		clock.Advance(time.Millisecond)
	}
	for _, c := range []struct {
		in      app.NextClaim
		pointer string
	}{
		{app.NextClaim{N: -1}, "/n"},
		{app.NextClaim{N: domain.MaxClaimBatch + 1}, "/n"},
		{app.NextClaim{Queue: "elsewhere"}, "/queue"},
		{app.NextClaim{LeaseSeconds: -5}, "/lease_seconds"},
	} {
		if _, err := s.ClaimNextN(ctx, a, c.in); domain.CodeOf(err) != domain.CodeInvalidArgument || pointerOf(err) != c.pointer {
			t.Errorf("ClaimNextN(%+v) = %v, want invalid_argument at %s", c.in, err, c.pointer)
		}
	}
	got, err := s.ClaimNextN(ctx, a, app.NextClaim{N: 2, LeaseSeconds: 60})
	if err != nil || len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[1] {
		t.Fatalf("ClaimNextN(2) = %v, %v; want the two oldest", got, err)
	}
	if _, _, err := s.CompleteAndClaim(ctx, a, got[0].ID, nil, app.NextClaim{N: 99}); domain.CodeOf(err) != domain.CodeInvalidArgument || pointerOf(err) != "/next/n" {
		t.Errorf("CompleteAndClaim(next.n 99) = %v, want invalid_argument at /next/n", err)
	}
	if _, _, err := s.FailAndClaim(ctx, a, got[0].ID, "x", app.NextClaim{Queue: "elsewhere"}); domain.CodeOf(err) != domain.CodeInvalidArgument || pointerOf(err) != "/next/queue" {
		t.Errorf("FailAndClaim(next.queue elsewhere) = %v, want invalid_argument at /next/queue", err)
	}
	done, next, err := s.CompleteAndClaim(ctx, a, got[0].ID, []byte(`{"ok":1}`), app.NextClaim{Queue: "q"})
	if err != nil || done.State != domain.TodoDone || len(next) != 1 || next[0].ID != ids[2] {
		t.Fatalf("CompleteAndClaim = %+v, %v, %v; want done and %s claimed", done, next, err, ids[2])
	}
	// Done already: conflict, and the last todo is not claimed.
	if _, next, err := s.CompleteAndClaim(ctx, a, got[0].ID, nil, app.NextClaim{}); domain.CodeOf(err) != domain.CodeConflict || next != nil {
		t.Errorf("CompleteAndClaim of a done todo = %v, %v; want conflict and nothing claimed", next, err)
	}
	if _, _, err := s.CompleteAndClaim(ctx, a, "no-such-todo", nil, app.NextClaim{}); domain.CodeOf(err) != domain.CodeNotFound || pointerOf(err) != "/todo_id" {
		t.Errorf("CompleteAndClaim of an unknown todo = %v, want not_found at /todo_id", err)
	}
	last, err := s.GetTodo(ctx, admin, ids[3])
	if err != nil || last.State != domain.TodoPending {
		t.Fatalf("the last todo after refused completes: %+v, %v; want pending", last, err)
	}
	failed, next, err := s.FailAndClaim(ctx, a, got[1].ID, "flaky", app.NextClaim{N: 3})
	if err != nil || failed.State != domain.TodoFailed || len(next) != 1 || next[0].ID != ids[3] {
		t.Fatalf("FailAndClaim = %+v, %v, %v; want failed and %s claimed", failed, next, err, ids[3])
	}
	if none, err := s.ClaimNextN(ctx, a, app.NextClaim{N: 3}); err != nil || none == nil || len(none) != 0 {
		t.Errorf("ClaimNextN with nothing claimable = %v, %v; want an empty slice", none, err)
	}
}

func pointerOf(err error) string {
	var de *domain.Error
	if errors.As(err, &de) {
		return de.Pointer
	}
	return ""
}
