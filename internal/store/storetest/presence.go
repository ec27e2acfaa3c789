package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// presenceTests are the contract of store.PresenceStore (design: Presence columns, Transition claim, Sweep);
// with Instance.Twin set the races run across two instances
// on one database.
//
// The sweep's backoff is checked against domain.NextRingAt, the one Go
// source of the delays (5 min after creation or the last ring/digest for
// ring counts 0 and 1, then 20 min, 1 h, 6 h; 5 rings at most).
var presenceTests = []contractTest{
	{"Presence/Defaults", testPresenceDefaults},
	{"Presence/UpdatePresence", testUpdatePresence},
	{"Presence/UpdatePresenceAtomic", testUpdatePresenceAtomic},
	{"Presence/SelfClockInCapAndLedger", testSelfClockInCap},
	{"Presence/UpdatePresenceGuard", testUpdatePresenceGuard},
	{"Presence/EveryReadScansPresence", testPresenceEveryRead},
	{"Presence/ClaimTransition", testClaimTransition},
	{"Presence/ClaimTransitionRace", testClaimTransitionRace},
	{"Presence/ListAgentsChangedSince", testListChangedSince},
	{"Presence/PendingDoorbellTodos", testPendingDoorbellTodos},
	{"Presence/MarkDigestRung", testMarkDigestRung},
	{"Presence/CreateAndMarkRungSetNextRing", testNextRingOnCreateAndMarkRung},
	{"Presence/SweepDueRuleAndBudget", testSweepDueRule},
	{"Presence/SweepAfterCreateRing", testSweepAfterCreateRing},
	{"Presence/SweepPerAgentRoundRobin", testSweepRoundRobin},
	{"Presence/SweepLimit", testSweepLimit},
	{"Presence/SweepFilters", testSweepFilters},
	{"Presence/SweepReapedKeepsRing", testSweepReaped},
	{"Presence/SweepRaceRingsOnce", testSweepRace},
	{"Presence/RingMissed", testRingMissed},
	{"Presence/RingMissedRaceRingsOnce", testRingMissedRace},
	{"Presence/FailoverRings", testFailoverRings},
}

// ---- fixtures -----------------------------------------------------------------

func agentByID(t *testing.T, s store.Store, id string) domain.Agent {
	t.Helper()
	a, err := s.GetAgent(t.Context(), store.AgentRef{ID: id})
	must(t, "GetAgent", err)
	return a
}

// twinOrSelf returns a second Store on the same database when the adapter
// can open one (Instance.Twin), else in's own.
func twinOrSelf(t *testing.T, in Instance) store.Store {
	if in.Twin != nil {
		return in.Twin(t)
	}
	return in.Store
}

// twoStores returns in's Store and twinOrSelf: two Stores on the same
// database for a race spread over instances (one Store twice when the
// adapter cannot open a second).
func twoStores(t *testing.T, in Instance) []store.Store {
	return []store.Store{in.Store, twinOrSelf(t, in)}
}

// delay is the sweep wait after n rings (domain.NextRingAt's).
func delay(t *testing.T, n int) time.Duration {
	t.Helper()
	next, ok := domain.NextRingAt(n, Base)
	if !ok {
		t.Fatalf("no delay after %d rings", n)
	}
	return next.Sub(Base)
}

func sweep(t *testing.T, s store.Store, p store.SweepParams) []domain.Todo {
	t.Helper()
	got, err := s.SweepRing(t.Context(), p)
	must(t, "SweepRing", err)
	return got
}

// sweepIDs sweeps every receiver with the pass limits of (design: Sweep)
// (3 per agent) and no overall limit, and returns the rung ids sorted.
func sweepIDs(t *testing.T, s store.Store, now time.Time, receivers ...string) []string {
	t.Helper()
	return todoIDs(sweep(t, s, store.SweepParams{Receivers: receivers, Now: now, PerAgent: 3}))
}

func todoIDs(ts []domain.Todo) []string {
	ids := []string{}
	for _, td := range ts {
		ids = append(ids, td.ID)
	}
	slices.Sort(ids)
	return ids
}

// rungIDs is todoIDs of what racing ring calls rang (rung[i] by call i),
// reporting each call's error as what's.
func rungIDs(t *testing.T, what string, errs []error, rung [][]domain.Todo) []string {
	t.Helper()
	var all []domain.Todo
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s %d: %v", what, i, err)
		}
		all = append(all, rung[i]...)
	}
	return todoIDs(all)
}

func sorted(ids ...string) []string {
	out := append([]string{}, ids...)
	slices.Sort(out)
	return out
}

func markRung(t *testing.T, s store.Store, id string, when time.Time) {
	t.Helper()
	ok, err := markOne(t.Context(), s, store.MarkRungParams{TodoID: id, At: when})
	must(t, "MarkRung", err)
	if !ok {
		t.Fatalf("MarkRung(%s) changed nothing", id)
	}
}

// ringState checks a todo's ring columns.
func ringState(t *testing.T, s store.Store, id string, attempts int, last *time.Time, next *time.Time) {
	t.Helper()
	got := getTodo(t, s, id)
	if got.RingAttempts != attempts {
		t.Errorf("todo %s: ring_attempts = %d, want %d", id, got.RingAttempts, attempts)
	}
	if last == nil {
		isNil(t, "last_ringed_at of "+id, got.LastRingedAt)
	} else {
		sameTime(t, "last_ringed_at of "+id, got.LastRingedAt, *last)
	}
	if next == nil {
		isNil(t, "next_ring_at of "+id, got.NextRingAt)
	} else {
		sameTime(t, "next_ring_at of "+id, got.NextRingAt, *next)
	}
}

func presenceAudits(t *testing.T, s store.Store, agentID string) []domain.AuditEntry {
	t.Helper()
	es, err := s.ListAudit(t.Context(), store.ListAuditParams{AgentID: agentID})
	must(t, "ListAudit", err)
	var out []domain.AuditEntry
	for _, e := range es {
		if e.Action == "agent.presence" || e.Action == "agent.shift" {
			out = append(out, e)
		}
	}
	return out
}

func presenceRecord(agentID, action string, data any) domain.AuditRecord {
	return domain.AuditRecord{Actor: "operator:" + ownerID, Action: action, AgentID: agentID, Data: data}
}

// ---- agent columns -------------------------------------------------------------

func testPresenceDefaults(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("fresh", ownerID, "q"))
	got := agentByID(t, s, a.ID)
	diff(t, "presence of a new agent", domain.PresenceColumns{Seen: "in"}, got.Presence)
	diff(t, "liveness of a new agent", domain.LivenessColumns{State: "unknown"}, got.Liveness)
}

