package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// ownerLeaseTests are the contract of store.OwnerLeaseStore (design: Owner
// lease); with Instance.Twin set the race runs across two instances on one
// database.
var ownerLeaseTests = []contractTest{
	{"OwnerLease/AcquireRenewRelease", testOwnerLeaseAcquireRenew},
	{"OwnerLease/ExpireAndTakeOver", testOwnerLeaseTakeOver},
	{"OwnerLease/TakeOverRaceOneWinner", testOwnerLeaseRace},
	{"OwnerLease/AgentOwnerMonotone", testAgentOwnerMonotone},
}

func renewLease(t *testing.T, s store.Store, instance string, until time.Time) bool {
	t.Helper()
	held, err := s.RenewOwnerLease(t.Context(), store.RenewOwnerLeaseParams{Instance: instance, ExpiresAt: until})
	must(t, "RenewOwnerLease "+instance, err)
	return held
}

func expiredLeases(t *testing.T, s store.Store, now time.Time, except string) []string {
	t.Helper()
	ids, err := s.ExpiredOwnerLeases(t.Context(), now, except)
	must(t, "ExpiredOwnerLeases", err)
	return ids
}

func setOwner(t *testing.T, s store.Store, agentID, instance string, hb time.Time) bool {
	t.Helper()
	wrote, err := s.SetAgentOwner(t.Context(), store.SetAgentOwnerParams{AgentID: agentID, Instance: instance, HeartbeatAt: hb})
	must(t, "SetAgentOwner", err)
	return wrote
}

// ownedAgents vends n agents (handles prefix-0 …) owned by instance since
// at(time.Second) and returns their ids sorted.
func ownedAgents(t *testing.T, s store.Store, prefix, instance string, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		a := vend(t, s, newAgent(fmt.Sprintf("%s-%d", prefix, i), ownerID, "q"))
		setOwner(t, s, a.ID, instance, at(time.Second))
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}

func ownerOf(t *testing.T, s store.Store, agentID string) string {
	t.Helper()
	id, err := s.AgentOwner(t.Context(), agentID)
	must(t, "AgentOwner", err)
	return id
}

// testOwnerLeaseAcquireRenew: the first renewal acquires (held = false),
// the next ones renew (held = true) and never move the expiry back; a
// lease is expired at and after its
// expiry (inclusive) and not before; a release expires it at once; the
// caller's own lease is never listed.
func testOwnerLeaseAcquireRenew(t *testing.T, in Instance) {
	s := in.Store
	if renewLease(t, s, "i-a", at(2*time.Second)) {
		t.Error("first RenewOwnerLease: held = true, want false (acquired)")
	}
	if !renewLease(t, s, "i-a", at(3*time.Second)) {
		t.Error("second RenewOwnerLease: held = false, want true (renewed)")
	}
	// A late renewal computed from an earlier now never moves it back.
	if !renewLease(t, s, "i-a", at(2500*time.Millisecond)) {
		t.Error("late RenewOwnerLease: held = false, want true")
	}
	renewLease(t, s, "i-b", at(10*time.Second))
	if got := expiredLeases(t, s, at(3*time.Second-time.Microsecond), ""); len(got) != 0 {
		t.Errorf("expired 1 µs before the renewed expiry = %v, want none", got)
	}
	if got := expiredLeases(t, s, at(3*time.Second), ""); !slices.Equal(got, []string{"i-a"}) {
		t.Errorf("expired at the renewed expiry = %v, want [i-a] (inclusive)", got)
	}
	if got := expiredLeases(t, s, at(3*time.Second), "i-a"); len(got) != 0 {
		t.Errorf("expired except i-a = %v, want none", got)
	}
	// A clean shutdown: i-b's lease ends at once.
	must(t, "ReleaseOwnerLease", s.ReleaseOwnerLease(t.Context(), "i-b", at(4*time.Second)))
	if got := expiredLeases(t, s, at(4*time.Second), ""); !slices.Equal(got, []string{"i-a", "i-b"}) {
		t.Errorf("expired after i-b released = %v, want [i-a i-b]", got)
	}
	must(t, "ReleaseOwnerLease of a missing lease", s.ReleaseOwnerLease(t.Context(), "i-none", at(4*time.Second)))
}

