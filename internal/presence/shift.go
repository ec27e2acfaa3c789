package presence

import (
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // the zone database travels with the binary (design: Shift grammar)
	"unicode"

	"github.com/rollcall/rollcall/internal/domain"
)

// MaxShiftLen bounds the length of a shift string in bytes.
const MaxShiftLen = 1024

const (
	dayMinutes  = 24 * 60
	weekMinutes = 7 * dayMinutes
	// unixEpochMondayOffset is the number of days from the Monday before
	// 1970-01-01 (a Thursday) to 1970-01-01: minute-of-week = (wall minutes
	// since epoch + 3 days) mod week, with Monday 00:00 = 0.
	unixEpochMondayOffset = 3 * dayMinutes
)

// dayNames are the day names of the grammar, Monday first (bit 0 = Monday).
var dayNames = [7]string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// Shift is a parsed shift (design: Shift grammar): a zone and a set of weekly
// wall-clock windows. Build one with [ParseShift]. A *Shift is immutable and
// safe for concurrent use. A nil *Shift means "no shift" to [Effective]; its
// In reports always in.
type Shift struct {
	text    string         // as given to ParseShift
	loc     *time.Location // never nil
	fixed   bool           // loc has one offset forever (UTC, Etc/GMT+5, …)
	windows []window       // in the order written

	// The union of the windows as a weekly set of wall-clock minutes,
	// Monday 00:00 = 0: edges holds, ascending, every minute m at which
	// membership differs from minute m-1 (mod the week); base is the
	// membership of the week's last minute (Sunday 23:59). No edges means
	// the shift covers the whole week.
	edges []int32
	base  bool
}

// window is one `[days ]HH:MM-HH:MM` term. days is a bit set (bit 0 =
// Monday) of the days on which the window starts; start and end are minutes
// after local midnight, end in 1..1440. end <= start runs into the next day.
type window struct {
	days       uint8
	start, end int
}

// ParseShift parses a shift string (design: Shift grammar):
//
//	shift  = [ ("TZ=" | "CRON_TZ=") zone " " ] window *( ";" window )
//	window = [ days " " ] HH ":" MM "-" HH ":" MM
//	days   = day-or-range *( "," day-or-range )   ; Mon..Sun, any case
//	range  = day "-" day                          ; may wrap: Fri-Mon
//
// No day list means every day; the day list names the day a window starts.
// Start is inclusive, end exclusive; `24:00` is allowed only as an end; an
// end at or before its start runs into the next day. No zone prefix means
// UTC; `Local` is rejected.
//
// Whitespace: the string is trimmed; spaces and tabs may surround ";", and
// one or more of them separate the zone prefix from the first window and a
// day list from its times. No whitespace is allowed inside a zone, a day list
// or a time range. Duplicate or overlapping days and windows are allowed and
// merge. The day range `Mon-Mon` is rejected as ambiguous.
//
// Errors are *domain.Error with code invalid_argument, pointer "/shift" and a
// detail that starts with "shift:" and names the window at fault, e.g.
// `shift: window 2 "25:00-26:00": start "25:00": hour must be 00-23`.
// Rejected: blank, longer than MaxShiftLen bytes, an unknown prefix or zone,
// a malformed day or time, a single-digit hour or minute, stray separators
// (a leading, trailing or doubled ";" or ",", "Mon-"), control characters
// (tabs, line breaks), leading or trailing spaces, and start == end.
func ParseShift(text string) (*Shift, error) {
	if len(text) > MaxShiftLen {
		return nil, shiftErr("longer than %d bytes", MaxShiftLen)
	}
	rest := strings.TrimSpace(text)
	if rest == "" {
		return nil, shiftErr("must not be blank")
	}
	if i := strings.IndexFunc(text, unicode.IsControl); i >= 0 {
		return nil, shiftErr("control character (U+%04X) at byte %d; use single spaces", []rune(text[i:])[0], i)
	}
	if rest != text {
		return nil, shiftErr("leading or trailing spaces")
	}
	s := &Shift{text: text, loc: time.UTC, fixed: true}

	first, after, hasSpace := cutSpace(rest)
	if strings.Contains(first, "=") {
		var zone string
		switch {
		case strings.HasPrefix(first, "TZ="):
			zone = first[len("TZ="):]
		case strings.HasPrefix(first, "CRON_TZ="):
			zone = first[len("CRON_TZ="):]
		default:
			return nil, shiftErr("unknown prefix %q (want TZ=<zone> or CRON_TZ=<zone>)", first)
		}
		if zone == "" {
			return nil, shiftErr("empty zone in %q", first)
		}
		if !hasSpace {
			return nil, shiftErr("zone prefix %q must be followed by a space and a window", first)
		}
		loc, err := loadZone(zone)
		if err != nil {
			return nil, shiftErr("unknown zone %q", zone)
		}
		s.loc = loc
		s.fixed = isFixed(loc)
		rest = after
	}

	parts := strings.Split(rest, ";")
	for i, part := range parts {
		n := i + 1
		part = strings.Trim(part, " \t")
		if part == "" {
			return nil, shiftErr("window %d is empty (stray \";\")", n)
		}
		w, err := parseWindow(part)
		if err != "" {
			return nil, shiftErr("window %d %q: %s", n, part, err)
		}
		s.windows = append(s.windows, w)
	}
	s.edges, s.base = weekEdges(s.windows)
	return s, nil
}