func testUpdatePresence(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ps := s
	a := vend(t, s, newAgent("shifty", ownerID, "q"))
	const shift = "TZ=America/Los_Angeles Mon-Fri 09:00-13:00"

	// The shift alone.
	now1 := at(time.Minute + 1500*time.Nanosecond)
	got, err := ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now1, SetShift: true, Shift: shift,
		Audit: presenceRecord(a.ID, "agent.shift", map[string]any{"shift": shift})})
	must(t, "UpdatePresence(shift)", err)
	want := wantAgent(a.Agent)
	want.UpdatedAt = micro(now1)
	want.Presence.Shift = shift
	diff(t, "agent after setting the shift", want, got)
	diff(t, "stored agent after setting the shift", want, agentByID(t, s, a.ID))

	// The override alone: the shift stays.
	now2 := at(2 * time.Minute)
	until, setAt := at(4*time.Hour+time.Microsecond), at(2*time.Minute-time.Second)
	got, err = ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now2, SetOverride: true,
		Override: "out", OverrideUntil: &until, OverrideSetAt: &setAt, OverrideBy: "agent",
		Audit: presenceRecord(a.ID, "agent.presence", map[string]any{"override": "out"})})
	must(t, "UpdatePresence(override)", err)
	want.UpdatedAt = micro(now2)
	want.Presence.Override, want.Presence.OverrideUntil, want.Presence.OverrideSetAt, want.Presence.OverrideBy =
		"out", ptr(micro(until)), ptr(micro(setAt)), "agent"
	diff(t, "agent after clocking out", want, got)

	// Both groups at once; an override without set-at is set at Now and one
	// without until has no end.
	now3 := at(3 * time.Minute)
	got, err = ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now3, SetShift: true, Shift: "Sat,Sun 10:00-12:00",
		SetOverride: true, Override: "in", OverrideBy: "operator:" + ownerID,
		Audit: presenceRecord(a.ID, "agent.presence", nil)})
	must(t, "UpdatePresence(both)", err)
	want.UpdatedAt = micro(now3)
	want.Presence.Shift = "Sat,Sun 10:00-12:00"
	want.Presence.Override, want.Presence.OverrideUntil, want.Presence.OverrideSetAt, want.Presence.OverrideBy =
		"in", nil, ptr(micro(now3)), "operator:"+ownerID
	diff(t, "agent after setting both", want, got)

	// Clearing the override clears its four columns, and nothing else.
	now4 := at(4 * time.Minute)
	got, err = ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now4, SetOverride: true,
		Override: "", OverrideUntil: &until, OverrideSetAt: &setAt, OverrideBy: "agent",
		Audit: presenceRecord(a.ID, "agent.presence", map[string]any{"override": nil})})
	must(t, "UpdatePresence(clear override)", err)
	want.UpdatedAt = micro(now4)
	want.Presence.Override, want.Presence.OverrideUntil, want.Presence.OverrideSetAt, want.Presence.OverrideBy = "", nil, nil, ""
	diff(t, "agent after clearing the override", want, got)

	// Clearing the shift.
	now5 := at(5 * time.Minute)
	got, err = ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now5, SetShift: true, Shift: "",
		Audit: presenceRecord(a.ID, "agent.shift", map[string]any{"shift": nil})})
	must(t, "UpdatePresence(clear shift)", err)
	want.UpdatedAt = micro(now5)
	want.Presence.Shift = ""
	diff(t, "agent after clearing the shift", want, got)
	diff(t, "stored agent at the end", want, agentByID(t, s, a.ID))
	if got.Presence.Seen != "in" || got.Presence.ChangedAt != nil {
		t.Errorf("UpdatePresence touched presence_seen: %+v (only ClaimTransition writes it)", got.Presence)
	}

	// One audit entry per write, in order, at Now, and the chain holds.
	es := presenceAudits(t, s, a.ID)
	var gotActs []string
	for _, e := range es {
		gotActs = append(gotActs, e.Action+"@"+e.At.Format(time.RFC3339Nano))
	}
	f := func(act string, at time.Time) string { return act + "@" + micro(at).Format(time.RFC3339Nano) }
	diff(t, "presence audit entries", []string{f("agent.shift", now1), f("agent.presence", now2), f("agent.presence", now3),
		f("agent.presence", now4), f("agent.shift", now5)}, gotActs)
	sameJSON(t, "first audit data", es[0].Data, []byte(`{"shift":"`+shift+`"}`))
	res, err := s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	if !res.OK {
		t.Errorf("VerifyAudit = %+v", res)
	}

	// Revoked → conflict, unknown → not found; neither writes anything.
	rv := vend(t, s, newAgent("gone", ownerID, "q"))
	_, err = s.RevokeAgent(ctx, revokeParams(rv.ID, at(time.Hour)))
	must(t, "RevokeAgent", err)
	before := auditCount(t, s)
	_, err = ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: rv.ID, Now: at(2 * time.Hour), SetShift: true, Shift: shift,
		Audit: presenceRecord(rv.ID, "agent.shift", nil)})
	wantErr(t, "UpdatePresence(revoked)", err, domain.ErrConflict)
	_, err = ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: uuid.NewString(), Now: at(2 * time.Hour), SetShift: true, Shift: shift,
		Audit: presenceRecord("", "agent.shift", nil)})
	wantErr(t, "UpdatePresence(unknown)", err, domain.ErrNotFound)
	if n := auditCount(t, s); n != before {
		t.Errorf("audit entries after refused writes = %d, want %d", n, before)
	}
	if g := agentByID(t, s, rv.ID); g.Presence.Shift != "" || !g.UpdatedAt.Equal(micro(at(time.Hour))) {
		t.Errorf("revoked agent changed: shift %q updated_at %v", g.Presence.Shift, g.UpdatedAt)
	}
}

// testUpdatePresenceAtomic: the presence write and its audit entry commit
// together or not at all.
func testUpdatePresenceAtomic(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ps := s
	a := vend(t, s, newAgent("atomic", ownerID, "q"))
	before := auditCount(t, s)
	// An audit record that cannot be appended (its data does not marshal).
	_, err := ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at(time.Minute), SetShift: true, Shift: "Mon 09:00-10:00",
		SetOverride: true, Override: "out", OverrideBy: "agent",
		Audit: presenceRecord(a.ID, "agent.presence", map[string]any{"bad": func() {}})})
	if err == nil {
		t.Fatal("UpdatePresence with an unappendable audit record succeeded")
	}
	// A value the column does not allow.
	_, err = ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at(time.Minute), SetOverride: true, Override: "maybe",
		Audit: presenceRecord(a.ID, "agent.presence", nil)})
	if err == nil {
		t.Error(`UpdatePresence(override "maybe") succeeded`)
	}
	diff(t, "agent after failed presence writes", wantAgent(a.Agent), agentByID(t, s, a.ID))
	if n := auditCount(t, s); n != before {
		t.Errorf("audit entries = %d, want %d (nothing appended)", n, before)
	}
}

