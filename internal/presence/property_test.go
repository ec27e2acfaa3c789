package presence

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/rollcall/rollcall/internal/domain"
)

// refWindow is a generated window, kept apart from the parser's own
// representation so the reference below checks the parser too.
type refWindow struct {
	days       [7]bool // Monday first; all true when the text has no day list
	start, end int     // minutes; end in 1..1440
}

// The zones exercised: DST north and south, a 30-minute DST (Lord Howe),
// half- and quarter-hour offsets, Dublin's negative DST, and UTC.
var propZones = []string{"", "America/Los_Angeles", "Europe/Berlin", "Australia/Lord_Howe",
	"Asia/Kolkata", "Pacific/Chatham", "America/Sao_Paulo", "Europe/Dublin", "America/St_Johns"}

// Minutes near DST transitions (00:00-03:30) are drawn often.
func genMinute(t *rapid.T, label string) int {
	if rapid.Bool().Draw(t, label+"-near") {
		return rapid.SampledFrom([]int{0, 15, 30, 45, 60, 75, 90, 100, 105, 120, 130, 135, 150, 165, 180, 195, 210}).Draw(t, label)
	}
	return rapid.IntRange(0, dayMinutes-1).Draw(t, label)
}

func clockText(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

// genShift draws a shift as text plus its reference windows.
func genShift(t *rapid.T) (string, *time.Location, []refWindow) {
	zone := rapid.SampledFrom(propZones).Draw(t, "zone")
	loc := time.UTC
	var parts []string
	if zone != "" {
		loc, _ = time.LoadLocation(zone)
	}
	n := rapid.IntRange(1, 3).Draw(t, "windows")
	ws := make([]refWindow, n)
	for i := range ws {
		w := &ws[i]
		var days string
		switch rapid.IntRange(0, 3).Draw(t, "dayform") {
		case 0:
			w.days = [7]bool{true, true, true, true, true, true, true}
		case 1: // a range, possibly wrapping
			a := rapid.IntRange(0, 6).Draw(t, "from")
			b := (a + rapid.IntRange(1, 6).Draw(t, "len")) % 7
			for d := a; ; d = (d + 1) % 7 {
				w.days[d] = true
				if d == b {
					break
				}
			}
			days = dayNames[a] + "-" + strings.ToLower(dayNames[b])
		default: // a list
			var names []string
			for d := range 7 {
				if rapid.Bool().Draw(t, "day") {
					w.days[d] = true
					names = append(names, strings.ToUpper(dayNames[d]))
				}
			}
			if len(names) == 0 {
				w.days[0] = true
				names = []string{"Mon"}
			}
			days = strings.Join(names, ",")
		}
		w.start = genMinute(t, "start")
		w.end = genMinute(t, "end")
		endText := clockText(w.end)
		if w.end == w.start {
			w.end = dayMinutes
			endText = "24:00"
			if w.start == 0 {
				endText = "23:59"
				w.end = dayMinutes - 1
			}
		} else if w.end == 0 {
			w.end = dayMinutes
		}
		text := clockText(w.start) + "-" + endText
		if days != "" {
			text = days + " " + text
		}
		parts = append(parts, text)
	}
	text := strings.Join(parts, "; ")
	if zone != "" {
		text = "TZ=" + zone + " " + text
	}
	return text, loc, ws
}

// genParsedShift draws a shift as genShift does and parses it; a drawn
// shift that does not parse fails t.
func genParsedShift(t *rapid.T) (*Shift, string, *time.Location, []refWindow) {
	text, loc, ws := genShift(t)
	sh, err := ParseShift(text)
	if err != nil {
		t.Fatalf("ParseShift(%q): %v", text, err)
	}
	return sh, text, loc, ws
}

// naiveIn is membership by the local wall clock alone.
func naiveIn(ws []refWindow, lt time.Time) bool {
	wd := (int(lt.Weekday()) + 6) % 7
	m := lt.Hour()*60 + lt.Minute()
	for _, w := range ws {
		if w.end > w.start {
			if w.days[wd] && m >= w.start && m < w.end {
				return true
			}
		} else if (w.days[wd] && m >= w.start) || (w.days[(wd+6)%7] && m < w.end) {
			return true
		}
	}
	return false
}

// genTime draws an instant in 2025-2028, often within hours of a zone
// transition, sometimes with a fraction of a second.
func genTime(t *rapid.T, loc *time.Location, label string) time.Time {
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var at time.Time
	if tr := transitions(loc, from, from.AddDate(3, 0, 0)); len(tr) > 0 && rapid.Bool().Draw(t, label+"-neartr") {
		base := rapid.SampledFrom(tr).Draw(t, label+"-tr")
		at = base.Add(time.Duration(rapid.IntRange(-6*60, 6*60).Draw(t, label+"-min")) * time.Minute)
	} else {
		at = from.Add(time.Duration(rapid.Int64Range(0, 3*365*24*60).Draw(t, label+"-min")) * time.Minute)
	}
	if rapid.Bool().Draw(t, label+"-frac") {
		at = at.Add(time.Duration(rapid.Int64Range(-int64(time.Minute), int64(time.Minute)).Draw(t, label+"-ns")))
	}
	return at
}

// transitions lists the zone's offset changes in [from, to).
func transitions(loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	t := from
	for t.Before(to) {
		_, end := t.In(loc).ZoneBounds()
		if end.IsZero() || !end.Before(to) {
			break
		}
		out = append(out, end)
		t = end
	}
	return out
}

// TestPropShiftIn: next is exactly the first instant the answer changes, and
// the answer agrees with the local wall clock except while the clock replays
// an interval after falling back, where it holds the answer from just before.
func TestPropShiftIn(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sh, text, loc, ws := genParsedShift(t)
		at := genTime(t, loc, "t")
		in, next, ok := sh.In(at)

		// reference membership
		lt := at.In(loc)
		_, off := lt.Zone()
		zs, _ := lt.ZoneBounds()
		replay := false
		if !zs.IsZero() {
			_, prev := zs.Add(-time.Nanosecond).Zone()
			replay = prev > off && at.Before(zs.Add(time.Duration(prev-off)*time.Second))
		}
		if replay {
			if before, _, _ := sh.In(zs.Add(-time.Nanosecond)); before != in {
				t.Fatalf("%q at %s (replay): in=%v, want %v as just before the fall-back", text, lt, in, before)
			}
		} else if want := naiveIn(ws, lt); want != in {
			t.Fatalf("%q at %s: in=%v, wall clock says %v", text, lt, in, want)
		}

		horizon := at.AddDate(0, 0, 15)
		if !ok {
			for i := 0; i < 50; i++ {
				u := at.Add(time.Duration(rapid.Int64Range(0, int64(horizon.Sub(at))).Draw(t, "u")))
				if in2, _, ok2 := sh.In(u); in2 != in || ok2 {
					t.Fatalf("%q: no boundary after %s, but In(%s) = %v, %v", text, at, u, in2, ok2)
				}
			}
			return
		}
		if !next.After(at) || next.After(horizon) {
			t.Fatalf("%q at %s: next %s out of range", text, at, next)
		}
		if in2, _, _ := sh.In(next); in2 == in {
			t.Fatalf("%q: answer at next %s is still %v", text, next.In(loc), in)
		}
		same := func(u time.Time) {
			if in2, next2, ok2 := sh.In(u); in2 != in || !ok2 || !next2.Equal(next) {
				t.Fatalf("%q: In(%s) = (%v, %s), want (%v, %s) as from %s", text, u.In(loc), in2, next2.In(loc), in, next.In(loc), at.In(loc))
			}
		}
		same(next.Add(-time.Nanosecond))
		for _, tr := range transitions(loc, at, next) {
			same(tr)
			same(tr.Add(-time.Nanosecond))
		}
		for i := 0; i < 20; i++ {
			same(at.Add(time.Duration(rapid.Int64Range(0, int64(next.Sub(at))-1).Draw(t, "u"))))
		}
	})
}

