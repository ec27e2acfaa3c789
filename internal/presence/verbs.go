package presence

import (
	"strings"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

// Limits of clock_in's `for` (design: Self verbs). The cap exists so a prompt
// injection cannot keep an agent awake against its owner's shift.
const (
	DefaultClockIn = time.Hour     // `for` when the agent gives none
	MaxClockIn     = 8 * time.Hour // largest `for` accepted
)

// ClockOut is the `clock_out {}` self verb (design: Self verbs) at now: an
// "out" override by the agent. With a shift it lasts until the shift's next
// start (and, like every override, ends at the first shift boundary after now);
// with no shift, or a shift that never starts (always in), it has no end. It
// returns Keep when a live "out" override by the agent with the same end is
// already in place, so a repeated clock_out changes nothing, and while an
// operator's out override is live (the agent is out already; replacing the
// owner's override with its own would let a later clock_in clear it).
func ClockOut(cur Inputs, now time.Time) Change {
	if operatorOutLive(cur, now) {
		return Change{Action: Keep}
	}
	var until *time.Time
	if start, ok := cur.Shift.NextStart(now); ok {
		until = &start
	}
	return setOrKeep(cur, now, Override{Presence: Out, Until: until, SetAt: now, By: ByAgent})
}

// ClockIn is the `clock_in {for}` self verb (design: Self verbs) at now; d is
// `for` (DefaultClockIn when the agent gave none) and b the agent's self
// clock-in budget. d must be in (0, MaxClockIn]; otherwise the error is a
// *domain.Error with code invalid_argument and pointer "/for", and nothing
// changes. It returns the change to store and the budget to store with it
// (b itself unless the change is a Set).
//
// The owner's word beats the agent's: while an operator's out override is
// live, ClockIn answers forbidden with reason operator_override and changes
// nothing; an operator's live in override is kept as it is.
//
// If the shift puts the agent out at now, the change is an "in" override by
// the agent until the earliest of now+d, the shift's next start and what
// is left of b.Cap in this off-shift stretch (the stretch that the next
// shift start ends): the agent's own in overrides of one stretch together
// cover at most b.Cap, so calling again cannot extend past it. Nothing left
// (or b.Cap 0) answers forbidden with reason self_clock_in_cap. Keep when
// exactly that override is already live.
//
// Otherwise (no shift, or inside the shift) it clears an "out" override the
// agent set itself, live or not, and keeps anything else. Without a shift
// an agent is in unless overridden, so ClockIn never sets an in override
// and the cap has nothing to count (design: Self clock-in cap).
func ClockIn(cur Inputs, b Budget, d time.Duration, now time.Time) (Change, Budget, error) {
	if err := checkFor(d); err != nil {
		return Change{}, b, err
	}
	if operatorOutLive(cur, now) {
		return Change{}, b, forbidden(ReasonOperatorOverride,
			"your owner put you out (operator override); clock_in cannot clear it — only your owner can")
	}
	if _, live := overrideLive(cur, now); live && cur.Override == In && sourceOf(cur.OverrideBy) == SourceOperator {
		return Change{Action: Keep}, b, nil
	}
	if cur.Shift != nil {
		if in, next, ok := cur.Shift.In(now); !in && ok {
			return clockInOffShift(cur, b, d, now, next)
		}
	}
	if cur.Override == Out && sourceOf(cur.OverrideBy) == SourceAgent {
		return Change{Action: Clear}, b, nil
	}
	return Change{Action: Keep}, b, nil
}

// ParseFor parses clock_in's `for` argument in Go duration syntax ("2h",
// "90m", "1h30m") and checks it is in (0, MaxClockIn]. Errors are
// *domain.Error with code invalid_argument and pointer "/for". An absent
// argument is the caller's to replace with DefaultClockIn; "" is an error.
func ParseFor(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, forErr("%q is not a duration (want e.g. \"2h\" or \"90m\")", s)
	}
	if err := checkFor(d); err != nil {
		return 0, err
	}
	return d, nil
}

func checkFor(d time.Duration) error {
	if d <= 0 {
		return forErr("must be positive, got %s", d)
	}
	if d > MaxClockIn {
		return forErr("must be at most %s, got %s", domain.FormatDuration(MaxClockIn), domain.FormatDuration(d))
	}
	return nil
}

func forErr(format string, args ...any) error {
	return domain.Errorf(domain.CodeInvalidArgument, "for: "+format, args...).At("/for")
}

// OperatorOverride is `PUT /v1/agents/{ref}/presence`
// (design: Operator overrides) by person personID at now: an override with
// presence "in" or "out" and an optional end, with no cap. Like every override
// it still ends at the first shift boundary after now. Errors are *domain.Error
// invalid_argument with pointer "/presence" (not "in" or "out") or "/until"
// (not after now). `DELETE …/presence` is Change{Action: Clear}.
func OperatorOverride(cur Inputs, personID, presence string, until *time.Time, now time.Time) (Change, error) {
	if presence != In && presence != Out {
		return Change{}, domain.Errorf(domain.CodeInvalidArgument,
			`presence: must be "in" or "out", got %q`, presence).At("/presence")
	}
	if until != nil && !until.After(now) {
		return Change{}, domain.Errorf(domain.CodeInvalidArgument,
			"until: must be after now").At("/until")
	}
	return setOrKeep(cur, now, Override{Presence: presence, Until: until, SetAt: now, By: ByOperator(personID)}), nil
}