// testPresenceEveryRead: every read of an agent fills the presence and
// liveness columns the same way.
func testPresenceEveryRead(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ps := s
	a := vend(t, s, newAgent("reader", ownerID, "q"))
	until := at(time.Hour)
	_, err := ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at(time.Minute), SetShift: true, Shift: "Mon-Fri 09:00-17:00",
		SetOverride: true, Override: "out", OverrideUntil: &until, OverrideBy: "agent", Audit: presenceRecord(a.ID, "agent.presence", nil)})
	must(t, "UpdatePresence", err)
	claimed, err := ps.ClaimTransition(ctx, store.ClaimTransitionParams{AgentID: a.ID, New: "out", At: at(2 * time.Minute), By: "agent"})
	must(t, "ClaimTransition", err)
	if !claimed {
		t.Fatal("ClaimTransition(out) = false")
	}
	want := agentByID(t, s, a.ID)
	wantP := domain.PresenceColumns{Shift: "Mon-Fri 09:00-17:00", Override: "out", OverrideUntil: ptr(micro(until)),
		OverrideSetAt: ptr(micro(at(time.Minute))), OverrideBy: "agent", Seen: "out", ChangedAt: ptr(micro(at(2 * time.Minute))), ChangedBy: "agent"}
	diff(t, "presence columns", wantP, want.Presence)

	byHandle, err := s.GetAgent(ctx, store.AgentRef{Handle: a.Handle})
	must(t, "GetAgent(handle)", err)
	diff(t, "agent by handle", want, byHandle)
	byCred, _, err := s.AgentByCredentialHash(ctx, a.CredHash)
	must(t, "AgentByCredentialHash", err)
	diff(t, "agent by credential", want, byCred)
	list, err := s.ListAgents(ctx, store.ListAgentsParams{OwnerID: ownerID})
	must(t, "ListAgents", err)
	diff(t, "listed agents", []domain.Agent{want}, list)
	changed, err := ps.ListAgentsChangedSince(ctx, store.ListChangedParams{})
	must(t, "ListAgentsChangedSince", err)
	diff(t, "changed agents", []domain.Agent{want}, changed)
	name := "renamed"
	updated, err := s.UpdateAgent(ctx, store.UpdateAgentParams{ID: a.ID, Name: &name, Now: at(3 * time.Minute)})
	must(t, "UpdateAgent", err)
	diff(t, "presence returned by UpdateAgent", want.Presence, updated.Presence)
	revoked, err := s.RevokeAgent(ctx, revokeParams(a.ID, at(4*time.Minute)))
	must(t, "RevokeAgent", err)
	diff(t, "presence returned by RevokeAgent", want.Presence, revoked.Presence)
	diff(t, "liveness returned by RevokeAgent", domain.LivenessColumns{State: "unknown"}, revoked.Liveness)
}

// ---- transitions ---------------------------------------------------------------

func testClaimTransition(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ps := s
	a := vend(t, s, newAgent("claimer", ownerID, "q"))
	claimT := func(nw string, when time.Time, by string) bool {
		t.Helper()
		ok, err := ps.ClaimTransition(ctx, store.ClaimTransitionParams{AgentID: a.ID, New: nw, At: when, By: by})
		must(t, "ClaimTransition", err)
		return ok
	}
	if claimT("in", at(time.Minute), "default") {
		t.Error(`ClaimTransition(in) on a new agent = true, want false (seen "in" by default)`)
	}
	if !claimT("out", at(2*time.Minute+time.Microsecond), "shift") {
		t.Fatal("ClaimTransition(out) = false, want true")
	}
	got := agentByID(t, s, a.ID)
	if got.Presence.Seen != "out" || got.Presence.ChangedBy != "shift" {
		t.Errorf("after claiming out: seen %q by %q", got.Presence.Seen, got.Presence.ChangedBy)
	}
	sameTime(t, "presence_changed_at", got.Presence.ChangedAt, at(2*time.Minute+time.Microsecond))
	if !got.UpdatedAt.Equal(micro(Base)) {
		t.Errorf("updated_at = %v, want unchanged %v (a claim is no configuration change)", got.UpdatedAt, Base)
	}
	if claimT("out", at(3*time.Minute), "agent") {
		t.Error("ClaimTransition(out) when already out = true, want false")
	}
	if g := agentByID(t, s, a.ID); !g.Presence.ChangedAt.Equal(micro(at(2*time.Minute+time.Microsecond))) || g.Presence.ChangedBy != "shift" {
		t.Errorf("a lost claim changed the row: %+v", g.Presence)
	}
	if !claimT("in", at(4*time.Minute), "operator") {
		t.Error("ClaimTransition(in) after out = false, want true")
	}
	// A claim evaluated before the last claimed instant (a clock a little
	// behind) is refused and changes nothing; at that instant it is not.
	if claimT("out", at(4*time.Minute-time.Millisecond), "shift") {
		t.Error("ClaimTransition(out) at an instant before the last claim = true, want false")
	}
	if g := agentByID(t, s, a.ID); g.Presence.Seen != "in" || g.Presence.ChangedBy != "operator" {
		t.Errorf("a refused earlier claim changed the row: %+v", g.Presence)
	}
	if !claimT("out", at(4*time.Minute), "shift") {
		t.Error("ClaimTransition(out) at the last claimed instant = false, want true")
	}
	ok, err := ps.ClaimTransition(ctx, store.ClaimTransitionParams{AgentID: uuid.NewString(), New: "out", At: at(time.Hour), By: "shift"})
	if err != nil || ok {
		t.Errorf("ClaimTransition(unknown agent) = %v, %v; want false, nil", ok, err)
	}
	// The evaluator's "changed since" net does not see claims.
	changed, err := ps.ListAgentsChangedSince(ctx, store.ListChangedParams{Since: at(time.Minute), Limit: 10})
	must(t, "ListAgentsChangedSince", err)
	if len(changed) != 0 {
		t.Errorf("ListAgentsChangedSince after claims = %d agents, want 0", len(changed))
	}
}

// testClaimTransitionRace is the exactly-one-claimer rule (design: Transition claim):
// 20 goroutines (spread over two instances when the adapter has a twin)
// claim the same transition at once, several times back and forth.
func testClaimTransitionRace(t *testing.T, in Instance) {
	s := in.Store
	stores := []store.PresenceStore{s, twinOrSelf(t, in)}
	a := vend(t, s, newAgent("racer", ownerID, "q"))
	for round, nw := range []string{"out", "in", "out", "in", "out"} {
		const n = 20
		wins := make([]bool, n)
		errs := parallel(n, func(i int) error {
			ok, err := stores[i%2].ClaimTransition(t.Context(), store.ClaimTransitionParams{AgentID: a.ID, New: nw,
				At: at(time.Duration(round)*time.Minute + time.Duration(i)*time.Microsecond), By: fmt.Sprint("instance-", i%2)})
			wins[i] = ok
			return err
		})
		winners := 0
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, claimer %d: %v", round, i, err)
			}
			if wins[i] {
				winners++
			}
		}
		if winners != 1 {
			t.Fatalf("round %d (%s): %d claimers won, want exactly 1", round, nw, winners)
		}
		if got := agentByID(t, s, a.ID).Presence.Seen; got != nw {
			t.Fatalf("round %d: presence_seen = %q, want %q", round, got, nw)
		}
	}
}

