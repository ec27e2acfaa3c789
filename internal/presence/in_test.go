package presence

import (
	"testing"
	"time"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// inCase: at instant at (RFC 3339), shift says in, and the next boundary is
// next ("" for none).
type inCase struct {
	name  string
	shift string
	at    string
	in    bool
	next  string
}

func runInCases(t *testing.T, cases []inCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sh := mustShift(t, c.shift)
			at := utc(c.at)
			in, next, ok := sh.In(at)
			if in != c.in {
				t.Errorf("%q.In(%s): in = %v, want %v", c.shift, c.at, in, c.in)
			}
			if c.next == "" {
				if ok {
					t.Errorf("%q.In(%s): next = %s, want none", c.shift, c.at, next.UTC().Format(time.RFC3339))
				}
				return
			}
			if !ok || !next.Equal(utc(c.next)) {
				t.Errorf("%q.In(%s): next = %s (ok %v), want %s", c.shift, c.at, next.UTC().Format(time.RFC3339), ok, c.next)
			}
			if ok {
				// the answer really changes at next and holds just before it
				if in2, _, _ := sh.In(next); in2 == in {
					t.Errorf("answer does not change at next %s", next.UTC())
				}
				if in3, next3, _ := sh.In(next.Add(-time.Nanosecond)); in3 != in || !next3.Equal(next) {
					t.Errorf("just before next: (%v, %s), want (%v, %s)", in3, next3.UTC(), in, next.UTC())
				}
			}
		})
	}
}