func shiftErr(format string, args ...any) error {
	return domain.Errorf(domain.CodeInvalidArgument, "shift: "+format, args...).At("/shift")
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' }

// cutSpace splits s at its first run of spaces or tabs.
func cutSpace(s string) (before, after string, found bool) {
	i := strings.IndexAny(s, " \t")
	if i < 0 {
		return s, "", false
	}
	j := i
	for j < len(s) && isSpace(s[j]) {
		j++
	}
	return s[:i], s[j:], true
}

var zoneCache sync.Map // zone name → *time.Location

// loadZone loads a zone by name, caching the result. "Local" and "" are
// rejected: the host zone must not matter.
func loadZone(name string) (*time.Location, error) {
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("zone %q not allowed", name)
	}
	if v, ok := zoneCache.Load(name); ok {
		return v.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zoneCache.Store(name, loc)
	return loc, nil
}

// isFixed reports whether loc has a single offset for all time.
func isFixed(loc *time.Location) bool {
	start, end := time.Unix(0, 0).In(loc).ZoneBounds()
	return start.IsZero() && end.IsZero()
}

// parseWindow parses `[days ]HH:MM-HH:MM`; a non-empty string is the error.
func parseWindow(s string) (window, string) {
	daysText, times, hasSpace := cutSpace(s)
	w := window{days: 0x7f}
	if hasSpace {
		if strings.ContainsAny(times, " \t") {
			return w, `want "[days ]HH:MM-HH:MM" (unexpected space)`
		}
		days, err := parseDays(daysText)
		if err != "" {
			return w, err
		}
		w.days = days
	} else {
		times = daysText
	}
	startText, endText, ok := strings.Cut(times, "-")
	if !ok {
		return w, fmt.Sprintf("times %q: want HH:MM-HH:MM", times)
	}
	if strings.Contains(endText, "-") {
		return w, fmt.Sprintf("times %q: stray \"-\"", times)
	}
	start, err := parseClock(startText)
	if err != "" {
		return w, fmt.Sprintf("start %q: %s", startText, err)
	}
	if start == dayMinutes {
		return w, fmt.Sprintf("start %q: 24:00 is allowed only as an end", startText)
	}
	end, err := parseClock(endText)
	if err != "" {
		return w, fmt.Sprintf("end %q: %s", endText, err)
	}
	if end == start {
		return w, "start equals end"
	}
	w.start, w.end = start, end
	if end == 0 {
		w.end = dayMinutes // HH:MM-00:00 ends at the next midnight
	}
	return w, ""
}

// parseClock parses HH:MM (two digits each, 00:00-23:59, or 24:00) into
// minutes after midnight.
func parseClock(s string) (int, string) {
	if s == "" {
		return 0, "missing time (want HH:MM)"
	}
	h, m, ok := strings.Cut(s, ":")
	if !ok {
		return 0, "want HH:MM"
	}
	if !digits(h) {
		return 0, "hour must be two digits"
	}
	if !digits(m) {
		return 0, "minute must be two digits"
	}
	hh := int(h[0]-'0')*10 + int(h[1]-'0')
	mm := int(m[0]-'0')*10 + int(m[1]-'0')
	if hh == 24 && mm == 0 {
		return dayMinutes, ""
	}
	if hh > 23 {
		return 0, "hour must be 00-23 (24 only in 24:00)"
	}
	if mm > 59 {
		return 0, "minute must be 00-59"
	}
	return hh*60 + mm, ""
}

func digits(s string) bool {
	return len(s) == 2 && s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9'
}

// parseDays parses a comma list of day names and (possibly wrapping) ranges.
func parseDays(s string) (uint8, string) {
	var set uint8
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			return 0, fmt.Sprintf("days %q: stray \",\"", s)
		}
		from, to, isRange := strings.Cut(item, "-")
		a, ok := parseDay(from)
		if !ok {
			if from == "" {
				return 0, fmt.Sprintf("days %q: stray \"-\" in %q", s, item)
			}
			return 0, fmt.Sprintf("days %q: unknown day %q (want Mon..Sun)", s, from)
		}
		if !isRange {
			set |= 1 << a
			continue
		}
		if to == "" || strings.Contains(to, "-") {
			return 0, fmt.Sprintf("days %q: stray \"-\" in %q", s, item)
		}
		b, ok := parseDay(to)
		if !ok {
			return 0, fmt.Sprintf("days %q: unknown day %q (want Mon..Sun)", s, to)
		}
		if a == b {
			return 0, fmt.Sprintf("days %q: range %q starts and ends on the same day", s, item)
		}
		for d := a; ; d = (d + 1) % 7 {
			set |= 1 << d
			if d == b {
				break
			}
		}
	}
	return set, ""
}