// TestPropRoundTrip: String() re-parses to an Equal shift and is a fixed point.
func TestPropRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sh, text, _, _ := genParsedShift(t)
		c := sh.String()
		again, err := ParseShift(c)
		if err != nil || !again.Equal(sh) || again.String() != c {
			t.Fatalf("%q → %q → %v (%v)", text, c, again, err)
		}
	})
}

func genInputs(t *rapid.T) (Inputs, time.Time) {
	var in Inputs
	loc := time.UTC
	if rapid.IntRange(0, 3).Draw(t, "hasShift") > 0 {
		in.Shift, _, loc, _ = genParsedShift(t)
	}
	in.OverrideSetAt = genTime(t, loc, "setAt")
	in.Override = rapid.SampledFrom([]string{"", In, Out}).Draw(t, "override")
	in.OverrideBy = rapid.SampledFrom([]string{ByAgent, ByOperator("p1")}).Draw(t, "by")
	if rapid.Bool().Draw(t, "hasUntil") {
		u := in.OverrideSetAt.Add(time.Duration(rapid.Int64Range(1, 3*24*60).Draw(t, "untilMin")) * time.Minute)
		in.OverrideUntil = &u
	}
	now := in.OverrideSetAt.Add(time.Duration(rapid.Int64Range(-60, 4*24*60).Draw(t, "nowMin")) * time.Minute)
	if rapid.Bool().Draw(t, "nowFrac") {
		now = now.Add(time.Duration(rapid.Int64Range(0, int64(time.Minute)).Draw(t, "nowNs")))
	}
	return in, now
}

