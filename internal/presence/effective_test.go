package presence

import (
	"errors"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

func tp(s string) *time.Time { t := utc(s); return &t }

// override is the Inputs of shift sh with override v, set at setAt by by
// and ending at until ("" for no end).
func override(sh *Shift, v, until, setAt, by string) Inputs {
	in := Inputs{Shift: sh, Override: v, OverrideSetAt: utc(setAt), OverrideBy: by}
	if until != "" {
		in.OverrideUntil = tp(until)
	}
	return in
}

type effCase struct {
	name     string
	in       Inputs
	now      string
	presence string
	source   string
	until    string // "" for nil
}

func runEffCases(t *testing.T, cases []effCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkEffective(t, c.in, utc(c.now), c.presence, c.source, c.until)
		})
	}
}

func checkEffective(t *testing.T, in Inputs, now time.Time, presence, source, until string) {
	t.Helper()
	p, s, u := Effective(in, now)
	if p != presence || s != source {
		t.Errorf("Effective at %s = (%s, %s), want (%s, %s)", now.UTC().Format(time.RFC3339), p, s, presence, source)
	}
	switch {
	case until == "" && u != nil:
		t.Errorf("until = %s, want nil", u.UTC().Format(time.RFC3339))
	case until != "" && (u == nil || !u.Equal(utc(until))):
		t.Errorf("until = %v, want %s", u, until)
	}
}

// Monday 2026-01-05; the scenario shift of TestScenarios.
const weekdayMornings = "Mon-Fri 09:00-13:00"

func TestEffectiveRules(t *testing.T) {
	sh := mustShift(t, weekdayMornings)
	always := mustShift(t, "00:00-24:00")
	runEffCases(t, []effCase{
		{"default is in", Inputs{}, "2026-01-05T10:00:00Z", In, SourceDefault, ""},
		{"shift in", Inputs{Shift: sh}, "2026-01-05T10:00:00Z", In, SourceShift, "2026-01-05T13:00:00Z"},
		{"shift out", Inputs{Shift: sh}, "2026-01-05T13:00:00Z", Out, SourceShift, "2026-01-06T09:00:00Z"},
		{"shift out over the weekend", Inputs{Shift: sh}, "2026-01-09T13:00:00Z", Out, SourceShift, "2026-01-12T09:00:00Z"},
		{"always-in shift never changes", Inputs{Shift: always}, "2026-01-05T10:00:00Z", In, SourceShift, ""},
		{"operator out, no shift, no end", override(nil, Out, "", "2026-01-05T10:00:00Z", ByOperator("p1")), "2026-01-07T10:00:00Z", Out, SourceOperator, ""},
		{"operator out, no shift, ends", override(nil, Out, "2026-01-05T12:00:00Z", "2026-01-05T10:00:00Z", ByOperator("p1")), "2026-01-05T11:00:00Z", Out, SourceOperator, "2026-01-05T12:00:00Z"},
		{"operator out, no shift, ended", override(nil, Out, "2026-01-05T12:00:00Z", "2026-01-05T10:00:00Z", ByOperator("p1")), "2026-01-05T12:00:00Z", In, SourceDefault, ""},
		{"in override ending into default in: no change", override(nil, In, "2026-01-05T12:00:00Z", "2026-01-05T10:00:00Z", ByAgent), "2026-01-05T11:00:00Z", In, SourceAgent, ""},
		{"out override while shift out, until the shift start where the shift says in", override(sh, Out, "", "2026-01-05T20:00:00Z", ByOperator("p1")), "2026-01-05T20:00:00Z", Out, SourceOperator, "2026-01-06T09:00:00Z"},
		{"out override ending while shift out: next real change is the start", override(sh, Out, "2026-01-05T22:00:00Z", "2026-01-05T20:00:00Z", ByOperator("p1")), "2026-01-05T21:00:00Z", Out, SourceOperator, "2026-01-06T09:00:00Z"},
		{"in override inside shift ending inside: next change is the shift end", override(sh, In, "2026-01-05T12:00:00Z", "2026-01-05T10:00:00Z", ByOperator("p1")), "2026-01-05T10:00:00Z", In, SourceOperator, "2026-01-05T13:00:00Z"},
		{"in override while shift out, ended by the start: shift in, next change its end", override(sh, In, "", "2026-01-05T20:00:00Z", ByOperator("p1")), "2026-01-05T20:00:00Z", In, SourceOperator, "2026-01-06T13:00:00Z"},
		{"out override inside shift ends at shift end, then out until next start", override(sh, Out, "", "2026-01-05T10:00:00Z", ByOperator("p1")), "2026-01-05T10:00:00Z", Out, SourceOperator, "2026-01-06T09:00:00Z"},
		{"override's own end before the boundary, answer flips there", override(sh, Out, "2026-01-05T11:00:00Z", "2026-01-05T10:00:00Z", ByOperator("p1")), "2026-01-05T10:30:00Z", Out, SourceOperator, "2026-01-05T11:00:00Z"},
		{"override ended by a boundary even with a later until", override(sh, Out, "2026-01-07T00:00:00Z", "2026-01-05T10:00:00Z", ByOperator("p1")), "2026-01-06T10:00:00Z", In, SourceShift, "2026-01-06T13:00:00Z"},
		{"override set at a boundary instant is live", override(sh, Out, "", "2026-01-05T09:00:00Z", ByAgent), "2026-01-05T09:00:00Z", Out, SourceAgent, "2026-01-06T09:00:00Z"},
		{"override set later than now (clock skew) is live", override(sh, Out, "", "2026-01-05T10:00:01Z", ByAgent), "2026-01-05T10:00:00Z", Out, SourceAgent, "2026-01-06T09:00:00Z"},
		{"always-in shift, out override lasts", override(always, Out, "", "2026-01-05T10:00:00Z", ByAgent), "2026-02-05T10:00:00Z", Out, SourceAgent, ""},
		{"unknown override value is ignored", override(sh, "maybe", "", "2026-01-05T10:00:00Z", ByAgent), "2026-01-05T10:00:00Z", In, SourceShift, "2026-01-05T13:00:00Z"},
		{"agent:<id> is the agent", override(nil, Out, "", "2026-01-05T10:00:00Z", "agent:a1"), "2026-01-05T10:00:00Z", Out, SourceAgent, ""},
	})
}

