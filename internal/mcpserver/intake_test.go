package mcpserver_test

import (
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
)

// TestHookTodoHeldWhileOut: a todo a hook delivery creates has the
// guarantees of a pushed one (design: Held doorbells, Hooks): while the agent is out
// no doorbell rings; at the shift start the digest counts it.
func TestHookTodoHeldWhileOut(t *testing.T) {
	e, ac := outAtEight(t)
	hk, err := e.svc.CreateHook(e.ctx, e.admin, app.HookInput{Kind: domain.HookGitHub, Agent: "morning", Queue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	h, body := intaketest.GitHub(t, "issues.opened")
	intaketest.SignGitHub(h, hk.Secret, body)
	res, err := e.svc.Deliver(e.ctx, app.DeliveryInput{HookID: hk.Hook.ID, Header: h, Body: body})
	if err != nil || res.Outcome != domain.DeliveryCreated {
		t.Fatalf("Deliver = %+v, %v", res, err)
	}
	ac.roundTrip()
	ac.noNote()
	if td := e.todo(res.TodoID); td.RingAttempts != 0 || td.LastRingedAt != nil || !td.PushEligible {
		t.Fatalf("held todo rung: %+v", td)
	}
	e.at(tuesday0900)
	if n := e.pass(); n != 1 {
		t.Fatalf("evaluator claimed %d transitions at the shift start, want 1", n)
	}
	wantDigest(t, ac, "1", "q", app.ReasonShiftStart)
}