func testListChangedSince(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ps := s
	var all []domain.Agent
	for i := range 7 {
		a := newAgent(fmt.Sprintf("chg-%d", i), ownerID, "q")
		a.UpdatedAt = at(time.Duration(i) * time.Minute)
		all = append(all, vend(t, s, a).Agent)
	}
	// Revoked agents are never listed, however recent the change.
	_, err := s.RevokeAgent(ctx, revokeParams(all[6].ID, at(time.Hour)))
	must(t, "RevokeAgent", err)
	all = all[:6]

	list := func(p store.ListChangedParams) []string {
		t.Helper()
		got, err := ps.ListAgentsChangedSince(ctx, p)
		must(t, "ListAgentsChangedSince", err)
		return idsOf(got, func(a domain.Agent) string { return a.ID })
	}
	idsFrom := func(minute int) []string {
		var ids []string
		for i, a := range all {
			if i >= minute {
				ids = append(ids, a.ID)
			}
		}
		slices.Sort(ids)
		return ids
	}
	// Paging by id after AfterID, Limit 2, gives the same list as one call.
	paged := func(since time.Time) []string {
		t.Helper()
		var out []string
		after := ""
		for range 10 {
			page := list(store.ListChangedParams{Since: since, AfterID: after, Limit: 2})
			if len(page) > 2 {
				t.Fatalf("page of %d > limit 2", len(page))
			}
			out = append(out, page...)
			if len(page) < 2 {
				return out
			}
			after = page[1]
		}
		t.Fatal("paging did not end")
		return nil
	}
	diff(t, "changed since zero (all unrevoked, by id)", idsFrom(0), list(store.ListChangedParams{}))
	diff(t, "changed since zero, paged", idsFrom(0), paged(time.Time{}))
	diff(t, "changed since minute 3 (inclusive)", idsFrom(3), list(store.ListChangedParams{Since: at(3 * time.Minute)}))
	diff(t, "changed since minute 3, paged", idsFrom(3), paged(at(3*time.Minute)))
	diff(t, "changed since just after minute 5", []string{}, list(store.ListChangedParams{Since: at(5*time.Minute + time.Microsecond)}))

	// A presence write bumps updated_at; a claimed transition does not.
	_, err = ps.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: all[1].ID, Now: at(10 * time.Minute), SetShift: true, Shift: "Mon 09:00-10:00",
		Audit: presenceRecord(all[1].ID, "agent.shift", nil)})
	must(t, "UpdatePresence", err)
	_, err = ps.ClaimTransition(ctx, store.ClaimTransitionParams{AgentID: all[2].ID, New: "out", At: at(11 * time.Minute), By: "shift"})
	must(t, "ClaimTransition", err)
	diff(t, "changed since minute 10", []string{all[1].ID}, list(store.ListChangedParams{Since: at(10 * time.Minute)}))
}

// ---- digests -------------------------------------------------------------------

func testPendingDoorbellTodos(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ps := s
	a := vend(t, s, newAgent("digest", ownerID, "build", "reviews", "lane-m"))
	b := vend(t, s, newAgent("other", ownerID, "build"))
	mk := func(agent, queue string, created time.Duration) domain.Todo {
		return push(t, s, newTodo(agent, queue, at(created)))
	}
	// Inserted out of age order on purpose.
	r1 := mk(a.ID, "reviews", 3*time.Second)
	b1 := mk(a.ID, "build", 1*time.Second)
	l1 := mk(a.ID, "lane-m", 2*time.Second)
	b2 := mk(a.ID, "build", 3*time.Second) // same age as r1: id breaks the tie
	spent := mk(a.ID, "build", 4*time.Second)
	for i := range domain.MaxRings {
		markRung(t, s, spent.ID, at(time.Duration(i+1)*time.Minute))
	}
	notEligible := newTodo(a.ID, "build", at(0))
	notEligible.PushEligible, notEligible.CreatedBy = false, "agent:"+a.ID
	push(t, s, notEligible)
	claimed := mk(a.ID, "build", 0)
	claim(t, s, a, claimed.ID, time.Hour, at(time.Minute))
	retrying := mk(a.ID, "build", 0)
	claim(t, s, a, retrying.ID, time.Hour, at(time.Minute))
	_, err := s.FailTodo(ctx, store.FailTodoParams{AgentID: a.ID, TodoID: retrying.ID, Reason: "x", Now: at(2 * time.Minute)})
	must(t, "FailTodo", err)
	mk(b.ID, "build", 0)

	pending := func(p store.PendingParams) []store.PendingTodo {
		t.Helper()
		got, err := ps.PendingDoorbellTodos(ctx, p)
		must(t, "PendingDoorbellTodos", err)
		return got
	}
	pt := func(td domain.Todo) store.PendingTodo {
		return store.PendingTodo{ID: td.ID, Queue: td.Queue, CreatedAt: micro(td.CreatedAt)}
	}
	same3 := []store.PendingTodo{pt(r1), pt(b2)}
	if r1.ID > b2.ID {
		same3 = []store.PendingTodo{pt(b2), pt(r1)}
	}
	want := append(append([]store.PendingTodo{pt(b1), pt(l1)}, same3...), pt(spent))
	diff(t, "pending doorbell todos (oldest first)", want, pending(store.PendingParams{AgentID: a.ID, Limit: 100}))
	diff(t, "no limit", want, pending(store.PendingParams{AgentID: a.ID}))
	diff(t, "limit 2", want[:2], pending(store.PendingParams{AgentID: a.ID, Limit: 2}))
	var noReviews []store.PendingTodo
	for _, p := range want {
		if p.Queue != "reviews" {
			noReviews = append(noReviews, p)
		}
	}
	diff(t, "excluding reviews", noReviews, pending(store.PendingParams{AgentID: a.ID, ExcludeQueues: []string{"reviews"}, Limit: 100}))
	diff(t, "excluding every queue", []store.PendingTodo{}, pending(store.PendingParams{AgentID: a.ID,
		ExcludeQueues: []string{"reviews", "build", "lane-m"}, Limit: 100}))
	diff(t, "unknown agent", []store.PendingTodo{}, pending(store.PendingParams{AgentID: uuid.NewString(), Limit: 100}))
}

func testMarkDigestRung(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ps := s
	a := vend(t, s, newAgent("digest", ownerID, "build"))
	b := vend(t, s, newAgent("other", ownerID, "build"))
	fresh := push(t, s, newTodo(a.ID, "build", Base))
	twice := push(t, s, newTodo(a.ID, "build", Base))
	markRung(t, s, twice.ID, at(time.Minute))
	markRung(t, s, twice.ID, at(7*time.Minute))
	claimed := push(t, s, newTodo(a.ID, "build", Base))
	claim(t, s, a, claimed.ID, time.Hour, at(time.Minute))
	unlisted := push(t, s, newTodo(a.ID, "build", Base))
	others := push(t, s, newTodo(b.ID, "build", Base))

	digestAt := at(8*time.Minute + 1500*time.Nanosecond)
	n, err := ps.MarkDigestRung(ctx, store.MarkDigestParams{AgentID: a.ID, At: digestAt,
		IDs: []string{fresh.ID, twice.ID, claimed.ID, others.ID, uuid.NewString()}})
	must(t, "MarkDigestRung", err)
	if n != 2 {
		t.Errorf("MarkDigestRung changed %d rows, want 2 (the listed pending todos of the agent)", n)
	}
	ringState(t, s, fresh.ID, 0, &digestAt, ptr(digestAt.Add(delay(t, 0))))
	ringState(t, s, twice.ID, 2, &digestAt, ptr(digestAt.Add(delay(t, 2))))
	ringState(t, s, claimed.ID, 0, nil, ptr(Base.Add(delay(t, 0))))
	ringState(t, s, unlisted.ID, 0, nil, ptr(Base.Add(delay(t, 0))))
	ringState(t, s, others.ID, 0, nil, ptr(Base.Add(delay(t, 0))))

	if n, err := ps.MarkDigestRung(ctx, store.MarkDigestParams{AgentID: a.ID, At: digestAt}); err != nil || n != 0 {
		t.Errorf("MarkDigestRung(no ids) = %d, %v", n, err)
	}

	// The sweep follows the digest: the fresh todo is due 5 min after it,
	// not 5 min after its creation.
	diff(t, "swept at creation + 5 min", []string{unlisted.ID}, sweepIDs(t, s, at(5*time.Minute), a.ID))
	if got := sweepIDs(t, s, digestAt.Add(delay(t, 0)-time.Microsecond), a.ID); slices.Contains(got, fresh.ID) {
		t.Error("the digested todo was rung before digest + 5 min")
	}
	if got := sweepIDs(t, s, digestAt.Add(delay(t, 0)), a.ID); !slices.Contains(got, fresh.ID) {
		t.Error("the digested todo was not rung at digest + 5 min")
	}
}

