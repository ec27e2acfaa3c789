package mcpserver_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/presence"
)

// Scenarios of (design: Owner's word) "the owner's word beats the agent's" on a
// fake clock, through the MCP self verbs of a real session.

func (e *env) operatorOut(handle string) {
	e.t.Helper()
	if _, err := e.svc.SetPresence(e.ctx, e.admin, handle, app.PresenceInput{Presence: "out"}); err != nil {
		e.t.Fatalf("SetPresence(out): %v", err)
	}
}

func (e *env) setCap(handle, capText string) {
	e.t.Helper()
	if _, err := e.svc.UpdateAgent(e.ctx, e.admin, handle, app.UpdateInput{SelfClockInCap: &capText}); err != nil {
		e.t.Fatalf("UpdateAgent(self_clock_in_cap %q): %v", capText, err)
	}
}

// wantRefused checks a forbidden clock_in with reason that changed nothing:
// same presence, no audit entry.
func wantRefused(t *testing.T, e *env, ac *agentClient, agentID string, args map[string]any, reason string) {
	t.Helper()
	before := presenceOf(ac)
	audits := e.auditCount(agentID)
	te := ac.fails("clock_in", args)
	if te.Code != domain.CodeForbidden || te.Reason != reason {
		t.Fatalf("clock_in %v: %+v, want forbidden with reason %s", args, te, reason)
	}
	after := presenceOf(ac)
	if after.Presence != before.Presence || after.Source != before.Source || !sameTime(after.Until, before.Until) {
		t.Fatalf("a refused clock_in changed presence: %+v → %+v", before, after)
	}
	if n := e.auditCount(agentID); n != audits {
		t.Fatalf("a refused clock_in wrote %d audit entries", n-audits)
	}
}

// An operator's out override is never cleared by the agent: without a
// shift, inside it and outside it; clock_out then clock_in does not get
// around it either; only the owner brings the agent back.
func TestClockInCannotClearTheOwnersOut(t *testing.T) {
	e := newEnv(t)
	v := e.vend("obedient", allScope, "q")
	ac := e.listening(v.Credential)
	e.operatorOut("obedient")
	wantPresence(t, presenceOf(ac), "out", "operator", nil)

	wantRefused(t, e, ac, v.Agent.ID, map[string]any{}, presence.ReasonOperatorOverride)
	wantRefused(t, e, ac, v.Agent.ID, map[string]any{"for": "8h"}, presence.ReasonOperatorOverride)
	// clock_out keeps the owner's override (it would otherwise be the
	// agent's own, which clock_in may clear).
	var got app.PresenceView
	ac.ok("clock_out", map[string]any{}, &got)
	wantPresence(t, got, "out", "operator", nil)
	wantRefused(t, e, ac, v.Agent.ID, map[string]any{}, presence.ReasonOperatorOverride)

	// Work pushed meanwhile stays held: no doorbell, no digest.
	e.push("obedient", "q", "held")
	e.pass()
	ac.roundTrip()
	ac.noNote()

	// With a shift, inside and outside it.
	e.setShift("obedient", workHours)
	e.at(monday0900.Add(time.Hour)) // Monday 10:00, in the shift
	e.operatorOut("obedient")
	wantRefused(t, e, ac, v.Agent.ID, map[string]any{}, presence.ReasonOperatorOverride)
	e.at(monday0900.Add(5 * time.Hour)) // 14:00: the 13:00 boundary ended it; the shift says out
	e.operatorOut("obedient")
	wantRefused(t, e, ac, v.Agent.ID, map[string]any{"for": "1h"}, presence.ReasonOperatorOverride)

	// The owner clears it: the agent may clock itself in again.
	if _, err := e.svc.ClearPresence(e.ctx, e.admin, "obedient"); err != nil {
		t.Fatal(err)
	}
	ac.ok("clock_in", map[string]any{"for": "1h"}, &got)
	wantPresence(t, got, "in", "agent", tp(monday0900.Add(6*time.Hour)))
}

