package intake

import (
	"slices"
	"strings"

	"github.com/rollcall/rollcall/internal/domain"
)

// Filter limits (bounded so a hook row stays small).
const (
	maxFilterItems = 50
	maxFilterLen   = 200
)

// ValidateFilter checks a hook filter: each list at most 50 distinct
// non-empty entries of at most 200 bytes without control characters;
// repositories "owner/name"; actions "event" or "event.action" of a
// supported event and action (SupportedEvents). Errors are invalid_argument
// with pointers /filter/<list>/N.
func ValidateFilter(f domain.HookFilter) error {
	lists := []struct {
		name string
		l    []string
	}{{"repositories", f.Repositories}, {"labels", f.Labels}, {"actions", f.Actions}}
	for _, list := range lists {
		ptr := "/filter/" + list.name
		if len(list.l) > maxFilterItems {
			return domain.Errorf(domain.CodeInvalidArgument, "filter.%s has %d entries; at most %d are allowed", list.name, len(list.l), maxFilterItems).At(ptr)
		}
		seen := map[string]bool{}
		for i, v := range list.l {
			p := ptr + "/" + itoa(i)
			if v == "" || len(v) > maxFilterLen || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				return domain.Errorf(domain.CodeInvalidArgument, "filter.%s entries must be 1 to %d bytes without control characters", list.name, maxFilterLen).At(p)
			}
			key := strings.ToLower(v)
			if seen[key] {
				return domain.Errorf(domain.CodeInvalidArgument, "filter.%s lists %q twice", list.name, v).At(p)
			}
			seen[key] = true
			switch list.name {
			case "repositories":
				owner, name, ok := strings.Cut(v, "/")
				if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
					return domain.Errorf(domain.CodeInvalidArgument, "filter repository %q must be owner/name", v).At(p)
				}
			case "actions":
				ev, act, hasAct := strings.Cut(v, ".")
				if actionsTaken[ev] == nil {
					return domain.Errorf(domain.CodeInvalidArgument, "filter action %q: event %q is not one Rollcall takes (%v)", v, ev, SupportedEvents()).At(p)
				}
				if hasAct && !slices.Contains(actionsTaken[ev], act) {
					return domain.Errorf(domain.CodeInvalidArgument, "filter action %q: %s takes the actions %v", v, ev, actionsTaken[ev]).At(p)
				}
			}
		}
	}
	return nil
}

// Match reports whether a supported event passes the filter, and if not,
// why (a short reason for the delivery log): the repository must be listed
// (case-insensitive) when repositories are given, the event or event.action
// listed when actions are given, and the subject carry one of the labels
// (case-insensitive) when labels are given.
func Match(f domain.HookFilter, ev Event) (bool, string) {
	if len(f.Repositories) > 0 && !slices.ContainsFunc(f.Repositories, func(r string) bool { return strings.EqualFold(r, ev.Repository) }) {
		return false, "repository not in the filter"
	}
	if len(f.Actions) > 0 && !slices.ContainsFunc(f.Actions, func(a string) bool { return a == ev.Event || a == ev.Event+"."+ev.Action }) {
		return false, "action not in the filter"
	}
	if len(f.Labels) > 0 {
		has := func(l string) bool {
			return slices.ContainsFunc(ev.Labels, func(x string) bool { return strings.EqualFold(x, l) }) || strings.EqualFold(ev.Label, l)
		}
		if !slices.ContainsFunc(f.Labels, has) {
			return false, "no label of the filter"
		}
	}
	return true, ""
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