// ---- the sweep -----------------------------------------------------------------

func testNextRingOnCreateAndMarkRung(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("ringer", ownerID, "build"))
	created := at(1234567 * time.Nanosecond)
	td := push(t, s, newTodo(a.ID, "build", created))
	sameTime(t, "next_ring_at on create", td.NextRingAt, created.Add(delay(t, 0)))
	ringState(t, s, td.ID, 0, nil, ptr(created.Add(delay(t, 0))))

	// Dedup returns the live todo with its ring columns.
	k := keyed(a.ID, "k", at(time.Second))
	first := push(t, s, k)
	again, createdAgain, err := s.CreateTodo(ctx, store.CreateTodoParams{Todo: keyed(a.ID, "k", at(time.Hour))})
	must(t, "CreateTodo(dup)", err)
	if createdAgain {
		t.Fatal("duplicate key created a todo")
	}
	diff(t, "deduplicated todo", first, again)

	// Each ring (the doorbell on create, then sweeps) moves next_ring_at to
	// the ring time + the delay for the new count; after the 5th, none.
	for n := 1; n <= domain.MaxRings; n++ {
		when := at(time.Duration(n) * time.Hour)
		markRung(t, s, td.ID, when)
		var next *time.Time
		if n < domain.MaxRings {
			next = ptr(when.Add(delay(t, n)))
		}
		ringState(t, s, td.ID, n, &when, next)
	}
	ok, err := markOne(ctx, s, store.MarkRungParams{TodoID: first.ID, At: at(time.Minute)})
	must(t, "MarkRung", err)
	if !ok {
		t.Error("MarkRung(pending) = false")
	}
}

// testSweepDueRule: a never-rung todo is due 5 min after creation; each
// sweep ring moves it to the next backoff step (5 min, 20 min, 1 h, 6 h);
// after 5 rings it is never rung again, and stays pending and listed.
func testSweepDueRule(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("due", ownerID, "build"))
	td := push(t, s, newTodo(a.ID, "build", Base))
	due := Base.Add(delay(t, 0))
	for n := 0; n < domain.MaxRings; n++ {
		diff(t, fmt.Sprintf("sweep 1µs before ring %d is due", n+1), []string{}, sweepIDs(t, s, due.Add(-time.Microsecond), a.ID))
		got := sweep(t, s, store.SweepParams{Receivers: []string{a.ID}, Now: due, PerAgent: 3, Limit: 10})
		if len(got) != 1 || got[0].ID != td.ID {
			t.Fatalf("sweep at ring %d due time rang %v, want [%s]", n+1, todoIDs(got), td.ID)
		}
		var next *time.Time
		if n+1 < domain.MaxRings {
			next = ptr(due.Add(delay(t, n+1)))
		}
		want := getTodo(t, s, td.ID)
		diff(t, "returned row = stored row", want, got[0])
		ringState(t, s, td.ID, n+1, &due, next)
		if next != nil {
			due = *next
		}
	}
	diff(t, "sweep a year later", []string{}, sweepIDs(t, s, due.Add(365*24*time.Hour), a.ID))
	got := getTodo(t, s, td.ID)
	if got.State != domain.TodoPending || got.RingAttempts != domain.MaxRings {
		t.Errorf("after the budget: state %s ring_attempts %d, want pending, %d", got.State, got.RingAttempts, domain.MaxRings)
	}
	listed, err := s.ListTodos(ctx, store.ListTodosParams{AgentID: a.ID, State: domain.TodoPending})
	must(t, "ListTodos", err)
	if len(listed) != 1 || listed[0].ID != td.ID {
		t.Errorf("pending todos listed after the budget = %v, want [%s]", todoIDs(listed), td.ID)
	}
	pend, err := s.PendingDoorbellTodos(ctx, store.PendingParams{AgentID: a.ID, Limit: 10})
	must(t, "PendingDoorbellTodos", err)
	if len(pend) != 1 {
		t.Errorf("pending doorbell todos after the budget = %d, want 1 (still counted by digests)", len(pend))
	}
}

// testSweepAfterCreateRing: a todo rung on create is re-rung 5 min after
// that ring, then 20 min after the sweep ring.
func testSweepAfterCreateRing(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("rung", ownerID, "build"))
	td := push(t, s, newTodo(a.ID, "build", Base))
	rang := at(10 * time.Second)
	markRung(t, s, td.ID, rang) // the doorbell on create
	diff(t, "at creation + 5 min", []string{}, sweepIDs(t, s, Base.Add(delay(t, 0)), a.ID))
	diff(t, "at create ring + 5 min", []string{td.ID}, sweepIDs(t, s, rang.Add(delay(t, 1)), a.ID))
	second := rang.Add(delay(t, 1))
	ringState(t, s, td.ID, 2, &second, ptr(second.Add(delay(t, 2))))
	diff(t, "19 min later", []string{}, sweepIDs(t, s, second.Add(19*time.Minute), a.ID))
	diff(t, "20 min later", []string{td.ID}, sweepIDs(t, s, second.Add(20*time.Minute), a.ID))
}

// testSweepRoundRobin: at most PerAgent per agent, oldest due first.
func testSweepRoundRobin(t *testing.T, in Instance) {
	s := in.Store
	var agents []vended
	for _, h := range []string{"ra", "rb", "rc", "rd"} {
		agents = append(agents, vend(t, s, newAgent(h, ownerID, "build")))
	}
	ra, rb, rc, rd := agents[0], agents[1], agents[2], agents[3]
	// mk pushes one todo per creation offset (seconds) and returns their
	// ids in due order (oldest first).
	mk := func(a vended, secs ...int) []string {
		ids := make([]string, len(secs))
		for i, sec := range secs {
			ids[i] = push(t, s, newTodo(a.ID, "build", at(time.Duration(sec)*time.Second))).ID
		}
		order := make([]int, len(secs))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(x, y int) int { return secs[x] - secs[y] })
		out := make([]string, len(secs))
		for i, o := range order {
			out[i] = ids[o]
		}
		return out
	}
	aIDs := mk(ra, 4, 3, 2, 1, 0) // inserted newest first: insertion order is not due order
	bIDs := mk(rb, 0, 1)
	cIDs := mk(rc, 1, 2, 3, 4)
	push(t, s, newTodo(rd.ID, "build", at(time.Hour))) // not due
	now := at(time.Hour)
	got := sweepIDs(t, s, now, ra.ID, rb.ID, rc.ID, rd.ID)
	diff(t, "rung with 3 per agent", sorted(append(append(aIDs[:3:3], bIDs...), cIDs[:3]...)...), got)
	// The next pass at the same time takes the rest, 3 per agent again.
	diff(t, "second pass", sorted(aIDs[3], aIDs[4], cIDs[3]), sweepIDs(t, s, now, ra.ID, rb.ID, rc.ID, rd.ID))
	diff(t, "third pass", []string{}, sweepIDs(t, s, now, ra.ID, rb.ID, rc.ID, rd.ID))
}

