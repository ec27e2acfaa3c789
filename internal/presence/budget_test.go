package presence

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rollcall/rollcall/internal/domain"
)

// wantForbidden checks a forbidden *domain.Error with reason.
func wantForbidden(t testing.TB, err error, reason string) {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) || de.Code != domain.CodeForbidden || de.Reason != reason || de.Detail == "" {
		t.Fatalf("error %v, want forbidden with reason %s", err, reason)
	}
}

// TestClockInOwnerBeatsAgent: a live operator out override is never cleared
// by the agent — forbidden, reason operator_override, nothing changes —
// with or without a shift, inside or outside it; an operator's in
// override is kept.
func TestClockInOwnerBeatsAgent(t *testing.T) {
	sh := mustShift(t, weekdayMornings)
	set := utc("2026-01-05T08:00:00Z") // Monday, before the shift
	for _, tc := range []struct {
		name string
		in   Inputs
		now  time.Time
	}{
		{"no shift", Inputs{Override: Out, OverrideSetAt: set, OverrideBy: ByOperator("p1")}, utc("2026-01-07T10:00:00Z")},
		{"off shift", Inputs{Shift: sh, Override: Out, OverrideSetAt: set, OverrideBy: ByOperator("p1")}, utc("2026-01-05T08:30:00Z")},
		{"inside the shift", Inputs{Shift: sh, Override: Out, OverrideSetAt: utc("2026-01-05T09:30:00Z"), OverrideBy: ByOperator("p1")}, utc("2026-01-05T10:00:00Z")},
		{"with an end", Inputs{Override: Out, OverrideUntil: ptr(utc("2026-01-05T12:00:00Z")), OverrideSetAt: set, OverrideBy: ByOperator("p1")}, utc("2026-01-05T11:59:00Z")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Budget{Cap: 8 * time.Hour, Stretch: utc("2026-01-05T09:00:00Z"), Used: time.Hour}
			ch, nb, err := ClockIn(tc.in, b, time.Hour, tc.now)
			wantForbidden(t, err, ReasonOperatorOverride)
			if ch.Action != Keep || nb != b {
				t.Fatalf("change %+v budget %+v, want nothing changed", ch, nb)
			}
			if p, src, _ := Effective(tc.in, tc.now); p != Out || src != SourceOperator {
				t.Fatalf("effective (%s, %s), want the operator's out", p, src)
			}
		})
	}
	t.Run("operator in override is kept, no budget used", func(t *testing.T) {
		in := Inputs{Shift: sh, Override: In, OverrideSetAt: utc("2026-01-05T14:00:00Z"), OverrideBy: ByOperator("p1")}
		ch, nb, err := ClockIn(in, DefaultBudget(), 2*time.Hour, utc("2026-01-05T15:00:00Z"))
		if err != nil || ch.Action != Keep || nb != DefaultBudget() {
			t.Fatalf("ClockIn = %+v %+v %v, want keep", ch, nb, err)
		}
	})
	t.Run("an operator out override that has ended does not bind", func(t *testing.T) {
		in := Inputs{Override: Out, OverrideUntil: ptr(utc("2026-01-05T12:00:00Z")), OverrideSetAt: set, OverrideBy: ByOperator("p1")}
		ch, _, err := ClockIn(in, DefaultBudget(), time.Hour, utc("2026-01-05T12:00:00Z"))
		if err != nil || ch.Action != Keep {
			t.Fatalf("ClockIn = %+v %v, want keep (already in by default, columns untouched)", ch, err)
		}
	})
}