// TestScenarios are the pure-rule scenarios of effective presence, shifts
// and the self verbs (design: Effective presence, Self verbs).
func TestScenarios(t *testing.T) {
	sh := mustShift(t, weekdayMornings)

	t.Run("default is in", func(t *testing.T) {
		checkEffective(t, Inputs{}, utc("2026-01-05T10:00:00Z"), In, SourceDefault, "")
	})

	t.Run("shift + clock_out Monday 10:00 with no end", func(t *testing.T) {
		now := utc("2026-01-05T10:00:00Z")
		cur := Inputs{Shift: sh}
		ch := ClockOut(cur, now)
		if ch.Action != Set || ch.Override.Presence != Out || ch.Override.By != ByAgent || !ch.Override.SetAt.Equal(now) {
			t.Fatalf("ClockOut = %+v", ch)
		}
		if ch.Override.Until == nil || !ch.Override.Until.Equal(utc("2026-01-06T09:00:00Z")) {
			t.Fatalf("override until %v, want the next shift start Tue 09:00", ch.Override.Until)
		}
		in := ch.Apply(cur)
		// out by override until 13:00 Monday; presence stays out to Tue 09:00
		checkEffective(t, in, now, Out, SourceAgent, "2026-01-06T09:00:00Z")
		checkEffective(t, in, utc("2026-01-05T12:59:59.999999Z"), Out, SourceAgent, "2026-01-06T09:00:00Z")
		if live, end := OverrideLive(in, now); !live || end == nil || !end.Equal(utc("2026-01-05T13:00:00Z")) {
			t.Errorf("OverrideLive = %v, %v; want live until 13:00 Monday", live, end)
		}
		// out by shift until 09:00 Tuesday
		checkEffective(t, in, utc("2026-01-05T13:00:00Z"), Out, SourceShift, "2026-01-06T09:00:00Z")
		checkEffective(t, in, utc("2026-01-06T08:59:59Z"), Out, SourceShift, "2026-01-06T09:00:00Z")
		// in at 09:00 Tuesday
		checkEffective(t, in, utc("2026-01-06T09:00:00Z"), In, SourceShift, "2026-01-06T13:00:00Z")
		// a repeated clock_out changes nothing
		if again := ClockOut(in, utc("2026-01-05T11:00:00Z")); again.Action != Keep {
			t.Errorf("repeated ClockOut = %v, want keep", again.Action)
		}
	})

	t.Run("no shift + clock_out: out until clock-in or an operator change", func(t *testing.T) {
		now := utc("2026-01-05T10:00:00Z")
		ch := ClockOut(Inputs{}, now)
		if ch.Action != Set || ch.Override.Until != nil {
			t.Fatalf("ClockOut = %+v, want an out override with no end", ch)
		}
		in := ch.Apply(Inputs{})
		checkEffective(t, in, now, Out, SourceAgent, "")
		checkEffective(t, in, utc("2027-01-05T10:00:00Z"), Out, SourceAgent, "")
		if again := ClockOut(in, utc("2026-01-06T10:00:00Z")); again.Action != Keep {
			t.Errorf("repeated ClockOut = %v, want keep", again.Action)
		}
		back, _, err := ClockIn(in, DefaultBudget(), DefaultClockIn, utc("2026-01-06T10:00:00Z"))
		if err != nil || back.Action != Clear {
			t.Fatalf("ClockIn = %+v, %v; want clear", back, err)
		}
		checkEffective(t, back.Apply(in), utc("2026-01-06T10:00:00Z"), In, SourceDefault, "")
	})

	t.Run("shift + clock_in for 2h Monday 20:00", func(t *testing.T) {
		now := utc("2026-01-05T20:00:00Z")
		d, err := ParseFor("2h")
		if err != nil {
			t.Fatal(err)
		}
		cur := Inputs{Shift: sh}
		ch, _, err := ClockIn(cur, DefaultBudget(), d, now)
		if err != nil || ch.Action != Set || ch.Override.Presence != In || !ch.Override.Until.Equal(utc("2026-01-05T22:00:00Z")) {
			t.Fatalf("ClockIn = %+v, %v", ch, err)
		}
		in := ch.Apply(cur)
		checkEffective(t, in, now, In, SourceAgent, "2026-01-05T22:00:00Z")
		checkEffective(t, in, utc("2026-01-05T21:59:59Z"), In, SourceAgent, "2026-01-05T22:00:00Z")
		checkEffective(t, in, utc("2026-01-05T22:00:00Z"), Out, SourceShift, "2026-01-06T09:00:00Z")
	})

	t.Run("clock_in for 9h is invalid_argument and changes nothing", func(t *testing.T) {
		_, err := ParseFor("9h")
		assertForErr(t, err)
		ch, _, err := ClockIn(Inputs{Shift: sh}, DefaultBudget(), 9*time.Hour, utc("2026-01-05T20:00:00Z"))
		assertForErr(t, err)
		if ch.Action != Keep {
			t.Errorf("change %v, want keep", ch.Action)
		}
	})
}