// 2026-01-05 is a Monday.
func TestShiftInUTC(t *testing.T) {
	runInCases(t, []inCase{
		{"before start", "09:00-17:00", "2026-01-05T08:59:59.999999999Z", false, "2026-01-05T09:00:00Z"},
		{"start inclusive", "09:00-17:00", "2026-01-05T09:00:00Z", true, "2026-01-05T17:00:00Z"},
		{"end exclusive", "09:00-17:00", "2026-01-05T17:00:00Z", false, "2026-01-06T09:00:00Z"},
		{"weekday shift, Friday end to Monday", "Mon-Fri 09:00-13:00", "2026-01-09T13:00:00Z", false, "2026-01-12T09:00:00Z"},
		{"weekday shift, Saturday", "Mon-Fri 09:00-13:00", "2026-01-10T10:00:00Z", false, "2026-01-12T09:00:00Z"},
		{"weekday shift, Monday morning", "Mon-Fri 09:00-13:00", "2026-01-05T10:00:00Z", true, "2026-01-05T13:00:00Z"},
		{"night shift Sun start", "Sun-Thu 22:00-02:00", "2026-01-04T22:00:00Z", true, "2026-01-05T02:00:00Z"},
		{"night shift runs into Mon", "Sun-Thu 22:00-02:00", "2026-01-05T01:00:00Z", true, "2026-01-05T02:00:00Z"},
		{"night shift runs into Fri", "Sun-Thu 22:00-02:00", "2026-01-09T01:59:59Z", true, "2026-01-09T02:00:00Z"},
		{"night shift not Fri night", "Sun-Thu 22:00-02:00", "2026-01-09T22:00:00Z", false, "2026-01-11T22:00:00Z"},
		{"night shift not Sat early", "Sun-Thu 22:00-02:00", "2026-01-10T01:00:00Z", false, "2026-01-11T22:00:00Z"},
		{"wrapping range Fri-Mon, Monday end", "Fri-Mon 10:00-12:00", "2026-01-05T12:00:00Z", false, "2026-01-09T10:00:00Z"},
		{"wrapping range Fri-Mon, Sunday", "Fri-Mon 10:00-12:00", "2026-01-11T11:00:00Z", true, "2026-01-11T12:00:00Z"},
		{"wrapping range Fri-Mon, Tuesday", "Fri-Mon 10:00-12:00", "2026-01-06T11:00:00Z", false, "2026-01-09T10:00:00Z"},
		{"Sat,Sun", "Sat,Sun 10:00-12:00", "2026-01-09T11:00:00Z", false, "2026-01-10T10:00:00Z"},
		{"Sun window into Mon (week wrap)", "Sun 22:00-02:00", "2026-01-11T23:00:00Z", true, "2026-01-12T02:00:00Z"},
		{"24:00 end", "Mon 18:00-24:00", "2026-01-05T23:59:59Z", true, "2026-01-06T00:00:00Z"},
		{"00:00 end means midnight", "Mon 18:00-00:00", "2026-01-05T18:00:00Z", true, "2026-01-06T00:00:00Z"},
		{"whole day Mon", "Mon 00:00-24:00", "2026-01-04T23:00:00Z", false, "2026-01-05T00:00:00Z"},
		{"whole day Mon, inside", "Mon 00:00-24:00", "2026-01-05T00:00:00Z", true, "2026-01-06T00:00:00Z"},
		{"adjacent windows merge", "22:00-24:00; 00:00-06:00", "2026-01-05T23:00:00Z", true, "2026-01-06T06:00:00Z"},
		{"23 h daily window", "10:00-09:00", "2026-01-05T09:30:00Z", false, "2026-01-05T10:00:00Z"},
		{"23 h daily window, inside", "10:00-09:00", "2026-01-05T10:00:00Z", true, "2026-01-06T09:00:00Z"},
		{"split day, lunch", "Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00", "2026-01-05T12:00:00Z", false, "2026-01-05T13:00:00Z"},
		{"split day, morning", "Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00", "2026-01-05T11:00:00Z", true, "2026-01-05T12:00:00Z"},
		{"split day, Friday evening", "Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00", "2026-01-09T17:00:00Z", false, "2026-01-12T09:00:00Z"},
		{"one minute", "Mon 09:00-09:01", "2026-01-05T09:00:30Z", true, "2026-01-05T09:01:00Z"},
		{"always in", "00:00-24:00", "2026-01-05T09:00:00Z", true, ""},
		{"always in, two halves", "12:00-00:00; 00:00-12:00", "2026-01-07T12:00:00Z", true, ""},
		{"always in, all days listed", "Mon-Sun 00:00-24:00", "2026-01-07T12:00:00Z", true, ""},
		{"always in, 24h windows wrapping", "Fri-Thu 06:00-05:00; 05:00-06:00", "2026-01-07T12:00:00Z", true, ""},
		{"far future", "Mon 09:00-10:00", "2200-01-01T00:00:00Z", false, "2200-01-06T09:00:00Z"},
		{"before 1970", "Mon 09:00-10:00", "1969-12-31T12:00:00Z", false, "1970-01-05T09:00:00Z"},
		{"Kolkata +05:30", "TZ=Asia/Kolkata 09:00-17:00", "2026-01-05T03:00:00Z", false, "2026-01-05T03:30:00Z"},
		{"fixed zone Etc/GMT+5", "TZ=Etc/GMT+5 09:00-17:00", "2026-01-05T14:00:00Z", true, "2026-01-05T22:00:00Z"},
		{"CRON_TZ prefix", "CRON_TZ=Europe/Berlin Mon-Fri 09:00-17:00", "2026-01-05T07:59:00Z", false, "2026-01-05T08:00:00Z"},
	})
}