// TestClockInCapPerStretch: the agent's own in overrides of one off-shift
// stretch together cover at most the cap; re-calling cannot extend it; the
// next stretch starts afresh; the owner's cap 0 means never.
func TestClockInCapPerStretch(t *testing.T) {
	sh := mustShift(t, weekdayMornings)
	// Monday 13:00 → Tuesday 09:00 is one off-shift stretch (20 h).
	stretch := utc("2026-01-06T09:00:00Z")
	type step struct {
		at      string
		verb    string // in, out
		d       time.Duration
		until   string // the override's end after the step, "" = n/a
		used    time.Duration
		reason  string // forbidden reason, "" = allowed
		keep    bool
		stretch time.Time
	}
	for _, tc := range []struct {
		name  string
		cap   time.Duration
		steps []step
	}{
		{"8h, re-calls cannot extend", 8 * time.Hour, []step{
			{at: "2026-01-05T14:00:00Z", verb: "in", d: 8 * time.Hour, until: "2026-01-05T22:00:00Z", used: 8 * time.Hour},
			{at: "2026-01-05T15:00:00Z", verb: "in", d: 8 * time.Hour, keep: true, until: "2026-01-05T22:00:00Z", used: 8 * time.Hour},
			{at: "2026-01-05T21:59:00Z", verb: "in", d: time.Hour, keep: true, until: "2026-01-05T22:00:00Z", used: 8 * time.Hour},
			{at: "2026-01-05T22:00:00Z", verb: "in", d: time.Hour, reason: ReasonSelfClockInCap, used: 8 * time.Hour},
			{at: "2026-01-06T08:59:00Z", verb: "in", d: time.Minute, reason: ReasonSelfClockInCap, used: 8 * time.Hour},
		}},
		{"out and back in: spent time stays spent", 8 * time.Hour, []step{
			{at: "2026-01-05T14:00:00Z", verb: "in", d: 8 * time.Hour, until: "2026-01-05T22:00:00Z", used: 8 * time.Hour},
			{at: "2026-01-05T15:00:00Z", verb: "out"},
			{at: "2026-01-05T16:00:00Z", verb: "in", d: time.Hour, reason: ReasonSelfClockInCap, used: 8 * time.Hour},
		}},
		{"small calls add up to the cap, the last one shortened", 3 * time.Hour, []step{
			{at: "2026-01-05T14:00:00Z", verb: "in", d: 2 * time.Hour, until: "2026-01-05T16:00:00Z", used: 2 * time.Hour},
			// Replaces the live one: its unexpired hour comes back, 2 h granted.
			{at: "2026-01-05T15:00:00Z", verb: "in", d: 8 * time.Hour, until: "2026-01-05T17:00:00Z", used: 3 * time.Hour},
			{at: "2026-01-05T17:00:00Z", verb: "in", d: time.Hour, reason: ReasonSelfClockInCap, used: 3 * time.Hour},
		}},
		{"a gap between calls", 3 * time.Hour, []step{
			{at: "2026-01-05T14:00:00Z", verb: "in", d: 2 * time.Hour, until: "2026-01-05T16:00:00Z", used: 2 * time.Hour},
			{at: "2026-01-05T20:00:00Z", verb: "in", d: 2 * time.Hour, until: "2026-01-05T21:00:00Z", used: 3 * time.Hour},
		}},
		{"ended by the shift start, then the next stretch starts afresh", 8 * time.Hour, []step{
			{at: "2026-01-06T04:00:00Z", verb: "in", d: 8 * time.Hour, until: "2026-01-06T09:00:00Z", used: 5 * time.Hour},
			{at: "2026-01-06T13:00:00Z", verb: "in", d: 2 * time.Hour, until: "2026-01-06T15:00:00Z", used: 2 * time.Hour, stretch: utc("2026-01-07T09:00:00Z")},
		}},
		{"cap 0: never outside the shift", 0, []step{
			{at: "2026-01-05T14:00:00Z", verb: "in", d: time.Minute, reason: ReasonSelfClockInCap},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Inputs{Shift: sh}
			b := Budget{Cap: tc.cap}
			for i, s := range tc.steps {
				now := utc(s.at)
				if s.verb == "out" {
					in = ClockOut(in, now).Apply(in)
					continue
				}
				ch, nb, err := ClockIn(in, b, s.d, now)
				if s.reason != "" {
					wantForbidden(t, err, s.reason)
					if ch.Action != Keep || nb != b {
						t.Fatalf("step %d: forbidden but changed %+v %+v", i, ch, nb)
					}
				} else if err != nil {
					t.Fatalf("step %d: %v", i, err)
				} else {
					if s.keep != (ch.Action == Keep) {
						t.Fatalf("step %d: action %v, keep want %v", i, ch.Action, s.keep)
					}
					in, b = ch.Apply(in), nb
					if _, until := OverrideLive(in, now); until == nil || !until.Equal(utc(s.until)) {
						t.Fatalf("step %d: override until %v, want %s", i, until, s.until)
					}
					if p, src, _ := Effective(in, now); p != In || src != SourceAgent {
						t.Fatalf("step %d: (%s, %s), want in by the agent", i, p, src)
					}
				}
				want := stretch
				if !s.stretch.IsZero() {
					want = s.stretch
				}
				if s.reason == "" && !b.Stretch.Equal(want) {
					t.Fatalf("step %d: ledger of stretch %s, want %s", i, b.Stretch, want)
				}
				if b.Used != s.used {
					t.Fatalf("step %d: used %s, want %s", i, b.Used, s.used)
				}
			}
		})
	}
}

