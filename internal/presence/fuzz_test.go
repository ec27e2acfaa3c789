package presence

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/testkit/fuzzseed"
)

// FuzzParseShift: ParseShift never panics; a rejection is an invalid_argument
// *domain.Error at /shift naming shift; an accepted string's canonical form
// re-parses to an Equal shift, is a fixed point, and answers In identically.
func FuzzParseShift(f *testing.F) {
	fuzzseed.Strings(f,
		"Mon-Fri 09:00-13:00", "TZ=America/Los_Angeles Mon-Fri 09:00-13:00",
		"CRON_TZ=Europe/Berlin Sat 22:00-06:00", "Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00",
		"Sun-Thu 22:00-02:00", "Sat,Sun 10:00-12:00", "Fri-Mon 00:00-24:00", "12:00-00:00",
		"TZ=Australia/Lord_Howe Sun 01:45-06:00", "Mon,,Tue 09:00-10:00", "Mon- 09:00-10:00",
		"09:00-17:00;", "25:00-26:00", "9:00-17:00", "TZ=Local 09:00-10:00", "  mon 09:00-10:00  ",
		"TZ=Asia/Kolkata\twed,FRI-sun 23:59-00:01 ; 10:00-09:00",
	)
	probe := []time.Time{
		time.Date(2026, 3, 8, 9, 30, 0, 0, time.UTC),
		time.Date(2026, 11, 1, 8, 45, 0, 0, time.UTC),
		time.Date(2026, 4, 4, 15, 10, 0, 0, time.UTC),
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := ParseShift(s)
		if err != nil {
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != domain.CodeInvalidArgument || de.Pointer != "/shift" ||
				!strings.HasPrefix(de.Detail, "shift: ") {
				t.Fatalf("ParseShift(%q): error %#v is not invalid_argument at /shift", s, err)
			}
			return
		}
		c := sh.String()
		again, err := ParseShift(c)
		if err != nil {
			t.Fatalf("ParseShift(%q) ok, but its String %q does not parse: %v", s, c, err)
		}
		if !again.Equal(sh) {
			t.Fatalf("ParseShift(%q).String() = %q re-parses to a different shift", s, c)
		}
		if again.String() != c {
			t.Fatalf("String is not a fixed point: %q → %q", c, again.String())
		}
		for _, at := range probe {
			in1, n1, ok1 := sh.In(at)
			in2, n2, ok2 := again.In(at)
			if in1 != in2 || ok1 != ok2 || !n1.Equal(n2) {
				t.Fatalf("%q and %q disagree at %s", s, c, at)
			}
			if ok1 && !n1.After(at) {
				t.Fatalf("%q: next %s not after %s", s, n1, at)
			}
		}
	})
}
