package bus_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
)

// roundTrip sends s on a local bus and returns what a listener of its type
// received, and the payloads that did not decode.
func roundTrip[S any, P interface {
	*S
	bus.Signal
	Decode(string) error
}](t *testing.T, s S) (got []S, bad []string) {
	t.Helper()
	b := bus.NewLocal()
	bus.Listen[S, P](b, func(x S) { got = append(got, x) }, func(p string, _ error) { bad = append(bad, p) })
	if err := bus.Send(t.Context(), b, P(&s)); err != nil {
		t.Fatal(err)
	}
	return got, bad
}

// TestSignalsRoundTrip: every signal decodes to what was encoded, and its
// wire form is the documented one.
func TestSignalsRoundTrip(t *testing.T) {
	hb := time.Date(2026, 11, 30, 9, 0, 0, 123000, time.UTC)
	check := func(name string, got, want any, wire, wantWire string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, want %+v", name, got, want)
		}
		if wire != wantWire {
			t.Errorf("%s: wire %q, want %q", name, wire, wantWire)
		}
	}
	tr := bus.TodoReady{TodoReady: domain.TodoReady{AgentID: "a", TodoID: "t", Queue: "q", Title: "x:y"}}
	g1, _ := roundTrip(t, tr)
	check("TodoReady", g1, []bus.TodoReady{tr}, tr.Encode(), `{"agent_id":"a","todo_id":"t","queue":"q","title":"x:y"}`)
	as := bus.AgentSessions{AgentID: "a", Credentials: []string{"c1", "c2"}}
	g2, _ := roundTrip(t, as)
	check("AgentSessions", g2, []bus.AgentSessions{as}, as.Encode(), "a:c1,c2")
	all := bus.AgentSessions{AgentID: "a"}
	g3, _ := roundTrip(t, all)
	check("AgentSessions all", g3, []bus.AgentSessions{all}, all.Encode(), "a")
	pr := bus.Presence{AgentID: "a", Cause: "readiness"}
	g4, _ := roundTrip(t, pr)
	check("Presence", g4, []bus.Presence{pr}, pr.Encode(), "a:readiness")
	po := bus.Presence{AgentID: "a", Cause: "operator", Origin: "i1"}
	g4o, _ := roundTrip(t, po)
	check("Presence with origin", g4o, []bus.Presence{po}, po.Encode(), "a:operator:i1")
	pt := bus.PresenceTransition{AgentID: "a", Presence: "in", Reason: "shift_start"}
	g5, _ := roundTrip(t, pt)
	check("PresenceTransition", g5, []bus.PresenceTransition{pt}, pt.Encode(), "a:in:shift_start")
	tm := bus.Team{Kind: bus.TeamOwner, ID: "a", OwnerID: "p", Handle: "h:x"}
	g6, _ := roundTrip(t, tm)
	check("Team owner", g6, []bus.Team{tm}, tm.Encode(), "owner:a:p:h:x")
	tk := bus.Team{Kind: bus.TeamToken, ID: "t1"}
	g7, _ := roundTrip(t, tk)
	check("Team token", g7, []bus.Team{tk}, tk.Encode(), "token:t1")
	lc := bus.LivenessClaims{Claims: []bus.LivenessClaim{{AgentID: "a", Instance: "i1", Heartbeat: hb}, {AgentID: "b", Instance: "i1", Heartbeat: hb}}}
	g8, bad := roundTrip(t, lc)
	check("LivenessClaims", g8, []bus.LivenessClaims{lc}, lc.Encode(), "a:i1:1796029200000123\nb:i1:1796029200000123")
	if len(bad) != 0 {
		t.Errorf("claims refused: %q", bad)
	}
	ls := bus.LivenessSync{Instance: "i2"}
	g9, _ := roundTrip(t, ls)
	check("LivenessSync", g9, []bus.LivenessSync{ls}, ls.Encode(), "?:i2")
}

// TestListenRefusesOthers: a listener gets only the payloads its type
// decodes; the others go to bad (two signal types share ChannelLiveness).
func TestListenRefusesOthers(t *testing.T) {
	b := bus.NewLocal()
	var claims []bus.LivenessClaims
	var bad []string
	bus.Listen(b, func(c bus.LivenessClaims) { claims = append(claims, c) }, func(p string, _ error) { bad = append(bad, p) })
	if err := bus.Send(t.Context(), b, bus.LivenessSync{Instance: "i"}); err != nil {
		t.Fatal(err)
	}
	if len(claims) != 0 || !reflect.DeepEqual(bad, []string{"?:i"}) {
		t.Fatalf("claims %v bad %q, want none and the sync request", claims, bad)
	}
	for _, p := range []string{"", ":x"} {
		var s bus.Presence
		if s.Decode(p) == nil {
			t.Errorf("Presence.Decode(%q) accepted a payload without an agent", p)
		}
	}
	var pt bus.PresenceTransition
	if pt.Decode("a:in") == nil {
		t.Error("PresenceTransition.Decode accepted two parts")
	}
}
