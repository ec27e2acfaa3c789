package presence

import (
	"fmt"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// Self clock-in cap (design: Self clock-in cap): how much of one off-shift
// stretch the agent's own in-overrides may cover together. The owner sets it
// per agent.
const (
	DefaultSelfClockInCap = 8 * time.Hour
	MaxSelfClockInCap     = 7 * 24 * time.Hour
)

// Reasons of the forbidden answers of ClockIn.
const (
	// ReasonOperatorOverride: an operator's live out override decides; the
	// agent cannot clear it.
	ReasonOperatorOverride = "operator_override"
	// ReasonSelfClockInCap: the self clock-in cap of this off-shift stretch
	// is used up (or the owner set it to 0).
	ReasonSelfClockInCap = "self_clock_in_cap"
)

// Budget is an agent's self clock-in allowance and its ledger: the
// self_clock_in_cap column (set by the owner) and the self_in_stretch /
// self_in_used columns ClockIn keeps.
//
// Used is how much of the off-shift stretch that ends at Stretch (the
// shift start closing it) the agent's own in-overrides have been granted,
// each counted in full when granted; a re-call refunds the unexpired part
// of the live own in-override it replaces, so repeating clock_in never adds
// up to more than Cap. A ledger of another stretch (Stretch not the current
// one) counts as empty.
type Budget struct {
	Cap     time.Duration // 0 = the agent may not clock itself in outside its shift
	Stretch time.Time     // zero = no ledger yet
	Used    time.Duration
}

// DefaultBudget is the budget of an agent whose owner set no cap.
func DefaultBudget() Budget { return Budget{Cap: DefaultSelfClockInCap} }

// ParseSelfClockInCap parses the owner's self_clock_in_cap in Go duration
// syntax ("8h", "90m", "0") and checks it is in [0, MaxSelfClockInCap].
// Errors are *domain.Error invalid_argument with pointer
// /self_clock_in_cap.
func ParseSelfClockInCap(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, capErr("%q is not a duration (want e.g. \"8h\", \"90m\" or \"0\")", s)
	}
	if d < 0 || d > MaxSelfClockInCap {
		return 0, capErr("must be between 0 and %s, got %s", domain.FormatDuration(MaxSelfClockInCap), domain.FormatDuration(d))
	}
	if d%time.Second != 0 {
		return 0, capErr("must be a whole number of seconds, got %s", d)
	}
	return d, nil
}

// FormatCap writes a cap the way ParseSelfClockInCap reads it: "8h",
// "1h30m", "0".
func FormatCap(d time.Duration) string { return domain.FormatDuration(d) }

func capErr(format string, args ...any) error {
	return domain.Errorf(domain.CodeInvalidArgument, "self_clock_in_cap: "+format, args...).At("/self_clock_in_cap")
}

// operatorOutLive reports whether an operator's out override decides at
// now.
func operatorOutLive(cur Inputs, now time.Time) bool {
	_, live := overrideLive(cur, now)
	return live && cur.Override == Out && sourceOf(cur.OverrideBy) == SourceOperator
}

func forbidden(reason, format string, args ...any) error {
	return &domain.Error{Code: domain.CodeForbidden, Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// clockInOffShift is ClockIn when the shift puts the agent out at now and
// the next shift start is stretchEnd: an in override by the agent until the
// earliest of now+d, stretchEnd and what is left of the budget.
func clockInOffShift(cur Inputs, b Budget, d time.Duration, now, stretchEnd time.Time) (Change, Budget, error) {
	nb := b
	if !nb.Stretch.Equal(stretchEnd) {
		nb.Stretch, nb.Used = stretchEnd, 0
	}
	// A live in override of the agent's own is replaced: give back what it
	// has not covered yet.
	if end, live := overrideLive(cur, now); live && cur.Override == In && sourceOf(cur.OverrideBy) == SourceAgent && end != nil {
		nb.Used -= end.Sub(now)
		if nb.Used < 0 {
			nb.Used = 0
		}
	}
	grant := min(d, stretchEnd.Sub(now), b.Cap-nb.Used)
	if grant <= 0 {
		if b.Cap == 0 {
			return Change{}, b, forbidden(ReasonSelfClockInCap,
				"your owner does not let you clock yourself in outside your shift (self_clock_in_cap is 0); your shift starts at %s",
				stretchEnd.UTC().Format(time.RFC3339))
		}
		return Change{}, b, forbidden(ReasonSelfClockInCap,
			"you have used your self clock-in cap of %s for this off-shift stretch; your shift starts at %s",
			domain.FormatDuration(b.Cap), stretchEnd.UTC().Format(time.RFC3339))
	}
	until := now.Add(grant)
	ch := setOrKeep(cur, now, Override{Presence: In, Until: &until, SetAt: now, By: ByAgent})
	if ch.Action == Keep {
		return ch, b, nil
	}
	nb.Used += grant
	return ch, nb, nil
}

// BudgetOf returns the agent's self clock-in budget (design: Self clock-in
// cap): the owner's cap and the stored ledger.
func BudgetOf(a *domain.Agent) Budget {
	b := Budget{Cap: time.Duration(a.SelfClockInCap), Used: a.Presence.SelfInUsed}
	if a.Presence.SelfInStretch != nil {
		b.Stretch = *a.Presence.SelfInStretch
	}
	return b
}
