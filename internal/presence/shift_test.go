package presence

import (
	"errors"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
)

func mustShift(tb testing.TB, s string) *Shift {
	tb.Helper()
	sh, err := ParseShift(s)
	if err != nil {
		tb.Fatalf("ParseShift(%q): %v", s, err)
	}
	return sh
}

func TestParseShiftAccepts(t *testing.T) {
	tests := []struct {
		in, canonical string
	}{
		{"Mon-Fri 09:00-13:00", "Mon-Fri 09:00-13:00"},
		{"TZ=America/Los_Angeles Mon-Fri 09:00-13:00", "TZ=America/Los_Angeles Mon-Fri 09:00-13:00"},
		{"CRON_TZ=Europe/Berlin Mon-Fri 09:00-17:00", "TZ=Europe/Berlin Mon-Fri 09:00-17:00"},
		{"TZ=UTC 09:00-17:00", "09:00-17:00"},
		{"Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00", "Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00"},
		{"Mon-Fri 09:00-12:00;Mon-Fri 13:00-17:00", "Mon-Fri 09:00-12:00; Mon-Fri 13:00-17:00"},
		{"Sun-Thu 22:00-02:00", "Sun-Thu 22:00-02:00"},
		{"Sat,Sun 10:00-12:00", "Sat,Sun 10:00-12:00"},
		{"Fri-Mon 10:00-12:00", "Fri-Mon 10:00-12:00"},
		{"fri-MON 10:00-12:00", "Fri-Mon 10:00-12:00"},
		{"Mon,Tue,Wed 10:00-12:00", "Mon-Wed 10:00-12:00"},
		{"Mon,Wed,Fri 10:00-12:00", "Mon,Wed,Fri 10:00-12:00"},
		{"Sun,Mon 10:00-12:00", "Sun,Mon 10:00-12:00"},
		{"Wed,Fri-Mon 10:00-12:00", "Wed,Fri-Mon 10:00-12:00"},
		{"Mon-Sun 10:00-12:00", "10:00-12:00"},
		{"Tue-Mon 10:00-12:00", "10:00-12:00"},
		{"Mon,Mon 10:00-12:00", "Mon 10:00-12:00"},
		{"Mon-Fri,Wed 10:00-12:00", "Mon-Fri 10:00-12:00"},
		{"00:00-24:00", "00:00-24:00"},
		{"12:00-00:00", "12:00-24:00"},
		{"22:00-06:00", "22:00-06:00"},
		{"10:00-09:00", "10:00-09:00"},
		{"Mon 23:59-24:00", "Mon 23:59-24:00"},
		{"Mon-Fri   09:00-13:00", "Mon-Fri 09:00-13:00"},
		{"TZ=Asia/Kolkata Mon 09:00-10:00 ;  Tue 09:00-10:00", "TZ=Asia/Kolkata Mon 09:00-10:00; Tue 09:00-10:00"},
		{"TZ=Australia/Lord_Howe 00:00-06:00", "TZ=Australia/Lord_Howe 00:00-06:00"},
		{"TZ=Etc/GMT+5 09:00-17:00", "TZ=Etc/GMT+5 09:00-17:00"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			sh := mustShift(t, tt.in)
			if got := sh.String(); got != tt.canonical {
				t.Errorf("String() = %q, want %q", got, tt.canonical)
			}
			if sh.Text() != tt.in {
				t.Errorf("Text() = %q, want the original %q", sh.Text(), tt.in)
			}
			again := mustShift(t, sh.String())
			if !again.Equal(sh) {
				t.Errorf("ParseShift(String()) not Equal to the original")
			}
		})
	}
}

