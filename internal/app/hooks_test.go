package app_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	_ "modernc.org/sqlite" // database/sql driver "sqlite" to read the rows as stored

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/sqlite"
)

// revHook vends agent "rev" (queue q) on svc and creates a GitHub hook
// that pushes to it.
func revHook(t *testing.T, svc *app.Service, admin domain.Person) app.HookSecretResult {
	t.Helper()
	if _, err := svc.Vend(t.Context(), admin, app.VendInput{Handle: "rev", Queues: []string{"q"}, Verbs: []string{"claim_next"}}); err != nil {
		t.Fatal(err)
	}
	return githubHook(t, svc, admin)
}

// githubHook creates another GitHub hook pushing to "rev" on queue q.
func githubHook(t *testing.T, svc *app.Service, admin domain.Person) app.HookSecretResult {
	t.Helper()
	hk, err := svc.CreateHook(t.Context(), admin, app.HookInput{Kind: domain.HookGitHub, Agent: "rev", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	return hk
}

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
	hk := revHook(t, svc, admin)
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

// pruneStore reports each PruneDeliveries pass (its cutoff and count)
// after the store ran it.
type pruneStore struct {
	store.Store
	passes chan prunePass
}

type prunePass struct {
	before time.Time
	n      int64
}

func (p *pruneStore) PruneDeliveries(ctx context.Context, q store.PruneDeliveriesParams) (int64, error) {
	n, err := p.Store.PruneDeliveries(ctx, q)
	p.passes <- prunePass{q.Before, n}
	return n, err
}

// TestDeliveryLogPruning (design: Delivery log retention): the loops prune
// once at the start and every DeliveryPruneInterval, with the cutoff now
// minus the retention on the injected clock; a redelivery within the
// retention is a duplicate, after the delivery is pruned it is recorded
// anew (its todo, still live, keeps its key: no second todo).
func TestDeliveryLogPruning(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	ps := &pruneStore{Store: st, passes: make(chan prunePass, 16)}
	svc := app.New(app.Options{Store: ps, Clock: clock})
	defer svc.Close()
	admin := bootstrapAdmin(t, svc)
	hk := revHook(t, svc, admin)
	h, body := intaketest.GitHub(t, "issues.opened")
	intaketest.SignGitHub(h, hk.Secret, body)
	deliver := func() app.DeliveryResult {
		t.Helper()
		res, err := svc.Deliver(ctx, app.DeliveryInput{HookID: hk.Hook.ID, Header: h, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := deliver()
	if first.Outcome != domain.DeliveryCreated || first.TodoID == "" {
		t.Fatalf("first delivery = %+v, want created with a todo", first)
	}
	log := func() []domain.HookDelivery {
		t.Helper()
		ds, err := svc.HookDeliveries(ctx, admin, hk.Hook.ID, 100)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	wantPass := func(before time.Time, n int64) {
		t.Helper()
		select {
		case p := <-ps.passes:
			if !p.before.Equal(before) || p.n != n {
				t.Fatalf("prune pass = cutoff %s, %d deleted; want %s, %d", p.before, p.n, before, n)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no prune pass within 30 s")
		}
	}

	// 5 minutes before the retention ends: the start's pass keeps it.
	clock.Advance(app.DefaultDeliveryRetention - 5*time.Minute)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { svc.Run(runCtx) })
	defer wg.Wait()
	defer stop()
	wantPass(t0.Add(-5*time.Minute), 0)
	if res := deliver(); res.Outcome != domain.DeliveryDuplicate || res.TodoID != first.TodoID {
		t.Fatalf("redelivery within the retention = %+v, want duplicate of todo %s", res, first.TodoID)
	}
	if ds := log(); len(ds) != 1 {
		t.Fatalf("delivery log = %+v, want the first delivery only", ds)
	}

	// The next tick, 10 minutes on, prunes it.
	clock.Advance(app.DeliveryPruneInterval)
	wantPass(t0.Add(5*time.Minute), 1)
	if ds := log(); len(ds) != 0 {
		t.Fatalf("delivery log after pruning = %+v, want empty", ds)
	}
	again := deliver()
	if again.Outcome != domain.DeliveryCreated || again.TodoID != first.TodoID {
		t.Fatalf("redelivery after pruning = %+v, want recorded anew with the live todo %s", again, first.TodoID)
	}
	if ds := log(); len(ds) != 1 || !ds[0].ReceivedAt.Equal(clock.Now()) {
		t.Fatalf("delivery log = %+v, want the new record at %s", ds, clock.Now())
	}
}

// TestHookSecretsSealedAtRest (design: Hook secrets sealed at rest), on
// one SQLite file opened by successive "starts" (a Service over the store
// with the keys of that start):
//   - without a key a hook's secret is stored in plaintext;
//   - a start with hooks.secret_key seals it: the row's secret column is
//     not the plaintext, and a delivery signed with the secret is taken;
//     a hook created or rotated then is stored sealed too;
//   - a start with the wrong key fails, naming ErrUnknownSecretKey;
//   - a rotation in the README's steps: the new key as previous reseals
//     nothing; the keys swapped reseal every secret with the new key, which
//     an instance still at the first step opens; then the new key alone
//     opens them.
func TestHookSecretsSealedAtRest(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "r.db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	column := func(id string) string {
		t.Helper()
		var s string
		if err := raw.QueryRowContext(ctx, `SELECT secret FROM hooks WHERE id = ?`, id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	keyOld, keyNew := strings.Repeat("o", 32), "n-0123456789abcdefghijklmnopqrstuvwxyz"
	start := func(key, previous string) (*app.Service, int, error) {
		t.Helper()
		sealer, err := intake.NewSealer(key, previous)
		if err != nil {
			t.Fatal(err)
		}
		svc := app.New(app.Options{Store: st, HookSecrets: sealer})
		t.Cleanup(svc.Close)
		n, err := svc.SealHookSecrets(ctx)
		return svc, n, err
	}

	svc, n, err := start("", "")
	if err != nil || n != 0 {
		t.Fatalf("start without a key: %d, %v", n, err)
	}
	admin := bootstrapAdmin(t, svc)
	plainHook := revHook(t, svc, admin)
	if got := column(plainHook.Hook.ID); got != plainHook.Secret {
		t.Fatalf("without a key the stored secret is %q, want the plaintext", got)
	}

	svc, n, err = start(keyOld, "")
	if err != nil || n != 1 {
		t.Fatalf("start with a key: resealed %d, %v; want 1", n, err)
	}
	sealedOld := column(plainHook.Hook.ID)
	if id, sealed := intake.IsSealed(sealedOld); !sealed || strings.Contains(sealedOld, plainHook.Secret) {
		t.Fatalf("after the start with a key the column is %q (key id %s): still plaintext", sealedOld, id)
	}
	deliver := func(svc *app.Service, hookID, secret, name string) app.DeliveryResult {
		t.Helper()
		h, body := intaketest.GitHub(t, name)
		intaketest.SignGitHub(h, secret, body)
		res, err := svc.Deliver(ctx, app.DeliveryInput{HookID: hookID, Header: h, Body: body})
		if err != nil {
			t.Fatalf("signed delivery to %s: %v", hookID, err)
		}
		return res
	}
	if res := deliver(svc, plainHook.Hook.ID, plainHook.Secret, "issues.opened"); res.Outcome != domain.DeliveryCreated {
		t.Fatalf("signed delivery after sealing: %+v", res)
	}
	fresh := githubHook(t, svc, admin)
	rotated, err := svc.RotateHookSecret(ctx, admin, fresh.Hook.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := column(fresh.Hook.ID); !strings.HasPrefix(c, "sealed:v1:") || strings.Contains(c, rotated.Secret) || !strings.HasPrefix(rotated.Secret, "whsec_") {
		t.Fatalf("a rotated secret is stored as %q (shown %q)", c, rotated.Secret)
	}
	if res := deliver(svc, fresh.Hook.ID, rotated.Secret, "pull_request.opened"); res.Outcome != domain.DeliveryCreated {
		t.Fatalf("delivery signed with the rotated secret: %+v", res)
	}
	// The same start again reseals nothing.
	if _, n, err = start(keyOld, ""); err != nil || n != 0 {
		t.Fatalf("second start with the same key: resealed %d, %v; want 0", n, err)
	}

	if _, _, err := start(keyNew, ""); !errors.Is(err, intake.ErrUnknownSecretKey) || !strings.Contains(err.Error(), "2 of 2 hook secrets") {
		t.Fatalf("start with the wrong key: %v; want ErrUnknownSecretKey for both hooks", err)
	}
	if _, _, err := start("", ""); !errors.Is(err, intake.ErrNoSecretKey) {
		t.Fatalf("start without a key over sealed secrets: %v; want ErrNoSecretKey", err)
	}
	if c := column(plainHook.Hook.ID); c != sealedOld {
		t.Fatal("a failed start changed a stored secret")
	}

	// Rotation step 1: the new key known as previous reseals nothing.
	if _, n, err = start(keyOld, keyNew); err != nil || n != 0 {
		t.Fatalf("rotation step 1: resealed %d, %v; want 0", n, err)
	}
	if _, n, err = start(keyNew, keyOld); err != nil || n != 2 {
		t.Fatalf("rotation step 2: resealed %d, %v; want 2", n, err)
	}
	newSealer, _ := intake.NewSealer(keyNew, "")
	for _, id := range []string{plainHook.Hook.ID, fresh.Hook.ID} {
		if kid, _ := intake.IsSealed(column(id)); kid != newSealer.KeyID() {
			t.Fatalf("hook %s sealed with key id %s after the rotation, want %s", id, kid, newSealer.KeyID())
		}
	}
	// An instance started at step 1 (before the reseal) opens the secrets
	// resealed at step 2.
	step1Sealer, err := intake.NewSealer(keyOld, keyNew)
	if err != nil {
		t.Fatal(err)
	}
	step1 := app.New(app.Options{Store: st, HookSecrets: step1Sealer})
	t.Cleanup(step1.Close)
	if res := deliver(step1, fresh.Hook.ID, rotated.Secret, "issues.opened"); res.Outcome != domain.DeliveryCreated {
		t.Fatalf("delivery on an instance at step 1 after the reseal: %+v", res)
	}
	svc, n, err = start(keyNew, "")
	if err != nil || n != 0 {
		t.Fatalf("start with the new key alone: %d, %v", n, err)
	}
	if res := deliver(svc, plainHook.Hook.ID, plainHook.Secret, "issues.labeled"); res.Outcome == "" {
		t.Fatalf("delivery after the rotation: %+v", res)
	}
}
