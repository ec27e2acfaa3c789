package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
	"github.com/rollcall/rollcall/internal/testkit"
)

// TestStartSealsHookSecrets (design: Hook secrets sealed at rest): three
// starts of a server on one SQLite file. Without hooks.secret_key the
// start warns that secrets are plaintext; with ROLLCALL_HOOKS_SECRET_KEY
// it seals the stored secret (the row no longer holds it) and a signed
// delivery is taken; with a wrong key the start goes on, logs the hook
// whose secret does not open, and a delivery to it fails (nothing is
// created).
func TestStartSealsHookSecrets(t *testing.T) {
	file := "ROLLCALL_STORE=sqlite:" + filepath.Join(t.TempDir(), "sealed.db")
	open := func(env ...string) (*Server, *testkit.SyncBuffer) {
		t.Helper()
		logs := &testkit.SyncBuffer{}
		s, _ := openSQLite(t, slog.New(slog.NewTextHandler(logs, nil)), append([]string{file}, env...)...)
		return s, logs
	}
	ctx := context.Background()
	s, logs := open()
	if !strings.Contains(logs.String(), "hooks.secret_key is not set: hook secrets are stored in plaintext") {
		t.Fatalf("no plaintext warning at start:\n%s", logs)
	}
	admin, err := s.Service.AuthenticatePerson(ctx, testAdmin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Vend(ctx, admin, app.VendInput{Handle: "rev", Queues: []string{"q"}, Verbs: domain.ScopeVerbs}); err != nil {
		t.Fatal(err)
	}
	hk, err := s.Service.CreateHook(ctx, admin, app.HookInput{Kind: domain.HookGitHub, Agent: "rev", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	s.closeAll()

	s, logs = open("ROLLCALL_HOOKS_SECRET_KEY=start-seals-test-key-0123456789abcdef")
	stored, err := s.Store.GetHook(ctx, hk.Hook.ID)
	if _, sealed := intake.IsSealed(stored.Secret); err != nil || !sealed || strings.Contains(stored.Secret, hk.Secret) {
		t.Fatalf("after a start with a key the stored secret is %q, %v", stored.Secret, err)
	}
	if !strings.Contains(logs.String(), "resealed=1") {
		t.Fatalf("the start does not say it sealed one secret:\n%s", logs)
	}
	h, body := intaketest.GitHub(t, "issues.opened")
	intaketest.SignGitHub(h, hk.Secret, body)
	if res, err := s.Service.Deliver(ctx, app.DeliveryInput{HookID: hk.Hook.ID, Header: h, Body: body}); err != nil || res.Outcome != domain.DeliveryCreated {
		t.Fatalf("signed delivery: %+v, %v", res, err)
	}
	s.closeAll()

	s, logs = open("ROLLCALL_HOOKS_SECRET_KEY=a-wrong-key-0123456789abcdefghijklmn")
	defer s.closeAll()
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "hook "+hk.Hook.ID) || !strings.Contains(l, "1 of 1 hook secrets do not open") {
		t.Fatalf("a start with the wrong key does not name the hook:\n%s", l)
	}
	h, body = intaketest.GitHub(t, "pull_request.opened")
	intaketest.SignGitHub(h, hk.Secret, body)
	if res, err := s.Service.Deliver(ctx, app.DeliveryInput{HookID: hk.Hook.ID, Header: h, Body: body}); err == nil {
		t.Fatalf("a delivery to a hook whose secret does not open: %+v, want an error", res)
	}
}
