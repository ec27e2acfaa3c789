package liveness

import (
	"reflect"
	"testing"
	"time"
)

func tp(t time.Time) *time.Time { return &t }

func TestAssess(t *testing.T) {
	const alertAfter = 10 * time.Minute
	now := t0
	unknownEv := &BillingEvidence{KeyType: KeyTypeUnknown, Method: "none"}
	oauthEv := &BillingEvidence{KeyType: "oauth", Method: "credentials_file"}
	base := AssessInputs{State: StateOnline, BillingMode: "subscription", ToolClass: "claude_code", AlertAfter: alertAfter}
	with := func(f func(*AssessInputs)) AssessInputs { in := base; f(&in); return in }

	cases := []struct {
		name         string
		in           AssessInputs
		warnings     []string
		differs      bool
		since        *time.Time // want MismatchSince
		modeSince    *time.Time // want ModeMismatchSince
		age          float64
		age5MinLater float64
	}{
		{name: "nothing reported", in: base, warnings: []string{}},
		{name: "all equal", in: with(func(in *AssessInputs) {
			in.ReportedBillingMode, in.ReportedToolClass, in.Evidence = sp("subscription"), sp("claude_code"), oauthEv
		}), warnings: []string{}},
		{name: "mode mismatch begins: no warning yet", in: with(func(in *AssessInputs) { in.ReportedBillingMode = sp("api") }),
			warnings: []string{}, differs: true, since: tp(now), modeSince: tp(now), age: 0, age5MinLater: 300},
		{name: "mode mismatch held exactly alertAfter: no warning", in: with(func(in *AssessInputs) {
			in.ReportedBillingMode = sp("api")
			in.MismatchSince, in.ModeMismatchSince = tp(now.Add(-alertAfter)), tp(now.Add(-alertAfter))
		}), warnings: []string{}, differs: true, since: tp(now.Add(-alertAfter)), modeSince: tp(now.Add(-alertAfter)), age: 600, age5MinLater: 900},
		{name: "mode mismatch held 1 µs longer: warning", in: with(func(in *AssessInputs) {
			in.ReportedBillingMode = sp("api")
			in.MismatchSince = tp(now.Add(-alertAfter - time.Microsecond))
			in.ModeMismatchSince = in.MismatchSince
		}), warnings: []string{WarnBillingModeMismatch}, differs: true,
			since: tp(now.Add(-alertAfter - time.Microsecond)), modeSince: tp(now.Add(-alertAfter - time.Microsecond)),
			age: 600.000001, age5MinLater: 900.000001},
		{name: "mode mismatch timed from its own start, not from an earlier difference", in: with(func(in *AssessInputs) {
			in.ReportedBillingMode, in.Evidence = sp("api"), unknownEv
			in.MismatchSince = tp(now.Add(-time.Hour)) // evidence unknown since an hour
			in.ModeMismatchSince = nil                 // the mode just changed
		}), warnings: []string{WarnBillingEvidenceUnknown}, differs: true, since: tp(now.Add(-time.Hour)), modeSince: tp(now),
			age: 3600, age5MinLater: 3900},
		{name: "supported list without a mode: at once", in: with(func(in *AssessInputs) {
			in.ReportedBillingModesSupported = []string{"api", "subscription"}
		}), warnings: []string{WarnBillingModeUnsupported}, differs: true, since: tp(now), age5MinLater: 300},
		{name: "empty supported list without a mode counts", in: with(func(in *AssessInputs) {
			in.ReportedBillingModesSupported = []string{}
		}), warnings: []string{WarnBillingModeUnsupported}, differs: true, since: tp(now), age5MinLater: 300},
		{name: "supported list with an equal mode", in: with(func(in *AssessInputs) {
			in.ReportedBillingMode, in.ReportedBillingModesSupported = sp("subscription"), []string{"api", "subscription"}
		}), warnings: []string{}},
		{name: "evidence unknown: at once", in: with(func(in *AssessInputs) {
			in.ReportedBillingMode, in.Evidence = sp("subscription"), unknownEv
		}), warnings: []string{WarnBillingEvidenceUnknown}, differs: true, since: tp(now), age5MinLater: 300},
		{name: "tool class mismatch is a warning, not a difference", in: with(func(in *AssessInputs) {
			in.ReportedToolClass = sp("codex")
		}), warnings: []string{WarnToolClassMismatch}},
		{name: "all four, fixed order", in: with(func(in *AssessInputs) {
			in.State = StateDegraded
			in.ReportedBillingMode, in.ReportedToolClass, in.Evidence = sp("api"), sp("codex"), unknownEv
			in.MismatchSince, in.ModeMismatchSince = tp(now.Add(-time.Hour)), tp(now.Add(-time.Hour))
		}), warnings: []string{WarnBillingModeMismatch, WarnBillingEvidenceUnknown, WarnToolClassMismatch}, differs: true,
			since: tp(now.Add(-time.Hour)), modeSince: tp(now.Add(-time.Hour)), age: 3600, age5MinLater: 3900},
		{name: "unsupported and unknown evidence and tool class", in: with(func(in *AssessInputs) {
			in.ReportedBillingModesSupported, in.Evidence, in.ReportedToolClass = []string{"api"}, unknownEv, sp("codex")
		}), warnings: []string{WarnBillingModeUnsupported, WarnBillingEvidenceUnknown, WarnToolClassMismatch}, differs: true,
			since: tp(now), age5MinLater: 300},
		{name: "difference ends: times reset", in: with(func(in *AssessInputs) {
			in.ReportedBillingMode = sp("subscription")
			in.MismatchSince, in.ModeMismatchSince = tp(now.Add(-time.Hour)), tp(now.Add(-time.Hour))
		}), warnings: []string{}},
		{name: "offline: nothing", in: with(func(in *AssessInputs) {
			in.State = StateOffline
			in.ReportedBillingMode, in.ReportedToolClass, in.Evidence = sp("api"), sp("codex"), unknownEv
			in.MismatchSince, in.ModeMismatchSince = tp(now.Add(-time.Hour)), tp(now.Add(-time.Hour))
		}), warnings: []string{}},
		{name: "unknown: nothing", in: with(func(in *AssessInputs) {
			in.State = StateUnknown
			in.ReportedBillingModesSupported, in.Evidence = []string{"api"}, unknownEv
		}), warnings: []string{}},
		{name: "no configured mode: no mode mismatch, no unsupported", in: with(func(in *AssessInputs) {
			in.BillingMode = ""
			in.ReportedBillingMode = sp("api")
			in.MismatchSince, in.ModeMismatchSince = tp(now.Add(-time.Hour)), tp(now.Add(-time.Hour))
		}), warnings: []string{}},
		{name: "no configured mode, supported list", in: with(func(in *AssessInputs) {
			in.BillingMode, in.ReportedBillingModesSupported = "", []string{"api"}
		}), warnings: []string{}},
		{name: "no configured mode, evidence unknown still counts", in: with(func(in *AssessInputs) {
			in.BillingMode, in.Evidence = "", unknownEv
		}), warnings: []string{WarnBillingEvidenceUnknown}, differs: true, since: tp(now), age5MinLater: 300},
		{name: "no configured tool class", in: with(func(in *AssessInputs) {
			in.ToolClass, in.ReportedToolClass = "", sp("codex")
		}), warnings: []string{}},
		{name: "alertAfter zero: warns once any time has passed", in: with(func(in *AssessInputs) {
			in.AlertAfter = 0
			in.ReportedBillingMode = sp("api")
			in.MismatchSince, in.ModeMismatchSince = tp(now.Add(-time.Second)), tp(now.Add(-time.Second))
		}), warnings: []string{WarnBillingModeMismatch}, differs: true, since: tp(now.Add(-time.Second)), modeSince: tp(now.Add(-time.Second)),
			age: 1, age5MinLater: 301},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Assess(tc.in, now)
			if !reflect.DeepEqual(a.Warnings, tc.warnings) {
				t.Errorf("Warnings = %#v, want %#v", a.Warnings, tc.warnings)
			}
			if a.Differs != tc.differs {
				t.Errorf("Differs = %v, want %v", a.Differs, tc.differs)
			}
			if !sameTime(a.MismatchSince, tc.since) {
				t.Errorf("MismatchSince = %v, want %v", a.MismatchSince, tc.since)
			}
			if !sameTime(a.ModeMismatchSince, tc.modeSince) {
				t.Errorf("ModeMismatchSince = %v, want %v", a.ModeMismatchSince, tc.modeSince)
			}
			if got := a.MismatchAge(now); got != tc.age {
				t.Errorf("MismatchAge(now) = %v, want %v", got, tc.age)
			}
			if got := a.MismatchAge(now.Add(5 * time.Minute)); got != tc.age5MinLater {
				t.Errorf("MismatchAge(now+5m) = %v, want %v", got, tc.age5MinLater)
			}
		})
	}
}