// TestShiftInDST: shifts across the 2026 DST changes of three zones.
func TestShiftInDST(t *testing.T) {
	const (
		la = "TZ=America/Los_Angeles "
		be = "TZ=Europe/Berlin "
		lh = "TZ=Australia/Lord_Howe "
	)
	runInCases(t, []inCase{
		// Los Angeles 2026: springs 02:00 PST → 03:00 PDT on Sun Mar 8 (10:00Z);
		// falls 02:00 PDT → 01:00 PST on Sun Nov 1 (09:00Z).
		{"Los Angeles, spring: night before", la + "00:00-06:00", "2026-03-08T07:59:59Z", false, "2026-03-08T08:00:00Z"},
		{"Los Angeles, spring: window shortened to 5h", la + "00:00-06:00", "2026-03-08T08:00:00Z", true, "2026-03-08T13:00:00Z"},
		{"Los Angeles, spring: start in the gap happens at the jump", la + "02:30-04:00", "2026-03-08T09:00:00Z", false, "2026-03-08T10:00:00Z"},
		{"Los Angeles, spring: started at the jump", la + "02:30-04:00", "2026-03-08T10:00:00Z", true, "2026-03-08T11:00:00Z"},
		{"Los Angeles, spring: end in the gap happens at the jump", la + "00:00-02:30", "2026-03-08T09:30:00Z", true, "2026-03-08T10:00:00Z"},
		{"Los Angeles, spring: window inside the gap is empty that day", la + "Sun 02:10-02:50", "2026-03-08T09:00:00Z", false, "2026-03-15T09:10:00Z"},
		{"Los Angeles, spring: after the jump", la + "Sun 02:10-02:50", "2026-03-08T10:00:00Z", false, "2026-03-15T09:10:00Z"},
		{"Los Angeles, spring: weekday shift the week after", la + "Mon-Fri 09:00-13:00", "2026-03-06T21:00:00Z", false, "2026-03-09T16:00:00Z"},
		{"Los Angeles, fall: window lengthened to 7h", la + "00:00-06:00", "2026-11-01T07:00:00Z", true, "2026-11-01T14:00:00Z"},
		{"Los Angeles, fall: start in the repeated hour, first pass", la + "Sun 01:30-03:00", "2026-11-01T08:00:00Z", false, "2026-11-01T08:30:00Z"},
		{"Los Angeles, fall: runs through the replay to 03:00 PST", la + "Sun 01:30-03:00", "2026-11-01T08:30:00Z", true, "2026-11-01T11:00:00Z"},
		{"Los Angeles, fall: replay keeps in", la + "Sun 01:30-03:00", "2026-11-01T09:15:00Z", true, "2026-11-01T11:00:00Z"},
		{"Los Angeles, fall: end in repeated hour at first pass", la + "Sat 22:00-01:30", "2026-11-01T05:00:00Z", true, "2026-11-01T08:30:00Z"},
		{"Los Angeles, fall: replay does not resume the ended window", la + "Sat 22:00-01:30", "2026-11-01T09:10:00Z", false, "2026-11-08T06:00:00Z"},
		{"Los Angeles, fall: edge fires once", la + "01:00-01:30", "2026-11-01T08:10:00Z", true, "2026-11-01T08:30:00Z"},
		{"Los Angeles, fall: no second start at 01:00 PST", la + "01:00-01:30", "2026-11-01T09:05:00Z", false, "2026-11-02T09:00:00Z"},
		{"Los Angeles, fall: weekday shift in PST", la + "Mon-Fri 09:00-13:00", "2026-10-30T20:00:00Z", false, "2026-11-02T17:00:00Z"},
		// Berlin 2026: springs 02:00 CET → 03:00 CEST on Sun Mar 29 (01:00Z); falls
		// 03:00 CEST → 02:00 CET on Sun Oct 25 (01:00Z).
		{"Berlin, spring: the skipped hour is an empty window", be + "Sun 02:00-03:00", "2026-03-29T00:30:00Z", false, "2026-04-05T00:00:00Z"},
		{"Berlin, spring: night shift 7h", be + "Sat 22:00-06:00", "2026-03-28T21:00:00Z", true, "2026-03-29T04:00:00Z"},
		{"Berlin, spring: weekdays move an hour in UTC", be + "Mon-Fri 09:00-17:00", "2026-03-27T16:00:00Z", false, "2026-03-30T07:00:00Z"},
		{"Berlin, fall: before the repeated hour", be + "Sun 02:00-03:00", "2026-10-24T23:59:00Z", false, "2026-10-25T00:00:00Z"},
		{"Berlin, fall: repeated hour makes it 2h", be + "Sun 02:00-03:00", "2026-10-25T00:00:00Z", true, "2026-10-25T02:00:00Z"},
		{"Berlin, fall: replay keeps in", be + "Sun 02:00-03:00", "2026-10-25T01:30:00Z", true, "2026-10-25T02:00:00Z"},
		{"Berlin, fall: night shift 9h", be + "Sat 22:00-06:00", "2026-10-24T20:00:00Z", true, "2026-10-25T05:00:00Z"},
		{"Berlin, fall: end at 02:30 fires at first pass", be + "Sat 23:00-02:30", "2026-10-25T00:10:00Z", true, "2026-10-25T00:30:00Z"},
		{"Berlin, fall: replay stays out after the end", be + "Sat 23:00-02:30", "2026-10-25T01:10:00Z", false, "2026-10-31T22:00:00Z"},
		// Lord Howe 2026 (30-minute DST): falls 02:00 +11 → 01:30 +1030 on Sun
		// Apr 5 (Apr 4 15:00Z); springs 02:00 +1030 → 02:30 +11 on Sun Oct 4
		// (Oct 3 15:30Z).
		{"Lord Howe, fall: window lengthened to 6h30", lh + "00:00-06:00", "2026-04-04T13:00:00Z", true, "2026-04-04T19:30:00Z"},
		{"Lord Howe, fall: start in repeated half hour", lh + "Sun 01:45-06:00", "2026-04-04T14:44:00Z", false, "2026-04-04T14:45:00Z"},
		{"Lord Howe, fall: started at first pass", lh + "Sun 01:45-06:00", "2026-04-04T14:45:00Z", true, "2026-04-04T19:30:00Z"},
		{"Lord Howe, fall: replay keeps in", lh + "Sun 01:45-06:00", "2026-04-04T15:10:00Z", true, "2026-04-04T19:30:00Z"},
		{"Lord Howe, fall: end at first pass", lh + "Sat 20:00-01:45", "2026-04-04T09:00:00Z", true, "2026-04-04T14:45:00Z"},
		{"Lord Howe, fall: replay stays out", lh + "Sat 20:00-01:45", "2026-04-04T15:10:00Z", false, "2026-04-11T09:30:00Z"},
		{"Lord Howe, spring: window shortened to 5h30", lh + "00:00-06:00", "2026-10-03T13:30:00Z", true, "2026-10-03T19:00:00Z"},
		{"Lord Howe, spring: start in the gap at the jump", lh + "Sun 02:10-05:00", "2026-10-03T15:00:00Z", false, "2026-10-03T15:30:00Z"},
		{"Lord Howe, spring: started at the jump", lh + "Sun 02:10-05:00", "2026-10-03T15:30:00Z", true, "2026-10-03T18:00:00Z"},
		{"Lord Howe, spring: window inside the gap is empty", lh + "Sun 02:00-02:30", "2026-10-03T15:00:00Z", false, "2026-10-10T15:00:00Z"},
	})
}

