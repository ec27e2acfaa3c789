package app_test

import (
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // database/sql driver "sqlite" to read the rows as stored

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
	"github.com/rollcall/rollcall/internal/store/sqlite"
)

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
	if _, err := svc.Vend(ctx, admin, app.VendInput{Handle: "rev", Queues: []string{"q"}, Verbs: []string{"claim_next"}}); err != nil {
		t.Fatal(err)
	}
	plainHook, err := svc.CreateHook(ctx, admin, app.HookInput{Kind: domain.HookGitHub, Agent: "rev", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
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
	fresh, err := svc.CreateHook(ctx, admin, app.HookInput{Kind: domain.HookGitHub, Agent: "rev", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
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
