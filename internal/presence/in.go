package presence

import (
	"sort"
	"time"
)

// Presence values (the presence_override and presence_seen columns).
const (
	In  = "in"
	Out = "out"
)

// maxOffset bounds |UTC offset| of any zone in the database (real offsets
// stay within ±15 h 57 min, historical local mean times included).
const maxOffset = 16 * 3600

// In reports whether t lies inside the shift (design: Shift grammar) and the
// next boundary: the first instant strictly after t at which the answer
// changes. ok is false when there is none, i.e. the windows cover the whole
// week. next is returned in t's location and falls on a whole second (a whole
// minute of local time, or a zone transition).
//
// Boundaries are computed from the windows and the zone's transitions, not
// by scanning time: cost is a handful of zone look-ups and binary searches,
// independent of how far away the boundary is. DST handling is described in
// the package documentation: an edge happens at the first instant the local
// clock reaches it, so skipped local times happen when the clock jumps over
// them and repeated local times happen once.
//
// A nil *Shift is always in (in true, ok false).
func (s *Shift) In(t time.Time) (in bool, next time.Time, ok bool) {
	if s == nil {
		return true, time.Time{}, false
	}
	w := s.highWater(t)
	wm := floorDiv(w, 60)
	mow := int32(floorMod(wm+unixEpochMondayOffset, weekMinutes))
	in, k := s.lookup(mow)
	if len(s.edges) == 0 {
		return in, time.Time{}, false
	}
	// Each pass moves to the next edge of the weekly set; a pass whose edge
	// falls in a DST gap together with the following edge changes nothing
	// (the answer at the jump is still `in`), so go on from there. Real zones
	// never swallow more than a pass or two; the bound only guards against
	// looping forever.
	for range 64 {
		var delta int64
		if k < len(s.edges) {
			delta = int64(s.edges[k] - mow)
		} else {
			delta = int64(s.edges[0] + weekMinutes - mow)
		}
		T, wT := s.resolve((wm + delta) * 60)
		wm = floorDiv(wT, 60)
		mow = int32(floorMod(wm+unixEpochMondayOffset, weekMinutes))
		var inT bool
		inT, k = s.lookup(mow)
		if inT != in {
			return in, time.Unix(T, 0).In(t.Location()), true
		}
	}
	return in, time.Time{}, false
}

// NextStart returns the first instant strictly after t at which the shift
// goes from out to in (a shift start), or ok false when there is none (the
// shift is always in). A nil *Shift has none.
func (s *Shift) NextStart(t time.Time) (start time.Time, ok bool) {
	in, next, ok := s.In(t)
	if !ok {
		return time.Time{}, false
	}
	if !in {
		return next, true
	}
	_, next, ok = s.In(next)
	return next, ok
}

// lookup returns the membership of minute-of-week mow and the index of the
// first edge after it.
func (s *Shift) lookup(mow int32) (bool, int) {
	e := s.edges
	k := sort.Search(len(e), func(i int) bool { return e[i] > mow })
	return s.base != (k%2 == 1), k
}

// highWater returns, in wall-clock seconds since the Unix epoch (local date
// and time read as if UTC), the highest local clock reading reached at or
// before t, rounded down to the second. It equals t's own reading except
// while the clock replays an interval after falling back: then it is the
// last second shown before the clock went back.
func (s *Shift) highWater(t time.Time) int64 {
	lt := t.In(s.loc)
	_, off := lt.Zone()
	w := t.Unix() + int64(off)
	if s.fixed {
		return w
	}
	start, _ := lt.ZoneBounds()
	if start.IsZero() {
		return w
	}
	su := start.Unix()
	if t.Unix()-su >= 2*24*3600 {
		return w // far past any replay (a fall-back repeats at most a day)
	}
	_, prev := start.Add(-time.Second).Zone()
	if hw := su + int64(prev); prev > off && w < hw {
		return hw - 1
	}
	return w
}

// resolve returns the first instant T (Unix seconds) at which the local
// clock reads wall-clock second E or later, and the reading at T. For a
// skipped E that is the instant the clock jumps past it; for a repeated E
// its first occurrence.
func (s *Shift) resolve(E int64) (T, wallT int64) {
	if s.fixed {
		_, off := time.Unix(E, 0).In(s.loc).Zone()
		return E - int64(off), E
	}
	// Every instant before g reads earlier than E, since offsets are below
	// maxOffset. Walk the zone's periods forward from g to the first one
	// whose clock range reaches past E.
	g := E - maxOffset
	for range 32 {
		lt := time.Unix(g, 0).In(s.loc)
		_, off := lt.Zone()
		a, b := lt.ZoneBounds()
		o := int64(off)
		if b.IsZero() || b.Unix()+o > E {
			T = E - o
			if !a.IsZero() && a.Unix() > T {
				T = a.Unix() // E lies in the gap before this period
			}
			return T, T + o
		}
		g = b.Unix()
	}
	// Unreachable with real zone data (periods last longer than 1 h).
	_, off := time.Unix(E, 0).In(s.loc).Zone()
	return E - int64(off), E
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
