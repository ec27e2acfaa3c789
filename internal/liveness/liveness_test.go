package liveness

import (
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)

func TestStateAt(t *testing.T) {
	const timeout = 45 * time.Second
	cases := []struct {
		name     string
		reported string
		last     time.Time
		now      time.Time
		want     string
	}{
		{"just received", StateOnline, t0, t0, StateOnline},
		{"degraded fresh", StateDegraded, t0, t0.Add(10 * time.Second), StateDegraded},
		{"1 µs before the deadline", StateOnline, t0, t0.Add(timeout - time.Microsecond), StateOnline},
		{"1 ns before the deadline", StateDegraded, t0, t0.Add(timeout - time.Nanosecond), StateDegraded},
		{"exactly at the deadline", StateOnline, t0, t0.Add(timeout), StateOffline},
		{"degraded at the deadline", StateDegraded, t0, t0.Add(timeout), StateOffline},
		{"after the deadline", StateOnline, t0, t0.Add(time.Hour), StateOffline},
		{"heartbeat from the future", StateOnline, t0.Add(time.Minute), t0, StateOnline},
		{"never heartbeated", StateOnline, time.Time{}, t0, StateUnknown},
		{"unknown reported value", "busy", t0, t0, StateUnknown},
		{"unknown reported value expired", "busy", t0, t0.Add(timeout), StateOffline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := StateAt(tc.reported, tc.last, timeout, tc.now); got != tc.want {
				t.Fatalf("StateAt = %s, want %s", got, tc.want)
			}
		})
	}
	if d := Deadline(t0, timeout); !d.Equal(t0.Add(timeout)) {
		t.Fatalf("Deadline = %v", d)
	}
	// Monotone in another time zone too: the instant decides, not the zone.
	if got := StateAt(StateOnline, t0.In(time.FixedZone("x", 3600)), timeout, t0.Add(timeout)); got != StateOffline {
		t.Fatalf("zone: %s", got)
	}
}

// TestStateAtNeverFlaps: heartbeats 1 s apart for a minute keep the agent
// online at every microsecond-granular probe between them.
func TestStateAtNeverFlaps(t *testing.T) {
	const timeout = 45 * time.Second
	last := t0
	for s := 0; s < 60; s++ {
		for _, d := range []time.Duration{0, time.Microsecond, 500 * time.Millisecond, time.Second - time.Microsecond} {
			if got := StateAt(StateOnline, last, timeout, last.Add(d)); got != StateOnline {
				t.Fatalf("at %v after heartbeat %d: %s", d, s, got)
			}
		}
		last = last.Add(time.Second)
	}
}

func TestStartRule(t *testing.T) {
	const (
		timeout = 45 * time.Second
		persist = 60 * time.Second
	)
	start := t0
	at := func(d time.Duration) *time.Time { x := start.Add(-d); return &x }
	cases := []struct {
		name      string
		stored    string
		last      *time.Time
		wantState string
		wantDL    time.Time
	}{
		{"online, recent", StateOnline, at(10 * time.Second), StateOnline, start.Add(timeout)},
		{"degraded, recent", StateDegraded, at(time.Second), StateDegraded, start.Add(timeout)},
		{"online, older than timeout but within the lag", StateOnline, at(100 * time.Second), StateOnline, start.Add(timeout)},
		{"online, 1 µs inside timeout+persist", StateOnline, at(timeout + persist - time.Microsecond), StateOnline, start.Add(timeout)},
		{"online, exactly timeout+persist old", StateOnline, at(timeout + persist), StateOffline, time.Time{}},
		{"online, much older", StateOnline, at(24 * time.Hour), StateOffline, time.Time{}},
		{"online, no last heartbeat", StateOnline, nil, StateOffline, time.Time{}},
		{"degraded, no last heartbeat", StateDegraded, nil, StateOffline, time.Time{}},
		{"online, last heartbeat in the future", StateOnline, at(-time.Hour), StateOnline, start.Add(timeout)},
		{"stored offline", StateOffline, at(time.Second), StateOffline, time.Time{}},
		{"stored unknown", StateUnknown, nil, StateUnknown, time.Time{}},
		{"stored empty", "", nil, StateUnknown, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, dl := StartRule(tc.stored, tc.last, timeout, persist, start)
			if st != tc.wantState || !dl.Equal(tc.wantDL) {
				t.Fatalf("StartRule = (%s, %v), want (%s, %v)", st, dl, tc.wantState, tc.wantDL)
			}
		})
	}
}