func parseDay(s string) (int, bool) {
	for i, n := range dayNames {
		if strings.EqualFold(s, n) {
			return i, true
		}
	}
	return 0, false
}

// weekEdges computes the union of the windows over one week of wall-clock
// minutes and returns its flip points and the membership of the last minute.
func weekEdges(ws []window) ([]int32, bool) {
	var cover [weekMinutes + 1]int16
	for _, w := range ws {
		for d := 0; d < 7; d++ {
			if w.days&(1<<d) == 0 {
				continue
			}
			s := d*dayMinutes + w.start
			e := d*dayMinutes + w.end
			if w.end <= w.start {
				e += dayMinutes
			}
			if e <= weekMinutes {
				cover[s]++
				cover[e]--
			} else { // wraps past Sunday 24:00
				cover[s]++
				cover[weekMinutes]--
				cover[0]++
				cover[e-weekMinutes]--
			}
		}
	}
	var member [weekMinutes]bool
	n := int16(0)
	for m := 0; m < weekMinutes; m++ {
		n += cover[m]
		member[m] = n > 0
	}
	base := member[weekMinutes-1]
	var edges []int32
	prev := base
	for m := 0; m < weekMinutes; m++ {
		if member[m] != prev {
			edges = append(edges, int32(m))
			prev = member[m]
		}
	}
	return edges, base
}

// Text returns the shift exactly as it was given to ParseShift.
func (s *Shift) Text() string {
	if s == nil {
		return ""
	}
	return s.text
}

// Location returns the shift's zone (time.UTC when the shift has no prefix).
func (s *Shift) Location() *time.Location {
	if s == nil {
		return time.UTC
	}
	return s.loc
}

// String returns the canonical form: a `TZ=<zone> ` prefix unless the zone
// is UTC, then the windows in the order written, joined by "; ". Each day
// list is rewritten as its runs of consecutive days (wrapping past Sunday),
// a run of three or more as a range (`Fri-Mon`), shorter runs as single days
// (`Sat,Sun`); a window on every day has no day list. `00:00` as an end is
// written `24:00`. ParseShift(s.String()) is Equal to s. A nil *Shift
// returns "".
func (s *Shift) String() string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	if name := s.loc.String(); name != "UTC" {
		b.WriteString("TZ=")
		b.WriteString(name)
		b.WriteByte(' ')
	}
	for i, w := range s.windows {
		if i > 0 {
			b.WriteString("; ")
		}
		if w.days != 0x7f {
			writeDays(&b, w.days)
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%02d:%02d-%02d:%02d", w.start/60, w.start%60, w.end/60, w.end%60)
	}
	return b.String()
}

// writeDays writes a day set (not all seven days) as comma-joined runs,
// ordered by the weekday each run starts on.
func writeDays(b *strings.Builder, days uint8) {
	has := func(d int) bool { return days&(1<<((d+7)%7)) != 0 }
	first := true
	for d := 0; d < 7; d++ {
		if !has(d) || has(d-1) {
			continue // not the start of a run
		}
		n := 1
		for n < 7 && has(d+n) {
			n++
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		switch n {
		case 1:
			b.WriteString(dayNames[d])
		case 2:
			b.WriteString(dayNames[d] + "," + dayNames[(d+1)%7])
		default:
			b.WriteString(dayNames[d] + "-" + dayNames[(d+n-1)%7])
		}
	}
}

// Equal reports whether s and o decide presence identically: the same zone
// and the same weekly set of wall-clock minutes, however they are written.
// Two nil shifts are equal.
func (s *Shift) Equal(o *Shift) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.loc.String() != o.loc.String() || s.base != o.base || len(s.edges) != len(o.edges) {
		return false
	}
	for i := range s.edges {
		if s.edges[i] != o.edges[i] {
			return false
		}
	}
	return true
}