// testSweepLimit: at most Limit in all, every receiver's first before
// anyone's second, the oldest due first within a turn.
func testSweepLimit(t *testing.T, in Instance) {
	s := in.Store
	type ag struct {
		id  string
		tds []string
	}
	var ags []ag
	// Agent i's todos are due at minute 5 + i*10s + j seconds: agent 0's
	// first is the oldest due, agent 2's the youngest.
	for i := range 3 {
		a := vend(t, s, newAgent(fmt.Sprintf("lim-%d", i), ownerID, "build"))
		g := ag{id: a.ID}
		for j := range 3 {
			g.tds = append(g.tds, push(t, s, newTodo(a.ID, "build", at(time.Duration(i)*10*time.Second+time.Duration(j)*time.Second))).ID)
		}
		ags = append(ags, g)
	}
	recv := []string{ags[0].id, ags[1].id, ags[2].id}
	now := at(time.Hour)
	pass := func(limit int) []string {
		t.Helper()
		return todoIDs(sweep(t, s, store.SweepParams{Receivers: recv, Now: now, PerAgent: 3, Limit: limit}))
	}
	// Oldest due first alone would take agent 0's three and agent 1's first.
	diff(t, "limit 4: every agent's first, then the oldest second", sorted(ags[0].tds[0], ags[1].tds[0], ags[2].tds[0], ags[0].tds[1]), pass(4))
	diff(t, "limit 2: the two oldest of this pass's firsts", sorted(ags[0].tds[2], ags[1].tds[1]), pass(2))
	diff(t, "limit 2 again", sorted(ags[1].tds[2], ags[2].tds[1]), pass(2))
	diff(t, "the rest", sorted(ags[2].tds[2]), pass(10))
}

// testSweepFilters: only the receivers' pending, push-eligible todos in
// queues not excluded for that agent are rung; nothing else changes.
func testSweepFilters(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("fa", ownerID, "build", "reviews"))
	b := vend(t, s, newAgent("fb", ownerID, "build", "reviews"))
	c := vend(t, s, newAgent("fc", ownerID, "build")) // not a receiver
	aBuild := push(t, s, newTodo(a.ID, "build", Base))
	aReviews := push(t, s, newTodo(a.ID, "reviews", Base))
	bReviews := push(t, s, newTodo(b.ID, "reviews", Base))
	cBuild := push(t, s, newTodo(c.ID, "build", Base))
	notEligible := newTodo(a.ID, "build", Base)
	notEligible.PushEligible, notEligible.CreatedBy = false, "agent:"+a.ID
	push(t, s, notEligible)
	claimed := push(t, s, newTodo(a.ID, "build", Base))
	claim(t, s, a, claimed.ID, 24*time.Hour, at(time.Minute))
	done := push(t, s, newTodo(b.ID, "build", Base))
	claim(t, s, b, done.ID, time.Hour, at(time.Minute))
	_, err := s.CompleteTodo(ctx, store.CompleteTodoParams{AgentID: b.ID, TodoID: done.ID, Now: at(2 * time.Minute)})
	must(t, "CompleteTodo", err)
	retrying := push(t, s, newTodo(b.ID, "build", Base))
	claim(t, s, b, retrying.ID, time.Hour, at(time.Minute))
	_, err = s.FailTodo(ctx, store.FailTodoParams{AgentID: b.ID, TodoID: retrying.ID, Reason: "x", Now: at(2 * time.Minute)})
	must(t, "FailTodo", err)

	if got := sweep(t, s, store.SweepParams{Now: at(time.Hour), PerAgent: 3, Limit: 10}); len(got) != 0 {
		t.Errorf("sweep with no receivers rang %d", len(got))
	}
	now := at(time.Hour)
	got := todoIDs(sweep(t, s, store.SweepParams{Receivers: []string{a.ID, b.ID, a.ID}, Excluded: []string{a.ID + ":reviews", c.ID + ":build"},
		Now: now, PerAgent: 3, Limit: 10}))
	diff(t, "rung", sorted(aBuild.ID, bReviews.ID), got)
	for _, id := range []string{aReviews.ID, cBuild.ID, notEligible.ID, claimed.ID, done.ID, retrying.ID} {
		got := getTodo(t, s, id)
		if got.RingAttempts != 0 || got.LastRingedAt != nil {
			t.Errorf("todo %s in %s (%s, push-eligible %v) was rung", id, got.Queue, got.State, got.PushEligible)
		}
	}
	// A receiver listed twice takes one share: 3, not 6, of its todos.
	d := vend(t, s, newAgent("fd", ownerID, "build"))
	for i := range 5 {
		push(t, s, newTodo(d.ID, "build", at(time.Duration(i)*time.Second)))
	}
	if got := sweep(t, s, store.SweepParams{Receivers: []string{d.ID, d.ID}, Now: now, PerAgent: 3, Limit: 10}); len(got) != 3 {
		t.Errorf("receiver listed twice: %d rung, want 3", len(got))
	}
}

// testSweepReaped: the reaper returning a todo to pending keeps its ring
// columns, so the sweep resumes the backoff where it was.
func testSweepReaped(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("reaped", ownerID, "build"))
	td := push(t, s, newTodo(a.ID, "build", Base))
	first := Base.Add(delay(t, 0))
	diff(t, "first sweep ring", []string{td.ID}, sweepIDs(t, s, first, a.ID))
	claim(t, s, a, td.ID, time.Minute, first.Add(time.Minute))
	diff(t, "claimed: not rung", []string{}, sweepIDs(t, s, first.Add(time.Hour), a.ID))
	_, err := s.ReapExpiredLeases(ctx, store.ReapParams{Now: first.Add(2 * time.Minute), Limit: 10})
	must(t, "ReapExpiredLeases", err)
	ringState(t, s, td.ID, 1, &first, ptr(first.Add(delay(t, 1))))
	diff(t, "after the reaper", []string{td.ID}, sweepIDs(t, s, first.Add(delay(t, 1)), a.ID))
}