// The cap binds per off-shift stretch: the agent's own clock_ins between
// two shift boundaries keep it in for at most 8h together; calling again
// cannot extend it; the next stretch starts afresh.
func TestSelfClockInCapBindsPerStretch(t *testing.T) {
	e, v, ac := onShift(t, "insomniac")
	e.at(monday0900.Add(5 * time.Hour)) // Monday 14:00, off shift until Tuesday 09:00
	var got app.PresenceView
	ac.ok("clock_in", map[string]any{"for": "8h"}, &got)
	wantPresence(t, got, "in", "agent", tp(monday0900.Add(13*time.Hour))) // 22:00
	// A prompt injection calls again and again: the end never moves.
	for _, at := range []time.Duration{6 * time.Hour, 9 * time.Hour, 12*time.Hour + 59*time.Minute} {
		e.at(monday0900.Add(at))
		ac.ok("clock_in", map[string]any{"for": "8h"}, &got)
		wantPresence(t, got, "in", "agent", tp(monday0900.Add(13*time.Hour)))
	}
	e.at(monday0900.Add(13 * time.Hour)) // 22:00: used up
	wantPresence(t, presenceOf(ac), "out", "shift", tp(tuesday0900))
	wantRefused(t, e, ac, v.Agent.ID, map[string]any{"for": "1h"}, presence.ReasonSelfClockInCap)
	// Clocking out and in again does not reset it.
	ac.ok("clock_out", map[string]any{}, nil)
	wantRefused(t, e, ac, v.Agent.ID, map[string]any{}, presence.ReasonSelfClockInCap)

	// Tuesday 14:00: a new stretch, a fresh cap.
	e.at(tuesday0900.Add(5 * time.Hour))
	ac.ok("clock_in", map[string]any{"for": "2h"}, &got)
	wantPresence(t, got, "in", "agent", tp(tuesday0900.Add(7*time.Hour)))
}

// The owner sets the cap per agent through PATCH /v1/agents/{ref}
// (self_clock_in_cap): a smaller cap shortens the grant, 0 forbids
// clocking in outside the shift, the shift itself still works.
func TestOwnerSetsTheSelfClockInCap(t *testing.T) {
	e, v, ac := onShift(t, "tight")
	e.setCap("tight", "90m")
	e.at(monday0900.Add(11 * time.Hour)) // Monday 20:00
	var got app.PresenceView
	ac.ok("clock_in", map[string]any{"for": "8h"}, &got)
	wantPresence(t, got, "in", "agent", tp(monday0900.Add(12*time.Hour+30*time.Minute)))
	e.at(monday0900.Add(12*time.Hour + 30*time.Minute))
	wantRefused(t, e, ac, v.Agent.ID, map[string]any{"for": "1m"}, presence.ReasonSelfClockInCap)

	e.setCap("tight", "0")
	e.at(tuesday0900.Add(5 * time.Hour)) // Tuesday 14:00, a new stretch
	wantRefused(t, e, ac, v.Agent.ID, map[string]any{}, presence.ReasonSelfClockInCap)
	e.at(tuesday0900.Add(24 * time.Hour)) // Wednesday 09:00: the shift brings it in
	wantPresence(t, presenceOf(ac), "in", "shift", tp(tuesday0900.Add(28*time.Hour)))

	for _, bad := range []string{"-1h", "169h", "soon", ""} {
		_, err := e.svc.UpdateAgent(e.ctx, e.admin, "tight", app.UpdateInput{SelfClockInCap: &bad})
		var de *domain.Error
		if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Pointer != "/self_clock_in_cap" {
			t.Fatalf("self_clock_in_cap %q: %v, want invalid_argument at /self_clock_in_cap", bad, err)
		}
	}
	a, err := e.svc.OwnedAgent(e.ctx, e.admin, "tight")
	if err != nil || a.SelfClockInCap.String() != "0" {
		t.Fatalf("cap = %s, %v; want 0", a.SelfClockInCap, err)
	}
}

// An operator's out written while the agent's clock_in runs is never
// undone by that clock_in: whatever the interleaving, the owner's out
// stands afterwards.
func TestOwnersOutRacingClockIn(t *testing.T) {
	e := newEnv(t)
	v := e.vend("racer", allScope, "q")
	e.setShift("racer", workHours)
	e.setCap("racer", "168h")
	ac := e.connect(v.Credential, clientConfig{})
	e.at(monday0900.Add(5 * time.Hour)) // off shift
	for i := range 20 {
		if _, err := e.svc.ClearPresence(e.ctx, e.admin, "racer"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, _ = ac.call("clock_in", map[string]any{"for": "1m"})
		}()
		go func() {
			defer wg.Done()
			e.operatorOut("racer")
		}()
		wg.Wait()
		if p := presenceOf(ac); p.Presence != "out" || p.Source != "operator" {
			t.Fatalf("round %d: after the race (%s, %s), want the owner's out", i, p.Presence, p.Source)
		}
		e.clock.Advance(time.Second) // a fresh decision instant each round
	}
}
