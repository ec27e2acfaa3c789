package presence

import (
	"strings"
	"time"
)

// Sources of an effective presence (design: Effective presence).
const (
	SourceAgent    = "agent"    // an override set by the agent (clock_in / clock_out)
	SourceOperator = "operator" // an override set by a person (REST, CLI, console)
	SourceShift    = "shift"    // the shift, no live override
	SourceDefault  = "default"  // no shift, no live override: in
)

// ByAgent is the override_by value of an override the agent set itself.
// An operator's override has ByOperator(personID).
const ByAgent = "agent"

// ByOperator returns the override_by value for person personID:
// "operator:<personID>".
func ByOperator(personID string) string { return "operator:" + personID }

// Inputs is everything Effective needs about one agent: its shift and the
// override columns (design: Presence columns).
type Inputs struct {
	// Shift is the parsed shift column, nil for none.
	Shift *Shift
	// Override is the presence_override column: "", "in" or "out". Any other
	// value is treated as no override.
	Override string
	// OverrideUntil is override_until: the override's own end (exclusive),
	// nil for none.
	OverrideUntil *time.Time
	// OverrideSetAt is override_set_at: when the override was written. The
	// first shift boundary after it ends the override. Left zero while an
	// override is present, it counts as set at the beginning of time: with a
	// shift the override has long been ended; without one it is live.
	OverrideSetAt time.Time
	// OverrideBy is override_by: "agent" (ByAgent) or "operator:<person_id>"
	// (ByOperator). "agent" and "agent:…" give source agent; anything else
	// gives source operator.
	OverrideBy string
}

// Effective applies the precedence rule (design: Effective presence) at now:
//
//  1. a live override decides: Override is "in" or "out", OverrideUntil is
//     nil or after now, and no shift boundary lies in (OverrideSetAt, now];
//  2. else, with a shift: "in" inside it, "out" outside (source "shift");
//  3. else "in" (source "default").
//
// presence is "in" or "out"; source is "agent", "operator", "shift" or
// "default". until is the first instant after now at which the returned
// presence (in/out) changes, or nil when it never changes with these inputs.
// A change of source alone is not a change: an "out" override that ends
// while the shift also says out keeps presence out, so until is the shift's
// next start, not the override's end. Likewise an override whose end is
// followed by the same answer from the shift or the default reports the
// next real change. until is a fresh pointer the caller may keep.
func Effective(in Inputs, now time.Time) (presence string, source string, until *time.Time) {
	if end, live := overrideLive(in, now); live {
		presence = in.Override
		source = sourceOf(in.OverrideBy)
		if end == nil {
			return presence, source, nil // never ends: no end, no boundaries
		}
		// From *end on, the shift (or the default) decides.
		after, next, ok := baseAt(in.Shift, *end)
		if after != presence {
			return presence, source, ptr(*end)
		}
		if !ok {
			return presence, source, nil
		}
		return presence, source, ptr(next)
	}
	if in.Shift == nil {
		return In, SourceDefault, nil
	}
	p, next, ok := baseAt(in.Shift, now)
	if !ok {
		return p, SourceShift, nil
	}
	return p, SourceShift, ptr(next)
}

// OverrideLive reports whether the override in in decides presence at now
// (rule 1 of Effective), and the instant it stops doing so: the earlier
// of OverrideUntil and the first shift boundary after OverrideSetAt, or nil
// when neither exists. An override that is not live never becomes live again
// with the same inputs; the caller may clear its columns.
func OverrideLive(in Inputs, now time.Time) (live bool, end *time.Time) {
	e, live := overrideLive(in, now)
	if !live || e == nil {
		return live, nil
	}
	return true, ptr(*e)
}

// overrideLive is OverrideLive without copying end.
func overrideLive(in Inputs, now time.Time) (*time.Time, bool) {
	if in.Override != In && in.Override != Out {
		return nil, false
	}
	if in.OverrideUntil != nil && !in.OverrideUntil.After(now) {
		return nil, false
	}
	end := in.OverrideUntil
	if in.Shift != nil {
		if _, b, ok := in.Shift.In(in.OverrideSetAt); ok {
			if !b.After(now) {
				return nil, false // a boundary lies in (set_at, now]
			}
			if end == nil || b.Before(*end) {
				end = &b
			}
		}
	}
	return end, true
}

// baseAt is what decides without an override: the shift, or "in".
func baseAt(sh *Shift, t time.Time) (presence string, next time.Time, ok bool) {
	if sh == nil {
		return In, time.Time{}, false
	}
	in, next, ok := sh.In(t)
	if in {
		return In, next, ok
	}
	return Out, next, ok
}

func sourceOf(by string) string {
	if by == ByAgent || strings.HasPrefix(by, ByAgent+":") {
		return SourceAgent
	}
	return SourceOperator
}

func ptr(t time.Time) *time.Time { return &t }

// Override is the content of the override columns (design: Presence columns).
type Override struct {
	Presence string     // "in" or "out"
	Until    *time.Time // its own end, exclusive; nil for none (the next shift boundary still ends it)
	SetAt    time.Time  // when it was set; the first shift boundary after it ends it
	By       string     // "agent" or "operator:<person_id>"
}