// testSweepRace: sweeps of one receiver racing on two instances (an agent
// with sessions on both) ring every due todo exactly once.
func testSweepRace(t *testing.T, in Instance) {
	s := in.Store
	stores := []store.PresenceStore{s, twinOrSelf(t, in)}
	a := vend(t, s, newAgent("shared", ownerID, "build"))
	var ids []string
	for i := range 6 {
		ids = append(ids, push(t, s, newTodo(a.ID, "build", at(time.Duration(i)*time.Second))).ID)
	}
	now := at(time.Hour)
	const n = 10
	rung := make([][]domain.Todo, n)
	errs := parallel(n, func(i int) error {
		var err error
		rung[i], err = stores[i%2].SweepRing(t.Context(), store.SweepParams{Receivers: []string{a.ID}, Now: now, PerAgent: 3, Limit: 10})
		return err
	})
	got := rungIDs(t, "sweep", errs, rung)
	if len(got) != len(slices.Compact(slices.Clone(got))) {
		t.Errorf("a todo was rung twice in racing sweeps: %v", got)
	}
	if len(got) < 3 || len(got) > 6 {
		t.Errorf("racing sweeps rang %d todos, want 3 to 6 (3 per pass)", len(got))
	}
	// Whatever the racers left, a later pass rings; each todo rang once.
	for len(got) < 6 {
		more := sweepIDs(t, s, now, a.ID)
		if len(more) == 0 {
			t.Fatalf("rang %d of 6, and a later pass rings none", len(got))
		}
		got = append(got, more...)
	}
	for _, id := range ids {
		if n := getTodo(t, s, id).RingAttempts; n != 1 {
			t.Errorf("todo %s: ring_attempts = %d, want 1", id, n)
		}
	}
}

// testRingMissed: the catch-up ring after a lost bus listener (design: Catch-up after a lost listener)
// rings, in one statement, the never-rung pending push-eligible
// todos of the receivers created since Since, and only those; it counts
// the ring like the sweep; a second call finds nothing.
func testRingMissed(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("ma", ownerID, "build", "reviews"))
	b := vend(t, s, newAgent("mb", ownerID, "build"))
	c := vend(t, s, newAgent("mc", ownerID, "build")) // not a receiver
	since := at(time.Minute)
	old := push(t, s, newTodo(a.ID, "build", at(30*time.Second))) // before the gap
	aBuild := push(t, s, newTodo(a.ID, "build", since))
	aReviews := push(t, s, newTodo(a.ID, "reviews", at(2*time.Minute))) // excluded queue
	bBuild := push(t, s, newTodo(b.ID, "build", at(3*time.Minute)))
	cBuild := push(t, s, newTodo(c.ID, "build", at(3*time.Minute)))
	rung := push(t, s, newTodo(b.ID, "build", at(2*time.Minute)))
	markRung(t, s, rung.ID, at(2*time.Minute))
	digested := push(t, s, newTodo(b.ID, "build", at(2*time.Minute)))
	_, err := s.MarkDigestRung(ctx, store.MarkDigestParams{AgentID: b.ID, IDs: []string{digested.ID}, At: at(2 * time.Minute)})
	must(t, "MarkDigestRung", err)
	notEligible := newTodo(a.ID, "build", at(2*time.Minute))
	notEligible.PushEligible, notEligible.CreatedBy = false, "agent:"+a.ID
	push(t, s, notEligible)
	claimed := push(t, s, newTodo(a.ID, "build", at(2*time.Minute)))
	claim(t, s, a, claimed.ID, time.Hour, at(2*time.Minute))

	if got, err := s.RingMissed(ctx, store.MissedRingParams{Since: since, Now: at(4 * time.Minute)}); err != nil || len(got) != 0 {
		t.Fatalf("RingMissed without receivers = %d, %v", len(got), err)
	}
	now := at(4 * time.Minute)
	got, err := s.RingMissed(ctx, store.MissedRingParams{Receivers: []string{a.ID, b.ID, a.ID}, Excluded: []string{a.ID + ":reviews"},
		Since: since, Now: now, Limit: 10})
	must(t, "RingMissed", err)
	diff(t, "rung by the catch-up", sorted(aBuild.ID, bBuild.ID), todoIDs(got))
	for _, td := range got {
		if td.RingAttempts != 1 {
			t.Errorf("returned todo %s with ring_attempts %d, want 1", td.ID, td.RingAttempts)
		}
	}
	ringState(t, s, aBuild.ID, 1, &now, ptr(now.Add(delay(t, 1))))
	for _, id := range []string{old.ID, aReviews.ID, cBuild.ID, notEligible.ID, claimed.ID, digested.ID} {
		if got := getTodo(t, s, id); got.RingAttempts != 0 {
			t.Errorf("todo %s (%s, %s) was rung", id, got.Queue, got.State)
		}
	}
	if got := getTodo(t, s, rung.ID); got.RingAttempts != 1 {
		t.Errorf("already rung todo: ring_attempts %d, want 1", got.RingAttempts)
	}
	again, err := s.RingMissed(ctx, store.MissedRingParams{Receivers: []string{a.ID, b.ID}, Excluded: []string{a.ID + ":reviews"},
		Since: since, Now: at(5 * time.Minute), Limit: 10})
	must(t, "RingMissed", err)
	diff(t, "second catch-up", []string{}, todoIDs(again))
	// Limit: the oldest first.
	d := vend(t, s, newAgent("md", ownerID, "build"))
	var ids []string
	for i := range 4 {
		ids = append(ids, push(t, s, newTodo(d.ID, "build", at(time.Duration(10+i)*time.Minute))).ID)
	}
	lim, err := s.RingMissed(ctx, store.MissedRingParams{Receivers: []string{d.ID}, Since: since, Now: at(20 * time.Minute), Limit: 2})
	must(t, "RingMissed", err)
	diff(t, "limited catch-up", sorted(ids[0], ids[1]), todoIDs(lim))
}

// testRingMissedRace: catch-ups of one receiver racing on two instances
// ring every missed todo exactly once.
func testRingMissedRace(t *testing.T, in Instance) {
	s := in.Store
	stores := []store.PresenceStore{s, twinOrSelf(t, in)}
	a := vend(t, s, newAgent("mrace", ownerID, "build"))
	for i := range 6 {
		push(t, s, newTodo(a.ID, "build", at(time.Duration(i)*time.Second)))
	}
	const n = 10
	rung := make([][]domain.Todo, n)
	errs := parallel(n, func(i int) error {
		var err error
		rung[i], err = stores[i%2].RingMissed(t.Context(), store.MissedRingParams{Receivers: []string{a.ID}, Since: Base, Now: at(time.Minute), Limit: 10})
		return err
	})
	got := rungIDs(t, "catch-up", errs, rung)
	if len(got) != 6 || len(got) != len(slices.Compact(slices.Clone(got))) {
		t.Errorf("racing catch-ups rang %v, want each of the 6 todos once", got)
	}
}

// testFailoverRings: a failover ring is counted only for a pending todo
// with ring budget left that nobody rang after the ring being failed over;
// a batch is one statement and counts a todo listed twice once.
func testFailoverRings(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("fo", ownerID, "build"))
	td := push(t, s, newTodo(a.ID, "build", Base))
	rung := at(time.Second)
	markRung(t, s, td.ID, rung)
	fo := func(now time.Time, rings ...store.FailoverRing) []string {
		t.Helper()
		ids, err := s.FailoverRings(ctx, store.FailoverRingsParams{Rings: rings, At: now})
		must(t, "FailoverRings", err)
		return sorted(ids...)
	}
	ring := func(id string, at time.Time) store.FailoverRing { return store.FailoverRing{TodoID: id, RungAt: at} }
	if got := fo(at(time.Minute)); len(got) != 0 {
		t.Fatalf("empty batch counted %v", got)
	}
	now := at(31 * time.Second)
	diff(t, "failover of a pending todo rung once (listed twice)", []string{td.ID}, fo(now, ring(td.ID, rung), ring(td.ID, rung)))
	ringState(t, s, td.ID, 2, &now, ptr(now.Add(delay(t, 2))))
	diff(t, "failover of a ring that is no longer the last", []string{}, fo(at(time.Minute), ring(td.ID, rung)))
	// Budget: at MaxRings nothing more.
	last := now
	for i := 2; i < domain.MaxRings; i++ {
		next := last.Add(time.Minute)
		diff(t, fmt.Sprintf("failover %d", i), []string{td.ID}, fo(next, ring(td.ID, last)))
		last = next
	}
	diff(t, "failover past the ring budget", []string{}, fo(last.Add(time.Minute), ring(td.ID, last)))
	// A batch: only the pending one with budget; not claimed, not unknown.
	other := push(t, s, newTodo(a.ID, "build", Base))
	markRung(t, s, other.ID, rung)
	c := push(t, s, newTodo(a.ID, "build", Base))
	claim(t, s, a, c.ID, time.Hour, at(time.Second))
	diff(t, "batch", []string{other.ID}, fo(now, ring(other.ID, rung), ring(c.ID, at(time.Second)), ring(td.ID, last),
		ring("00000000-0000-0000-0000-000000000000", rung)))
}