// testOwnerLeaseTakeOver: an unexpired lease cannot be taken over; an
// expired one is, once: the winner gets exactly the agents the dead
// instance owned (not those of another instance), the lease row is gone,
// and the dead instance finds out at its next renewal (held = false).
func testOwnerLeaseTakeOver(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	mine := ownedAgents(t, s, "owned", "dead", 3)
	other := vend(t, s, newAgent("elsewhere", ownerID, "q"))
	setOwner(t, s, other.ID, "alive", at(time.Second))
	renewLease(t, s, "dead", at(2*time.Second))
	renewLease(t, s, "alive", at(time.Minute))

	won, ids, err := s.TakeOverOwnerLease(ctx, store.TakeOverOwnerLeaseParams{From: "dead", To: "alive", Now: at(2*time.Second - time.Microsecond)})
	must(t, "TakeOverOwnerLease before expiry", err)
	if won || len(ids) != 0 {
		t.Errorf("take-over before expiry = %v %v, want false and none", won, ids)
	}
	won, ids, err = s.TakeOverOwnerLease(ctx, store.TakeOverOwnerLeaseParams{From: "dead", To: "alive", Now: at(2 * time.Second)})
	must(t, "TakeOverOwnerLease", err)
	if !won || !slices.Equal(ids, mine) {
		t.Errorf("take-over at expiry = %v %v, want true %v", won, ids, mine)
	}
	for _, id := range mine {
		if got := ownerOf(t, s, id); got != "alive" {
			t.Errorf("owner of %s after the take-over = %q, want alive", id, got)
		}
	}
	if got := ownerOf(t, s, other.ID); got != "alive" {
		t.Errorf("owner of the other instance's agent = %q, want alive", got)
	}
	if got := expiredLeases(t, s, at(time.Hour), "alive"); len(got) != 0 {
		t.Errorf("expired leases after the take-over = %v, want none (the row is gone)", got)
	}
	won, ids, err = s.TakeOverOwnerLease(ctx, store.TakeOverOwnerLeaseParams{From: "dead", To: "alive", Now: at(3 * time.Second)})
	must(t, "second TakeOverOwnerLease", err)
	if won || len(ids) != 0 {
		t.Errorf("second take-over = %v %v, want false and none", won, ids)
	}
	if renewLease(t, s, "dead", at(5*time.Second)) {
		t.Error("renewal after the take-over: held = true, want false (the lease was lost)")
	}
	if got := ownerOf(t, s, "no-such-agent"); got != "" {
		t.Errorf("owner of an unknown agent = %q, want none", got)
	}
}

// testOwnerLeaseRace: two callers (two instances when the adapter opens a
// twin) race 20 times each to take over one expired lease: exactly one
// call wins, and it gets every agent.
func testOwnerLeaseRace(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	stores := twoStores(t, in)
	ids := ownedAgents(t, s, "orphan", "gone", 5)
	renewLease(t, s, "gone", at(2*time.Second))
	const n = 40
	wins := make([]bool, n)
	got := make([][]string, n)
	errs := parallel(n, func(i int) error {
		to := []string{"left", "right"}[i%2]
		w, agents, err := stores[i%2].TakeOverOwnerLease(ctx, store.TakeOverOwnerLeaseParams{From: "gone", To: to, Now: at(3 * time.Second)})
		wins[i], got[i] = w, agents
		return err
	})
	winner := -1
	for i, err := range errs {
		if err != nil {
			t.Errorf("take-over %d: %v", i, err)
		}
		if wins[i] {
			if winner >= 0 {
				t.Errorf("take-overs %d and %d both won", winner, i)
			}
			winner = i
		} else if len(got[i]) != 0 {
			t.Errorf("losing take-over %d moved %v", i, got[i])
		}
	}
	if winner < 0 {
		t.Fatal("no take-over won")
	}
	if !slices.Equal(got[winner], ids) {
		t.Errorf("winner got %v, want %v", got[winner], ids)
	}
	want := []string{"left", "right"}[winner%2]
	for _, id := range ids {
		if o := ownerOf(t, s, id); o != want {
			t.Errorf("owner of %s = %q, want the winner %q", id, o, want)
		}
	}
}

// testAgentOwnerMonotone: the record of a later heartbeat wins over one of
// an earlier heartbeat written after it; equal times overwrite; an unknown
// agent is ErrNotFound.
func testAgentOwnerMonotone(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("mover", ownerID, "q"))
	if !setOwner(t, s, a.ID, "i-a", at(10*time.Second)) {
		t.Error("first SetAgentOwner: wrote = false")
	}
	if setOwner(t, s, a.ID, "i-b", at(9*time.Second)) {
		t.Error("SetAgentOwner of an earlier heartbeat: wrote = true")
	}
	if got := ownerOf(t, s, a.ID); got != "i-a" {
		t.Errorf("owner = %q, want i-a (the later heartbeat)", got)
	}
	if !setOwner(t, s, a.ID, "i-b", at(10*time.Second)) || ownerOf(t, s, a.ID) != "i-b" {
		t.Error("SetAgentOwner at the same heartbeat time did not move the owner")
	}
	_, err := s.SetAgentOwner(t.Context(), store.SetAgentOwnerParams{AgentID: "no-such-agent", Instance: "i-a", HeartbeatAt: at(time.Second)})
	wantErr(t, "unknown agent", err, domain.ErrNotFound)
}
