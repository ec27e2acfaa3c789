package bus_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
)

// Generators of the values each field holds on the wire: ids (UUIDs,
// instance ids: no ":" or ","), handles and codes (the name form), free
// text (todo titles), times in µs UTC.
var (
	genID     = rapid.StringMatching(`[0-9a-f][0-9a-f-]{0,35}`)
	genName   = rapid.StringMatching(`[a-z0-9][a-z0-9._-]{0,20}`)
	genCause  = rapid.SampledFrom([]string{"", "clock_in", "clock_out", "operator", "readiness"})
	genReason = rapid.StringMatching(`[a-z_]{0,20}`)
	genText   = rapid.String()
	genTime   = rapid.Custom(func(t *rapid.T) time.Time {
		return time.UnixMicro(rapid.Int64Range(0, 1<<52).Draw(t, "us")).UTC()
	})
)

// codec checks one signal type: Decode(Encode(s)) == s, and a listener of
// the type receives s from Send unchanged.
func codec[S any, P interface {
	*S
	bus.Signal
	Decode(string) error
}](t *rapid.T, s S) {
	var got S
	if err := P(&got).Decode(P(&s).Encode()); err != nil {
		t.Fatalf("Decode(%q): %v", P(&s).Encode(), err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip of %q: got %+v, want %+v", P(&s).Encode(), got, s)
	}
	b := bus.NewLocal()
	var heard []S
	bus.Listen[S, P](b, func(x S) { heard = append(heard, x) }, func(p string, err error) { t.Fatalf("listener refused %q: %v", p, err) })
	if err := bus.Send(t.Context(), b, P(&s)); err != nil {
		t.Fatal(err)
	}
	if len(heard) != 1 || !reflect.DeepEqual(heard[0], s) {
		t.Fatalf("listener heard %+v, want %+v", heard, s)
	}
}

// TestCodecsRoundTrip: every channel's codec gives back what it encoded
// (design: Typed bus signals), for generated values.
func TestCodecsRoundTrip(t *testing.T) {
	t.Run("TodoReady", rapid.MakeCheck(func(t *rapid.T) {
		codec(t, bus.TodoReady{TodoReady: domain.TodoReady{AgentID: genID.Draw(t, "agent"), TodoID: genID.Draw(t, "todo"),
			Queue: genName.Draw(t, "queue"), Title: genText.Draw(t, "title"), Kind: genName.Draw(t, "kind"), Source: genName.Draw(t, "source")}})
	}))
	t.Run("AgentSessions", rapid.MakeCheck(func(t *rapid.T) {
		var creds []string
		if n := rapid.IntRange(0, 4).Draw(t, "n"); n > 0 {
			creds = rapid.SliceOfN(genID, n, n).Draw(t, "creds")
		}
		codec(t, bus.AgentSessions{AgentID: genID.Draw(t, "agent"), Credentials: creds})
	}))
	t.Run("Presence", rapid.MakeCheck(func(t *rapid.T) {
		s := bus.Presence{AgentID: genID.Draw(t, "agent"), Cause: genCause.Draw(t, "cause")}
		if rapid.Bool().Draw(t, "origin?") {
			s.Origin = genID.Draw(t, "origin")
			if rapid.Bool().Draw(t, "config?") {
				s.Config = &bus.AgentConfig{Handle: genName.Draw(t, "handle"), Active: rapid.Bool().Draw(t, "active"),
					BillingMode: rapid.SampledFrom([]string{"", "api", "plan"}).Draw(t, "mode"), ToolClass: rapid.SampledFrom([]string{"", "claude-code"}).Draw(t, "class"),
					UpdatedAt: genTime.Draw(t, "updated")}
			}
		}
		codec(t, s)
	}))
	t.Run("PresenceTransition", rapid.MakeCheck(func(t *rapid.T) {
		codec(t, bus.PresenceTransition{AgentID: genID.Draw(t, "agent"), Presence: rapid.SampledFrom([]string{"in", "out"}).Draw(t, "p"),
			Reason: genReason.Draw(t, "reason")})
	}))
	t.Run("Team", rapid.MakeCheck(func(t *rapid.T) {
		s := bus.Team{Kind: rapid.SampledFrom([]string{bus.TeamToken, bus.TeamPerson, bus.TeamPersonUpdated, bus.TeamOwner}).Draw(t, "kind"), ID: genID.Draw(t, "id")}
		if s.Kind == bus.TeamOwner {
			s.OwnerID, s.Handle = genID.Draw(t, "owner"), genName.Draw(t, "handle")
		}
		codec(t, s)
	}))
	t.Run("LivenessClaims", rapid.MakeCheck(func(t *rapid.T) {
		n := rapid.IntRange(1, 20).Draw(t, "n")
		s := bus.LivenessClaims{Claims: make([]bus.LivenessClaim, n)}
		for i := range s.Claims {
			s.Claims[i] = bus.LivenessClaim{AgentID: genID.Draw(t, "agent"), Instance: genID.Draw(t, "instance"), Heartbeat: genTime.Draw(t, "hb")}
		}
		codec(t, s)
	}))
	t.Run("LivenessSync", rapid.MakeCheck(func(t *rapid.T) {
		codec(t, bus.LivenessSync{Instance: genID.Draw(t, "instance")})
	}))
	t.Run("Event", rapid.MakeCheck(func(t *rapid.T) {
		data, _ := json.Marshal(map[string]string{"agent": genName.Draw(t, "handle"), "state": genText.Draw(t, "state")})
		codec(t, bus.Event{ID: genID.Draw(t, "id"), Kind: genName.Draw(t, "kind"), At: genTime.Draw(t, "at"),
			AgentID: genID.Draw(t, "agent"), OwnerID: genID.Draw(t, "owner"), Data: data})
	}))
}

// TestClaimBatches: the batches hold every claim once, in order, each
// under the payload bound (a claim is never split), and each decodes to its
// claims.
func TestClaimBatches(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 60).Draw(t, "n")
		max := rapid.IntRange(40, 400).Draw(t, "max")
		var all bus.LivenessClaims
		for range n {
			all.Claims = append(all.Claims, bus.LivenessClaim{AgentID: genID.Draw(t, "agent"), Instance: genID.Draw(t, "instance"), Heartbeat: genTime.Draw(t, "hb")})
		}
		var joined []bus.LivenessClaim
		for _, b := range all.Batches(max) {
			p := b.Encode()
			if len(p) > max && len(b.Claims) > 1 {
				t.Fatalf("batch of %d claims is %d bytes, over %d", len(b.Claims), len(p), max)
			}
			var back bus.LivenessClaims
			if err := back.Decode(p); err != nil || !reflect.DeepEqual(back, b) {
				t.Fatalf("batch %q decodes to %+v (%v)", p, back, err)
			}
			joined = append(joined, b.Claims...)
		}
		if !reflect.DeepEqual(joined, all.Claims) {
			t.Fatalf("batches hold %d claims, want the %d in order", len(joined), len(all.Claims))
		}
	})
}