// candidates returns every instant in (now, horizon] at which Effective's
// answer could change: the shift's boundaries, the override's own end and
// the first boundary after it was set.
func candidates(in Inputs, now, horizon time.Time) []time.Time {
	var cs []time.Time
	if in.OverrideUntil != nil {
		cs = append(cs, *in.OverrideUntil)
	}
	if in.Shift != nil {
		if _, b, ok := in.Shift.In(in.OverrideSetAt); ok {
			cs = append(cs, b)
		}
		for t := now; ; {
			_, next, ok := in.Shift.In(t)
			if !ok || next.After(horizon) {
				break
			}
			cs = append(cs, next)
			t = next
		}
	}
	cs = slices.DeleteFunc(cs, func(c time.Time) bool { return !c.After(now) || c.After(horizon) })
	slices.SortFunc(cs, func(a, b time.Time) int { return a.Compare(b) })
	return cs
}

// TestPropEffective: until is exactly the next instant at which the presence
// Effective returns changes; the precedence of Effective holds; an override never
// outlives the first shift boundary after it was set.
func TestPropEffective(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in, now := genInputs(t)
		p, src, until := Effective(in, now)

		// precedence, checked literally
		live := in.Override == In || in.Override == Out
		if live && in.OverrideUntil != nil && !in.OverrideUntil.After(now) {
			live = false
		}
		var firstB time.Time
		var hasB bool
		if in.Shift != nil {
			_, firstB, hasB = in.Shift.In(in.OverrideSetAt)
			if hasB && !firstB.After(now) {
				live = false
			}
		}
		switch {
		case live:
			if p != in.Override || src != sourceOf(in.OverrideBy) {
				t.Fatalf("live override %s by %s: got (%s, %s)", in.Override, in.OverrideBy, p, src)
			}
		case in.Shift != nil:
			sIn, _, _ := in.Shift.In(now)
			if src != SourceShift || (p == In) != sIn {
				t.Fatalf("shift decides: got (%s, %s), shift in=%v", p, src, sIn)
			}
		default:
			if p != In || src != SourceDefault {
				t.Fatalf("default: got (%s, %s)", p, src)
			}
		}
		// an override never outlives the first boundary after it was set
		if hasB && (in.Override == In || in.Override == Out) {
			later := firstB.Add(time.Duration(rapid.Int64Range(0, int64(48*time.Hour)).Draw(t, "after")))
			for _, u := range []time.Time{firstB, later} {
				if _, s, _ := Effective(in, u); s == SourceAgent || s == SourceOperator {
					t.Fatalf("override set %s still decides at %s, after the boundary %s", in.OverrideSetAt, u, firstB)
				}
			}
		}

		// until is the first candidate at which the presence changes
		horizon := now.AddDate(0, 0, 16)
		var want *time.Time
		for _, c := range candidates(in, now, horizon) {
			if pc, _, _ := Effective(in, c); pc != p {
				want = &c
				break
			}
		}
		switch {
		case want != nil:
			if until == nil || !until.Equal(*want) {
				t.Fatalf("until = %v, want %s (inputs %+v, now %s)", until, want, in, now)
			}
		case until != nil && !until.After(horizon):
			t.Fatalf("until = %s, but the presence does not change before %s", until, horizon)
		}
		if until != nil {
			if pu, _, _ := Effective(in, *until); pu == p {
				t.Fatalf("presence at until %s is still %s", until, p)
			}
			if pb, _, ub := Effective(in, until.Add(-time.Nanosecond)); pb != p || ub == nil || !ub.Equal(*until) {
				t.Fatalf("just before until: (%s, %v), want (%s, %s)", pb, ub, p, until)
			}
		}
	})
}