func TestNextStart(t *testing.T) {
	sh := mustShift(t, "Mon-Fri 09:00-13:00")
	for _, c := range []struct{ at, want string }{
		{"2026-01-05T08:00:00Z", "2026-01-05T09:00:00Z"},
		{"2026-01-05T09:00:00Z", "2026-01-06T09:00:00Z"},
		{"2026-01-05T10:00:00Z", "2026-01-06T09:00:00Z"},
		{"2026-01-09T10:00:00Z", "2026-01-12T09:00:00Z"},
	} {
		got, ok := sh.NextStart(utc(c.at))
		if !ok || !got.Equal(utc(c.want)) {
			t.Errorf("NextStart(%s) = %s, %v; want %s", c.at, got, ok, c.want)
		}
	}
	if _, ok := mustShift(t, "00:00-24:00").NextStart(utc("2026-01-05T08:00:00Z")); ok {
		t.Error("an always-in shift has no start")
	}
	var none *Shift
	if in, _, ok := none.In(utc("2026-01-05T08:00:00Z")); !in || ok {
		t.Error("nil shift: want always in")
	}
	if _, ok := none.NextStart(utc("2026-01-05T08:00:00Z")); ok {
		t.Error("nil shift has no start")
	}
}

func TestShiftInKeepsLocation(t *testing.T) {
	sh := mustShift(t, "TZ=Europe/Berlin 09:00-17:00")
	loc := sh.Location()
	at := time.Date(2026, 1, 5, 8, 0, 0, 0, loc)
	_, next, _ := sh.In(at)
	if next.Location() != loc || next.Hour() != 9 {
		t.Errorf("next = %s, want 09:00 in Europe/Berlin", next)
	}
}