func TestParseShiftRejects(t *testing.T) {
	tests := []struct {
		in, detail string // detail: a substring of the error detail
	}{
		{"", "shift: must not be blank"},
		{"   ", "shift: must not be blank"},
		{" Mon 09:00-10:00", "leading or trailing spaces"},
		{"Mon-Fri 09:00-17:00 ", "leading or trailing spaces"},
		{"09:00-10:00\n", "control character (U+000A)"},
		{"Mon\t09:00-10:00", "control character (U+0009)"},
		{"\t\n", "shift: must not be blank"},
		{"09:00", `shift: window 1 "09:00": times "09:00": want HH:MM-HH:MM`},
		{"25:00-26:00", `shift: window 1 "25:00-26:00": start "25:00": hour must be 00-23`},
		{"09:00-17:00; 25:00-26:00", `shift: window 2 "25:00-26:00": start "25:00": hour must be 00-23`},
		{"09:00-24:01", `end "24:01": hour must be 00-23`},
		{"09:60-10:00", `start "09:60": minute must be 00-59`},
		{"9:00-17:00", `start "9:00": hour must be two digits`},
		{"09:00-17:0", `end "17:0": minute must be two digits`},
		{"0900-1700", `start "0900": want HH:MM`},
		{"09:00-", `end "": missing time`},
		{"-17:00", `start "": missing time`},
		{"09:00-10:00-11:00", `stray "-"`},
		{"24:00-10:00", `start "24:00": 24:00 is allowed only as an end`},
		{"09:00-09:00", `window 1 "09:00-09:00": start equals end`},
		{"00:00-00:00", "start equals end"},
		{"Mon-Fri 09:00-13:00;", `window 2 is empty (stray ";")`},
		{";Mon-Fri 09:00-13:00", `window 1 is empty (stray ";")`},
		{"Mon 09:00-10:00;; Tue 09:00-10:00", `window 2 is empty`},
		{"Mon,,Tue 09:00-10:00", `days "Mon,,Tue": stray ","`},
		{"Mon, 09:00-10:00", `stray ","`},
		{",Mon 09:00-10:00", `stray ","`},
		{"Mon- 09:00-10:00", `days "Mon-": stray "-" in "Mon-"`},
		{"-Mon 09:00-10:00", `stray "-"`},
		{"Mon--Fri 09:00-10:00", `stray "-"`},
		{"Mon-Tue-Wed 09:00-10:00", `stray "-"`},
		{"Mon-Mon 09:00-10:00", `range "Mon-Mon" starts and ends on the same day`},
		{"Monday 09:00-10:00", `unknown day "Monday"`},
		{"Mon-Xyz 09:00-10:00", `unknown day "Xyz"`},
		{"Mon, Tue 09:00-10:00", `unexpected space`},
		{"Mon 09:00 - 10:00", `unexpected space`},
		{"09:00-10:00 Mon", `unknown day "09:00"`},
		{"TZ=Mars/Olympus 09:00-10:00", `shift: unknown zone "Mars/Olympus"`},
		{"TZ=Local 09:00-10:00", `unknown zone "Local"`},
		{"TZ=../etc/passwd 09:00-10:00", `unknown zone`},
		{"TZ= 09:00-10:00", `empty zone in "TZ="`},
		{"TZ=UTC", `must be followed by a space and a window`},
		{"TZ=UTC ;09:00-10:00", `window 1 is empty`},
		{"tz=UTC 09:00-10:00", `unknown prefix "tz=UTC"`},
		{"ZONE=UTC 09:00-10:00", `unknown prefix`},
		{"TZ=UTC TZ=UTC 09:00-10:00", `unknown day "TZ=UTC"`},
		{strings.Repeat("Mon 09:00-10:00; ", 70), "longer than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			sh, err := ParseShift(tt.in)
			if err == nil {
				t.Fatalf("ParseShift(%q) = %q, want an error", tt.in, sh)
			}
			var de *domain.Error
			if !errors.As(err, &de) {
				t.Fatalf("error %T is not a *domain.Error", err)
			}
			if de.Code != domain.CodeInvalidArgument || de.Pointer != "/shift" {
				t.Errorf("code %q pointer %q, want invalid_argument /shift", de.Code, de.Pointer)
			}
			if !strings.HasPrefix(de.Detail, "shift: ") {
				t.Errorf("detail %q does not name shift", de.Detail)
			}
			if !strings.Contains(de.Detail, tt.detail) {
				t.Errorf("detail %q, want it to contain %q", de.Detail, tt.detail)
			}
		})
	}
}

func TestShiftEqual(t *testing.T) {
	a := mustShift(t, "Mon-Fri 09:00-12:00; Mon-Fri 12:00-17:00")
	b := mustShift(t, "TZ=UTC Fri,Thu,Wed,Tue,Mon 09:00-17:00")
	if !a.Equal(b) {
		t.Error("adjacent windows should equal their union")
	}
	if a.Equal(mustShift(t, "TZ=Europe/Berlin Mon-Fri 09:00-17:00")) {
		t.Error("different zones are not equal")
	}
	if a.Equal(mustShift(t, "Mon-Fri 09:00-16:59")) {
		t.Error("different windows are not equal")
	}
	var n *Shift
	if !n.Equal(nil) || n.Equal(a) || a.Equal(nil) {
		t.Error("nil handling")
	}
	if n.String() != "" || n.Text() != "" {
		t.Error("nil shift prints empty")
	}
}