// testSelfClockInCap: self_clock_in_cap defaults to 8 h and is written by
// SetCap; the ledger (self_in_stretch, self_in_used) by SetBudget, with or
// without an override in the same write; each group leaves the others
// alone (design: Self clock-in cap).
func testSelfClockInCap(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("capped", ownerID, "q"))
	got := agentByID(t, s, a.ID)
	if got.SelfClockInCap != domain.ClockInCap(8*time.Hour) || got.Presence.SelfInStretch != nil || got.Presence.SelfInUsed != 0 {
		t.Fatalf("new agent: cap %s stretch %v used %s, want 8h, nil, 0", got.SelfClockInCap, got.Presence.SelfInStretch, got.Presence.SelfInUsed)
	}
	want := wantAgent(a.Agent)

	now1 := at(time.Minute)
	got, err := s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now1, SetCap: true, SelfClockInCap: 90 * time.Minute,
		Audit: presenceRecord(a.ID, "agent.update", map[string]any{"self_clock_in_cap": "1h30m"})})
	must(t, "UpdatePresence(cap)", err)
	want.UpdatedAt, want.SelfClockInCap = micro(now1), domain.ClockInCap(90*time.Minute)
	diff(t, "agent after setting the cap", want, got)

	// The ledger with an override, in one write.
	now2 := at(2 * time.Minute)
	stretch, until := at(20*time.Hour+time.Microsecond), at(2*time.Hour)
	got, err = s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now2, SetOverride: true,
		Override: "in", OverrideUntil: &until, OverrideBy: "agent",
		SetBudget: true, SelfInStretch: &stretch, SelfInUsed: 118 * time.Minute,
		Audit: presenceRecord(a.ID, "agent.presence", map[string]any{"override": "in"})})
	must(t, "UpdatePresence(override+ledger)", err)
	want.UpdatedAt = micro(now2)
	want.Presence.Override, want.Presence.OverrideUntil, want.Presence.OverrideSetAt, want.Presence.OverrideBy = "in", ptr(micro(until)), ptr(micro(now2)), "agent"
	want.Presence.SelfInStretch, want.Presence.SelfInUsed = ptr(micro(stretch)), 118*time.Minute
	diff(t, "agent after clock_in", want, got)

	// A cap of 0, then an override without the ledger: the ledger stays.
	now3 := at(3 * time.Minute)
	got, err = s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now3, SetCap: true, SelfClockInCap: 0,
		SetOverride: true, Override: "",
		Audit: presenceRecord(a.ID, "agent.presence", nil)})
	must(t, "UpdatePresence(cap 0, clear)", err)
	want.UpdatedAt, want.SelfClockInCap = micro(now3), 0
	want.Presence.Override, want.Presence.OverrideUntil, want.Presence.OverrideSetAt, want.Presence.OverrideBy = "", nil, nil, ""
	diff(t, "agent after cap 0", want, got)
	diff(t, "stored agent", want, agentByID(t, s, a.ID))

	// The ledger cleared.
	now4 := at(4 * time.Minute)
	got, err = s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: now4, SetBudget: true,
		Audit: presenceRecord(a.ID, "agent.presence", nil)})
	must(t, "UpdatePresence(ledger cleared)", err)
	want.UpdatedAt = micro(now4)
	want.Presence.SelfInStretch, want.Presence.SelfInUsed = nil, 0
	diff(t, "agent after clearing the ledger", want, got)
}

// testUpdatePresenceGuard: a guarded write happens only while the override
// columns hold what the guard says; otherwise ErrPresenceChanged, nothing
// written, no audit entry. A revoked agent is still ErrConflict.
func testUpdatePresenceGuard(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("guarded", ownerID, "q"))
	// Unguarded: the operator puts it out.
	opAt := at(time.Minute)
	op, err := s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: opAt, SetOverride: true,
		Override: "out", OverrideBy: "operator:" + ownerID, Audit: presenceRecord(a.ID, "agent.presence", nil)})
	must(t, "UpdatePresence(operator out)", err)
	entries := auditCount(t, s)

	// The agent decided on "no override": stale.
	until := at(3 * time.Hour)
	_, err = s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at(2 * time.Minute), SetOverride: true,
		Override: "in", OverrideUntil: &until, OverrideBy: "agent", SetBudget: true, SelfInUsed: time.Hour,
		Guard: &store.OverrideGuard{}, Audit: presenceRecord(a.ID, "agent.presence", nil)})
	if !errors.Is(err, store.ErrPresenceChanged) {
		t.Fatalf("stale guard: %v, want ErrPresenceChanged", err)
	}
	diff(t, "agent after a stale guarded write", op, agentByID(t, s, a.ID))
	if n := auditCount(t, s); n != entries {
		t.Fatalf("a refused guarded write appended %d audit entries", n-entries)
	}

	// A guard that matches writes.
	g := &store.OverrideGuard{Override: "out", SetAt: op.Presence.OverrideSetAt, By: "operator:" + ownerID}
	got, err := s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at(3 * time.Minute), SetOverride: true,
		Override: "", Guard: g, Audit: presenceRecord(a.ID, "agent.presence", nil)})
	must(t, "UpdatePresence(matching guard)", err)
	if got.Presence.Override != "" {
		t.Fatalf("matching guard did not write: %+v", got.Presence)
	}
	// Now "no override" matches.
	_, err = s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at(4 * time.Minute), SetShift: true, Shift: "Mon 09:00-10:00",
		Guard: &store.OverrideGuard{}, Audit: presenceRecord(a.ID, "agent.shift", nil)})
	must(t, "UpdatePresence(empty guard on no override)", err)

	_, err = s.RevokeAgent(ctx, revokeParams(a.ID, at(5*time.Minute)))
	must(t, "RevokeAgent", err)
	_, err = s.UpdatePresence(ctx, store.UpdatePresenceParams{AgentID: a.ID, Now: at(6 * time.Minute), SetOverride: true,
		Override: "in", OverrideBy: "agent", Guard: &store.OverrideGuard{}, Audit: presenceRecord(a.ID, "agent.presence", nil)})
	if !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("guarded write on a revoked agent: %v, want ErrConflict", err)
	}
}
