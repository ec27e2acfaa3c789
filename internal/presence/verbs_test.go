package presence

import (
	"strings"
	"testing"
	"time"
)

func TestParseFor(t *testing.T) {
	ok := map[string]time.Duration{
		"2h": 2 * time.Hour, "90m": 90 * time.Minute, "1h30m": 90 * time.Minute,
		"8h": 8 * time.Hour, "1s": time.Second, " 2h ": 2 * time.Hour, "28800s": 8 * time.Hour,
	}
	for s, want := range ok {
		if got, err := ParseFor(s); err != nil || got != want {
			t.Errorf("ParseFor(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	bad := map[string]string{
		"9h":      "must be at most 8h, got 9h",
		"8h0m1s":  "must be at most 8h",
		"0":       "must be positive",
		"0s":      "must be positive",
		"-1h":     "must be positive",
		"":        "is not a duration",
		"2 hours": "is not a duration",
		"2":       "is not a duration",
	}
	for s, detail := range bad {
		_, err := ParseFor(s)
		assertForErr(t, err)
		if err != nil && !strings.Contains(err.Error(), "for: "+detail) && !strings.Contains(err.Error(), detail) {
			t.Errorf("ParseFor(%q) = %v, want %q", s, err, detail)
		}
	}
}

func TestClockIn(t *testing.T) {
	sh := mustShift(t, weekdayMornings)
	mon20 := utc("2026-01-05T20:00:00Z")

	t.Run("bad durations", func(t *testing.T) {
		for _, d := range []time.Duration{0, -time.Minute, MaxClockIn + time.Nanosecond} {
			_, _, err := ClockIn(Inputs{Shift: sh}, DefaultBudget(), d, mon20)
			assertForErr(t, err)
		}
		if _, _, err := ClockIn(Inputs{Shift: sh}, DefaultBudget(), MaxClockIn, mon20); err != nil {
			t.Errorf("MaxClockIn rejected: %v", err)
		}
	})
	t.Run("capped by the next shift start", func(t *testing.T) {
		ch, _, err := ClockIn(Inputs{Shift: sh}, DefaultBudget(), 2*time.Hour, utc("2026-01-06T08:00:00Z"))
		if err != nil || ch.Action != Set || !ch.Override.Until.Equal(utc("2026-01-06T09:00:00Z")) {
			t.Fatalf("ClockIn = %+v, %v; want in until 09:00", ch, err)
		}
	})
	t.Run("8h over the weekend is not capped", func(t *testing.T) {
		ch, _, _ := ClockIn(Inputs{Shift: sh}, DefaultBudget(), MaxClockIn, utc("2026-01-10T10:00:00Z"))
		if ch.Action != Set || !ch.Override.Until.Equal(utc("2026-01-10T18:00:00Z")) {
			t.Fatalf("ClockIn = %+v", ch)
		}
	})
	t.Run("repeat at the same instant keeps, later extends", func(t *testing.T) {
		ch, b, _ := ClockIn(Inputs{Shift: sh}, DefaultBudget(), 2*time.Hour, mon20)
		in := ch.Apply(Inputs{Shift: sh})
		if again, _, _ := ClockIn(in, b, 2*time.Hour, mon20); again.Action != Keep {
			t.Errorf("repeat = %v, want keep", again.Action)
		}
		later, _, _ := ClockIn(in, b, 2*time.Hour, mon20.Add(30*time.Minute))
		if later.Action != Set || !later.Override.Until.Equal(utc("2026-01-05T22:30:00Z")) {
			t.Errorf("later = %+v, want in until 22:30", later)
		}
	})
	t.Run("inside the shift clears an out override", func(t *testing.T) {
		now := utc("2026-01-05T10:00:00Z")
		out := ClockOut(Inputs{Shift: sh}, now).Apply(Inputs{Shift: sh})
		ch, _, err := ClockIn(out, DefaultBudget(), time.Hour, now.Add(time.Minute))
		if err != nil || ch.Action != Clear {
			t.Fatalf("ClockIn = %+v, %v; want clear", ch, err)
		}
		checkEffective(t, ch.Apply(out), now.Add(time.Minute), In, SourceShift, "2026-01-05T13:00:00Z")
	})
	t.Run("inside the shift keeps an operator in override and no override", func(t *testing.T) {
		now := utc("2026-01-05T10:00:00Z")
		op := Inputs{Shift: sh, Override: In, OverrideSetAt: now, OverrideBy: ByOperator("p1")}
		if ch, _, _ := ClockIn(op, DefaultBudget(), time.Hour, now); ch.Action != Keep {
			t.Errorf("with operator in: %v, want keep", ch.Action)
		}
		if ch, _, _ := ClockIn(Inputs{Shift: sh}, DefaultBudget(), time.Hour, now); ch.Action != Keep {
			t.Errorf("with nothing: %v, want keep", ch.Action)
		}
	})
	t.Run("a dead operator out override is replaced off shift", func(t *testing.T) {
		// Set Monday 10:00, ended by the 13:00 boundary: it no longer decides.
		op := Inputs{Shift: sh, Override: Out, OverrideSetAt: utc("2026-01-05T10:00:00Z"), OverrideBy: ByOperator("p1")}
		ch, _, err := ClockIn(op, DefaultBudget(), time.Hour, mon20)
		if err != nil || ch.Action != Set || ch.Override.Presence != In || ch.Override.By != ByAgent {
			t.Errorf("ClockIn = %+v, %v", ch, err)
		}
	})
}

func TestClockOut(t *testing.T) {
	sh := mustShift(t, weekdayMornings)
	t.Run("after clock_in replaces the in override", func(t *testing.T) {
		now := utc("2026-01-05T20:00:00Z")
		ch, _, _ := ClockIn(Inputs{Shift: sh}, DefaultBudget(), 2*time.Hour, now)
		in := ch.Apply(Inputs{Shift: sh})
		out := ClockOut(in, now.Add(time.Hour))
		if out.Action != Set || out.Override.Presence != Out {
			t.Fatalf("ClockOut = %+v", out)
		}
		checkEffective(t, out.Apply(in), now.Add(time.Hour), Out, SourceAgent, "2026-01-06T09:00:00Z")
	})
	t.Run("always-in shift: no end", func(t *testing.T) {
		ch := ClockOut(Inputs{Shift: mustShift(t, "00:00-24:00")}, utc("2026-01-05T20:00:00Z"))
		if ch.Action != Set || ch.Override.Until != nil {
			t.Errorf("ClockOut = %+v", ch)
		}
	})
	t.Run("under an operator out override keeps the owner's", func(t *testing.T) {
		now := utc("2026-01-05T20:00:00Z")
		op := Inputs{Override: Out, OverrideSetAt: now, OverrideBy: ByOperator("p1")}
		if ch := ClockOut(op, now); ch.Action != Keep {
			t.Errorf("ClockOut = %+v, want keep: replacing it would let clock_in clear the owner's word", ch)
		}
	})
	t.Run("a dead out override is replaced", func(t *testing.T) {
		set := utc("2026-01-05T10:00:00Z")
		dead := ClockOut(Inputs{Shift: sh}, set).Apply(Inputs{Shift: sh})
		if ch := ClockOut(dead, utc("2026-01-06T10:00:00Z")); ch.Action != Set {
			t.Errorf("ClockOut = %v, want set", ch.Action)
		}
	})
}

func TestOperatorOverride(t *testing.T) {
	now := utc("2026-01-05T10:00:00Z")
	ch, err := OperatorOverride(Inputs{}, "p1", Out, nil, now)
	if err != nil || ch.Action != Set || ch.Override.By != "operator:p1" {
		t.Fatalf("OperatorOverride = %+v, %v", ch, err)
	}
	checkEffective(t, ch.Apply(Inputs{}), now, Out, SourceOperator, "")
	if again, _ := OperatorOverride(ch.Apply(Inputs{}), "p1", Out, nil, now.Add(time.Hour)); again.Action != Keep {
		t.Errorf("repeat = %v, want keep", again.Action)
	}
	if _, err := OperatorOverride(Inputs{}, "p1", "away", nil, now); err == nil || !strings.Contains(err.Error(), "/presence") {
		t.Errorf("bad presence: %v", err)
	}
	if _, err := OperatorOverride(Inputs{}, "p1", In, &now, now); err == nil || !strings.Contains(err.Error(), "/until") {
		t.Errorf("until not after now: %v", err)
	}
	cleared := Change{Action: Clear}.Apply(ch.Apply(Inputs{}))
	if cleared.Override != "" || cleared.OverrideUntil != nil || !cleared.OverrideSetAt.IsZero() || cleared.OverrideBy != "" {
		t.Errorf("Clear left %+v", cleared)
	}
	for a, s := range map[Action]string{Keep: "keep", Set: "set", Clear: "clear"} {
		if a.String() != s {
			t.Errorf("%d.String() = %q", a, a.String())
		}
	}
}