// TestWireFormsOfEarlierInstances: payloads as an instance of the previous
// release wrote them by hand (claim lines, the sync request, the event
// object) decode, so two versions can run side by side.
func TestWireFormsOfEarlierInstances(t *testing.T) {
	var c bus.LivenessClaims
	if err := c.Decode("a1:i1:1796029200000123\nb2:i2:1796029200000124"); err != nil || len(c.Claims) != 2 ||
		c.Claims[1] != (bus.LivenessClaim{AgentID: "b2", Instance: "i2", Heartbeat: time.UnixMicro(1796029200000124).UTC()}) {
		t.Fatalf("claims: %+v, %v", c, err)
	}
	var s bus.LivenessSync
	if err := s.Decode("?:i9"); err != nil || s.Instance != "i9" {
		t.Fatalf("sync: %+v, %v", s, err)
	}
	var p bus.Presence
	if err := p.Decode("a1:operator:i1"); err != nil || p != (bus.Presence{AgentID: "a1", Cause: "operator", Origin: "i1"}) {
		t.Fatalf("presence: %+v, %v", p, err)
	}
	// An earlier instance cut a configuration write's payload after the
	// cause: the origin it reads is not its own, so it refreshes by reading.
	cfg := bus.Presence{AgentID: "a1", Origin: "i1", Config: &bus.AgentConfig{Handle: "rev", Active: true, BillingMode: "plan", UpdatedAt: time.UnixMicro(5).UTC()}}
	if _, rest, _ := strings.Cut(cfg.Encode(), ":"); rest != ":i1:rev,1,plan,,5" {
		t.Fatalf("configuration signal after the agent id: %q", rest)
	}
	var later bus.Presence
	if err := later.Decode("a1::i1:rev,1,plan,,5,extra"); err != nil || later.Config != nil || later.Origin != "i1:rev,1,plan,,5,extra" {
		t.Fatalf("a configuration of another form: %+v, %v; want it kept in the origin", later, err)
	}
	const old = `{"id":"e1","kind":"agent.presence_changed","at":"2026-11-30T09:00:00.000123Z","agent_id":"a1","owner_id":"p1","data":{"agent":"rev","state":"online"}}`
	var e bus.Event
	if err := e.Decode(old); err != nil {
		t.Fatal(err)
	}
	if e.Encode() != old {
		t.Fatalf("event re-encodes as\n%s\nwant\n%s", e.Encode(), old)
	}
	for _, bad := range []string{"", "{", `{"kind":"k"}`, strings.Repeat("x", 10)} {
		if e.Decode(bad) == nil {
			t.Errorf("Event.Decode(%q) accepted it", bad)
		}
	}
}