func TestReportedChanged(t *testing.T) {
	cases := []struct {
		name         string
		stored, next Reported
		want         bool
	}{
		{"both nil", Reported{}, Reported{}, false},
		{"equal values, different pointers", Reported{sp("api"), sp("cli")}, Reported{sp("api"), sp("cli")}, false},
		{"first report of the mode", Reported{}, Reported{BillingMode: sp("api")}, true},
		{"mode stops being reported", Reported{BillingMode: sp("api")}, Reported{}, true},
		{"mode changes", Reported{BillingMode: sp("api")}, Reported{BillingMode: sp("subscription")}, true},
		{"first report of the class", Reported{BillingMode: sp("api")}, Reported{BillingMode: sp("api"), ToolClass: sp("cli")}, true},
		{"class stops being reported", Reported{ToolClass: sp("cli")}, Reported{}, true},
		{"class changes", Reported{ToolClass: sp("cli")}, Reported{ToolClass: sp("ide")}, true},
		{"both change", Reported{sp("a"), sp("b")}, Reported{sp("c"), sp("d")}, true},
		{"empty string is a value", Reported{}, Reported{BillingMode: sp("")}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReportedChanged(tc.stored, tc.next); got != tc.want {
				t.Fatalf("ReportedChanged = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAuditData(t *testing.T) {
	ev := &BillingEvidence{KeyType: "oauth", Method: "credentials_file"}
	cases := []struct {
		name     string
		old, new Reported
		ev       *BillingEvidence
		want     map[string]string
	}{
		{"first report", Reported{}, Reported{sp("subscription"), sp("claude_code")}, ev,
			map[string]string{"billing_mode_new": "subscription", "tool_class_new": "claude_code", "key_type": "oauth", "method": "credentials_file"}},
		{"mode change, class unchanged", Reported{sp("api"), sp("cli")}, Reported{sp("subscription"), sp("cli")}, ev,
			map[string]string{"billing_mode_old": "api", "billing_mode_new": "subscription", "tool_class_old": "cli", "tool_class_new": "cli",
				"key_type": "oauth", "method": "credentials_file"}},
		{"stops reporting, no evidence", Reported{sp("api"), nil}, Reported{}, nil,
			map[string]string{"billing_mode_old": "api"}},
		{"nothing at all", Reported{}, Reported{}, nil, map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AuditData(tc.old, tc.new, tc.ev); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("AuditData = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPublishPair(t *testing.T) {
	cases := []struct {
		name string
		p, q PublishPair
		want bool
	}{
		{"same state, both nil", PublishPair{StateOnline, nil}, PublishPair{StateOnline, nil}, true},
		{"same state, equal modes", PublishPair{StateOnline, sp("api")}, PublishPair{StateOnline, sp("api")}, true},
		{"state differs", PublishPair{StateOnline, sp("api")}, PublishPair{StateDegraded, sp("api")}, false},
		{"offline keeps the mode", PublishPair{StateOffline, sp("api")}, PublishPair{StateOffline, sp("api")}, true},
		{"mode appears", PublishPair{StateOnline, nil}, PublishPair{StateOnline, sp("api")}, false},
		{"mode disappears", PublishPair{StateOnline, sp("api")}, PublishPair{StateOnline, nil}, false},
		{"mode differs", PublishPair{StateOnline, sp("api")}, PublishPair{StateOnline, sp("subscription")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Equal(tc.q); got != tc.want {
				t.Fatalf("Equal = %v, want %v", got, tc.want)
			}
			if got := tc.q.Equal(tc.p); got != tc.want {
				t.Fatalf("Equal is not symmetric")
			}
		})
	}
}

func TestSameReadiness(t *testing.T) {
	a := ReadinessEntry{Queue: "a", Ready: true}
	b := ReadinessEntry{Queue: "b", Ready: false, Reason: "no_credentials"}
	b2 := ReadinessEntry{Queue: "b", Ready: false}
	c := ReadinessEntry{Queue: "c", Ready: true}
	cases := []struct {
		name string
		x, y []ReadinessEntry
		want bool
	}{
		{"both empty", nil, []ReadinessEntry{}, true},
		{"same order", []ReadinessEntry{a, b}, []ReadinessEntry{a, b}, true},
		{"other order", []ReadinessEntry{a, b}, []ReadinessEntry{b, a}, true},
		{"reason differs", []ReadinessEntry{a, b}, []ReadinessEntry{a, b2}, false},
		{"ready differs", []ReadinessEntry{a}, []ReadinessEntry{{Queue: "a"}}, false},
		{"queue differs", []ReadinessEntry{a, b}, []ReadinessEntry{c, b}, false},
		{"length differs", []ReadinessEntry{a}, []ReadinessEntry{a, b}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameReadiness(tc.x, tc.y); got != tc.want {
				t.Fatalf("SameReadiness = %v, want %v", got, tc.want)
			}
		})
	}
}
