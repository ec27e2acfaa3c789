package presence

import (
	"testing"
	"time"
)

// benchTimes spreads 1024 instants over two weeks around a DST change.
func benchTimes() []time.Time {
	ts := make([]time.Time, 1024)
	base := time.Date(2026, 10, 26, 0, 0, 0, 0, time.UTC)
	for i := range ts {
		ts[i] = base.Add(time.Duration(i) * 1181 * time.Second * 17 / 10) // ~33 min apart, not minute-aligned
	}
	return ts
}

var sinkBool bool
var sinkTime time.Time

// BenchmarkShiftIn measures Shift.In (goal ≤ 2 µs/op; docs/benchmarks.md).
func BenchmarkShiftIn(b *testing.B) {
	for _, c := range []struct{ name, shift string }{
		{"utc", "Mon-Fri 09:00-13:00"},
		{"los_angeles", "TZ=America/Los_Angeles Mon-Fri 09:00-13:00"},
		{"berlin_split", "TZ=Europe/Berlin Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00"},
		{"lord_howe_night", "TZ=Australia/Lord_Howe Sun-Thu 22:00-02:00"},
		{"weekend_only", "TZ=America/Los_Angeles Sat 10:00-11:00"},
	} {
		b.Run(c.name, func(b *testing.B) {
			sh := mustShift(b, c.shift)
			ts := benchTimes()
			i := 0
			for b.Loop() {
				in, next, _ := sh.In(ts[i&1023])
				sinkBool, sinkTime = in, next
				i++
			}
		})
	}
}

// BenchmarkEffective measures Effective (goal ≤ 2 µs/op; docs/benchmarks.md).
func BenchmarkEffective(b *testing.B) {
	sh := mustShift(b, "TZ=America/Los_Angeles Mon-Fri 09:00-13:00")
	ts := benchTimes()
	setAt := ts[0].Add(-time.Hour)
	until := ts[0].Add(24 * time.Hour * 30)
	for _, c := range []struct {
		name string
		in   Inputs
	}{
		{"default", Inputs{}},
		{"shift", Inputs{Shift: sh}},
		{"shift_override", Inputs{Shift: sh, Override: Out, OverrideSetAt: setAt, OverrideUntil: &until, OverrideBy: ByAgent}},
		{"override_no_shift", Inputs{Override: Out, OverrideSetAt: setAt, OverrideBy: ByAgent}},
	} {
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				p, _, u := Effective(c.in, ts[i&1023])
				sinkBool = p == In && u != nil
				i++
			}
		})
	}
}

func BenchmarkParseShift(b *testing.B) {
	for b.Loop() {
		if _, err := ParseShift("TZ=Europe/Berlin Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00"); err != nil {
			b.Fatal(err)
		}
	}
}
