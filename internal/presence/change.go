package presence

import "time"

// Action says what a Change does to the override columns.
type Action int

const (
	// Keep: write nothing; the columns already say this.
	Keep Action = iota
	// Set: write Change.Override into the override columns.
	Set
	// Clear: set presence_override, override_until, override_set_at and
	// override_by to null.
	Clear
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "keep"
	case Set:
		return "set"
	case Clear:
		return "clear"
	}
	return "action(?)"
}

// Change is what a presence verb asks the caller to store. It never changes
// the shift.
type Change struct {
	Action   Action
	Override Override // meaningful only when Action == Set
}

// Apply returns in with the change applied to its override fields.
func (c Change) Apply(in Inputs) Inputs {
	switch c.Action {
	case Set:
		in.Override = c.Override.Presence
		in.OverrideUntil = c.Override.Until
		in.OverrideSetAt = c.Override.SetAt
		in.OverrideBy = c.Override.By
	case Clear:
		in.Override, in.OverrideUntil, in.OverrideSetAt, in.OverrideBy = "", nil, time.Time{}, ""
	}
	return in
}

// setOrKeep returns Keep when cur already holds a live override with the
// same presence, author and end as o, and Set otherwise.
func setOrKeep(cur Inputs, now time.Time, o Override) Change {
	if _, live := overrideLive(cur, now); live &&
		cur.Override == o.Presence && cur.OverrideBy == o.By && sameTime(cur.OverrideUntil, o.Until) {
		return Change{Action: Keep}
	}
	return Change{Action: Set, Override: o}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