// TestAssessTracking walks a mismatch through time the way the tracker
// carries the times from one Assess to the next.
func TestAssessTracking(t *testing.T) {
	in := AssessInputs{State: StateOnline, BillingMode: "subscription", ReportedBillingMode: sp("api"), AlertAfter: 10 * time.Minute}
	var warnedAt time.Time
	for s := 0; s <= 15*60; s += 15 {
		now := t0.Add(time.Duration(s) * time.Second)
		a := Assess(in, now)
		if !a.Differs || !a.MismatchSince.Equal(t0) {
			t.Fatalf("at %ds: %+v", s, a)
		}
		if len(a.Warnings) > 0 && warnedAt.IsZero() {
			warnedAt = now
		}
		in.MismatchSince, in.ModeMismatchSince = a.MismatchSince, a.ModeMismatchSince
	}
	if want := t0.Add(10*time.Minute + 15*time.Second); !warnedAt.Equal(want) {
		t.Fatalf("first warning at %v, want %v", warnedAt, want)
	}
	// Going offline ends the difference; coming back starts it again.
	in.State = StateOffline
	a := Assess(in, t0.Add(time.Hour))
	if a.Differs || a.MismatchSince != nil || a.MismatchAge(t0.Add(time.Hour)) != 0 {
		t.Fatalf("offline: %+v", a)
	}
	in.State, in.MismatchSince, in.ModeMismatchSince = StateOnline, a.MismatchSince, a.ModeMismatchSince
	back := t0.Add(2 * time.Hour)
	if a := Assess(in, back); !a.MismatchSince.Equal(back) || len(a.Warnings) != 0 {
		t.Fatalf("back online: %+v", a)
	}
}

func TestMismatchAgeNeverNegative(t *testing.T) {
	a := Assessment{MismatchSince: tp(t0)}
	if got := a.MismatchAge(t0.Add(-time.Second)); got != 0 {
		t.Fatalf("age before the start = %v", got)
	}
	if got := (Assessment{}).MismatchAge(t0); got != 0 {
		t.Fatalf("age without a difference = %v", got)
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
