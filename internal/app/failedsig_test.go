package app_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
)

// TestFailedSignatureLimit (design: Failed-signature limit), on SQLite with
// the injected clock: a bad signature is refused unauthenticated and
// recorded on the hook's delivery log as refused, "bad signature", with
// nothing of the forger's delivery (no delivery id, no event); after
// HookFailedChecks failures in the minute the next is rate_limited with
// the rest of the minute as Retry-After, while a correctly signed delivery
// is still taken; when the minute ends a bad signature is 401 again.
func TestFailedSignatureLimit(t *testing.T) {
	ctx := t.Context()
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	svc := app.New(app.Options{Store: openStore(t), Clock: clock})
	defer svc.Close()
	admin := bootstrapAdmin(t, svc)
	if _, err := svc.Vend(ctx, admin, app.VendInput{Handle: "rev", Queues: []string{"q"}, Verbs: []string{"claim_next"}}); err != nil {
		t.Fatal(err)
	}
	hk, err := svc.CreateHook(ctx, admin, app.HookInput{Kind: domain.HookGitHub, Agent: "rev", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	forged := func(i int) error {
		h, body := intaketest.GitHub(t, "pull_request.opened")
		h.Set("X-GitHub-Delivery", fmt.Sprintf("forged-%d", i))
		intaketest.SignGitHub(h, "whsec_not-the-hooks-secret", body)
		_, err := svc.Deliver(ctx, app.DeliveryInput{HookID: hk.Hook.ID, Header: h, Body: body})
		return err
	}
	code := func(err error) domain.Code {
		var de *domain.Error
		if !errors.As(err, &de) {
			t.Fatalf("not a domain error: %v", err)
		}
		return de.Code
	}
	if err := forged(0); code(err) != domain.CodeUnauthenticated {
		t.Fatalf("bad signature: %v, want unauthenticated", err)
	}
	ds, err := svc.HookDeliveries(ctx, admin, hk.Hook.ID, 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("delivery log: %+v, %v", ds, err)
	}
	if d := ds[0]; d.Outcome != domain.DeliveryRefused || d.Reason != "bad signature" || d.Key != "" || d.Event != "" || d.Action != "" || d.TodoID != "" {
		t.Fatalf("the refusal on the delivery log: %+v; want refused, bad signature, nothing of the delivery", d)
	}
	for i := 1; i < app.HookFailedChecks; i++ {
		clock.Advance(100 * time.Millisecond)
		if err := forged(i); code(err) != domain.CodeUnauthenticated {
			t.Fatalf("bad signature %d: %v, want unauthenticated", i+1, err)
		}
	}
	err = forged(app.HookFailedChecks)
	var rl *app.RateLimitedError
	if !errors.As(err, &rl) || code(err) != domain.CodeRateLimited {
		t.Fatalf("bad signature %d: %v, want rate_limited", app.HookFailedChecks+1, err)
	}
	if want := app.HookFailedWindow - time.Duration(app.HookFailedChecks-1)*100*time.Millisecond; rl.RetryAfter != want {
		t.Fatalf("Retry-After %s, want %s (the rest of the minute)", rl.RetryAfter, want)
	}
	h, body := intaketest.GitHub(t, "pull_request.opened")
	intaketest.SignGitHub(h, hk.Secret, body)
	if res, err := svc.Deliver(ctx, app.DeliveryInput{HookID: hk.Hook.ID, Header: h, Body: body}); err != nil || res.Outcome != domain.DeliveryCreated {
		t.Fatalf("a signed delivery past the limit: %+v, %v; want created", res, err)
	}
	ds, _ = svc.HookDeliveries(ctx, admin, hk.Hook.ID, 100)
	reasons := map[string]int{}
	for _, d := range ds {
		reasons[d.Outcome+"/"+d.Reason]++
		if d.Outcome == domain.DeliveryRefused && (d.Key != "" || strings.Contains(d.Reason, "forged")) {
			t.Fatalf("a refusal carries the forger's delivery: %+v", d)
		}
	}
	if reasons["refused/bad signature"] == 0 || reasons["created/"] != 1 {
		t.Fatalf("delivery log reasons %v", reasons)
	}
	clock.Advance(app.HookFailedWindow)
	if err := forged(1000); code(err) != domain.CodeUnauthenticated {
		t.Fatalf("bad signature in the next minute: %v, want unauthenticated", err)
	}
}