func assertForErr(t *testing.T, err error) {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v is not a *domain.Error", err)
	}
	if de.Code != domain.CodeInvalidArgument || de.Pointer != "/for" {
		t.Errorf("code %q pointer %q, want invalid_argument /for", de.Code, de.Pointer)
	}
}

func TestEffectiveEdges(t *testing.T) {
	sh := mustShift(t, weekdayMornings)
	t.Run("override with zero set_at and a shift counts as ended", func(t *testing.T) {
		in := Inputs{Shift: sh, Override: Out, OverrideBy: ByAgent}
		checkEffective(t, in, utc("2026-01-05T10:00:00Z"), In, SourceShift, "2026-01-05T13:00:00Z")
	})
	t.Run("clock_out across a DST change keeps wall-clock shift times", func(t *testing.T) {
		la := mustShift(t, "TZ=America/Los_Angeles Mon-Fri 09:00-13:00")
		now := utc("2026-03-06T18:00:00Z") // Fri 10:00 PST
		cur := Inputs{Shift: la}
		ch := ClockOut(cur, now)
		if ch.Override.Until == nil || !ch.Override.Until.Equal(utc("2026-03-09T16:00:00Z")) {
			t.Fatalf("until %v, want Mon 09:00 PDT", ch.Override.Until)
		}
		in := ch.Apply(cur)
		checkEffective(t, in, now, Out, SourceAgent, "2026-03-09T16:00:00Z")
		checkEffective(t, in, utc("2026-03-06T21:00:00Z"), Out, SourceShift, "2026-03-09T16:00:00Z")
		checkEffective(t, in, utc("2026-03-09T16:00:00Z"), In, SourceShift, "2026-03-09T20:00:00Z")
	})
	t.Run("until is a fresh pointer", func(t *testing.T) {
		now := utc("2026-01-05T10:00:00Z")
		_, _, u1 := Effective(Inputs{Shift: sh}, now)
		*u1 = time.Time{}
		_, _, u2 := Effective(Inputs{Shift: sh}, now)
		if !u2.Equal(utc("2026-01-05T13:00:00Z")) {
			t.Errorf("until %v", u2)
		}
		end := utc("2026-01-05T11:00:00Z")
		in := Inputs{Override: Out, OverrideUntil: &end, OverrideSetAt: now, OverrideBy: ByAgent}
		_, _, u3 := Effective(in, now)
		if u3 == &end {
			t.Error("until aliases OverrideUntil")
		}
	})
}