// TestPropVerbs: after clock_in the agent is in and after clock_out it is
// out; a clock_in that overrides the shift ends by now+for and the next shift
// start; repeating either verb at the same instant keeps.
func TestPropVerbs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cur, now := genInputs(t)
		d := time.Duration(rapid.Int64Range(1, int64(MaxClockIn/time.Minute)).Draw(t, "forMin")) * time.Minute

		if operatorOutLive(cur, now) {
			ch, b, err := ClockIn(cur, DefaultBudget(), d, now)
			if domain.CodeOf(err) != domain.CodeForbidden || ch.Action != Keep || b != DefaultBudget() {
				t.Fatalf("clock_in under an operator out override: %+v %+v %v, want forbidden and nothing changed", ch, b, err)
			}
			return
		}
		ch, b, err := ClockIn(cur, DefaultBudget(), d, now)
		if err != nil {
			t.Fatalf("ClockIn: %v", err)
		}
		after := ch.Apply(cur)
		p, _, until := Effective(after, now)
		if p != In {
			t.Fatalf("after clock_in: %s (change %+v)", p, ch)
		}
		if live, _ := OverrideLive(cur, now); live && cur.Override == In && sourceOf(cur.OverrideBy) == SourceOperator {
			if ch.Action != Keep {
				t.Fatalf("clock_in over an operator's in override: %v, want keep", ch.Action)
			}
		} else if cur.Shift != nil {
			if sIn, next, ok := cur.Shift.In(now); !sIn {
				limit := now.Add(d)
				if ok && next.Before(limit) {
					limit = next
				}
				live, end := OverrideLive(after, now)
				if !live || end == nil || end.After(limit) {
					t.Fatalf("clock_in for %s at %s: override live %v until %v, beyond %s", d, now, live, end, limit)
				}
				if until == nil || until.Before(*end) {
					t.Fatalf("clock_in: presence in until %v, before the override ends at %s", until, end)
				}
			}
		}
		if again, _, _ := ClockIn(after, b, d, now); again.Action != Keep {
			t.Fatalf("repeated clock_in: %v", again.Action)
		}

		out := ClockOut(cur, now)
		afterOut := out.Apply(cur)
		if p, src, _ := Effective(afterOut, now); p != Out || src != SourceAgent {
			t.Fatalf("after clock_out: (%s, %s)", p, src)
		}
		if again := ClockOut(afterOut, now); again.Action != Keep {
			t.Fatalf("repeated clock_out: %v", again.Action)
		}
	})
}