func TestParseSelfClockInCap(t *testing.T) {
	for s, want := range map[string]time.Duration{"8h": 8 * time.Hour, "0": 0, "0s": 0, "90m": 90 * time.Minute, "168h": MaxSelfClockInCap} {
		if got, err := ParseSelfClockInCap(s); err != nil || got != want {
			t.Errorf("ParseSelfClockInCap(%q) = %v, %v", s, got, err)
		}
		if got, _ := ParseSelfClockInCap(FormatCap(want)); got != want {
			t.Errorf("FormatCap(%s) = %q does not parse back", want, FormatCap(want))
		}
	}
	for _, s := range []string{"", "-1h", "169h", "8 hours", "1.5s", "1ms"} {
		_, err := ParseSelfClockInCap(s)
		var de *domain.Error
		if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Pointer != "/self_clock_in_cap" {
			t.Errorf("ParseSelfClockInCap(%q) = %v, want invalid_argument at /self_clock_in_cap", s, err)
		}
	}
}

// TestPropSelfClockInCapBinds: whatever the agent calls (clock_in with any
// for, clock_out), whenever, and whatever the owner does meanwhile (out,
// in, clear), the time the agent's own in overrides keep it in adds up, per
// off-shift stretch, to at most the cap; an operator's live out override is
// never cleared by clock_in (forbidden, nothing changes).
func TestPropSelfClockInCapBinds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sh, _, loc, _ := genParsedShift(t)
		capMin := rapid.SampledFrom([]int64{0, 1, 30, 60, 180, 480, 720}).Draw(t, "capMin")
		b := Budget{Cap: time.Duration(capMin) * time.Minute}
		in := Inputs{Shift: sh}
		now := genTime(t, loc, "start")
		covered := map[time.Time]time.Duration{} // stretch end → agent-in time
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(t, "verb") {
			case 0, 1, 2, 3, 4, 5:
				d := time.Duration(rapid.Int64Range(1, int64(MaxClockIn/time.Minute)).Draw(t, "forMin")) * time.Minute
				ch, nb, err := ClockIn(in, b, d, now)
				if operatorOutLive(in, now) {
					if domain.CodeOf(err) != domain.CodeForbidden || ch.Action != Keep || nb != b {
						t.Fatalf("clock_in under the operator's out: %+v %+v %v", ch, nb, err)
					}
					continue
				}
				if err != nil {
					if domain.CodeOf(err) != domain.CodeForbidden {
						t.Fatalf("clock_in: %v", err)
					}
					continue
				}
				if nb.Used > nb.Cap {
					t.Fatalf("ledger used %s over the cap %s", nb.Used, nb.Cap)
				}
				in, b = ch.Apply(in), nb
			case 6:
				in = ClockOut(in, now).Apply(in)
			case 7:
				ch, _ := OperatorOverride(in, "p1", Out, nil, now)
				in = ch.Apply(in)
			case 8:
				ch, _ := OperatorOverride(in, "p1", In, nil, now)
				in = ch.Apply(in)
			case 9:
				in = Change{Action: Clear}.Apply(in)
			}
			next := now.Add(time.Duration(rapid.Int64Range(0, 6*60).Draw(t, "advanceMin")) * time.Minute)
			// Measure [now, next) piecewise: the answer changes only at
			// Effective's until or the override's end.
			for at := now; at.Before(next); {
				p, src, until := Effective(in, at)
				end := next
				if until != nil && until.Before(end) {
					end = *until
				}
				// The source can change without the presence (an own in
				// override ending where the shift starts): split there too.
				if live, oe := OverrideLive(in, at); live && oe != nil && oe.Before(end) {
					end = *oe
				}
				if p == In && src == SourceAgent {
					key, _ := sh.NextStart(at)
					covered[key] += end.Sub(at)
					if covered[key] > b.Cap {
						t.Fatalf("stretch ending %s: the agent kept itself in for %s, over the cap %s", key, covered[key], b.Cap)
					}
				}
				at = end
			}
			now = next
		}
	})
}
