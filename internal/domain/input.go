package domain

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen bounds display names (bytes; design: Input bounds).
const MaxNameLen = 200

// The input rules every use case applies to the fields it takes (design:
// Input bounds). Each returns nil or an invalid_argument *Error whose
// pointer is "/" + field (the field's JSON name).

// ValidateCode checks an optional code field (a kind, a source, a billing
// mode): "" or a name of ValidName's grammar.
func ValidateCode(field, v string) error {
	if v != "" && !ValidName(v) {
		return Errorf(CodeInvalidArgument, "%s %q must match ^[a-z0-9][a-z0-9._-]*$ (at most %d bytes)", field, v, MaxHandleLen).At("/" + field)
	}
	return nil
}

// ValidateDisplayName checks a display name (pointer /name): at most
// MaxNameLen bytes of UTF-8 without control characters.
func ValidateDisplayName(n string) error {
	if len(n) > MaxNameLen || !utf8.ValidString(n) || strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return Errorf(CodeInvalidArgument, "name must be at most %d bytes of UTF-8 without control characters", MaxNameLen).At("/name")
	}
	return nil
}

// ValidateBilling checks an agent's billing configuration: mode and
// toolClass are codes, modes at most MaxBillingModes distinct names, and a
// mode, when both are set, one of modes.
func ValidateBilling(mode string, modes []string, toolClass string) error {
	if err := ValidateCode("billing_mode", mode); err != nil {
		return err
	}
	if len(modes) > MaxBillingModes {
		return Errorf(CodeInvalidArgument, "at most %d billing modes, got %d", MaxBillingModes, len(modes)).At("/billing_modes")
	}
	seen := map[string]bool{}
	for i, m := range modes {
		if !ValidName(m) {
			return Errorf(CodeInvalidArgument, "billing mode %q must match ^[a-z0-9][a-z0-9._-]*$", m).At(fmt.Sprintf("/billing_modes/%d", i))
		}
		if seen[m] {
			return Errorf(CodeInvalidArgument, "billing mode %q is listed twice", m).At(fmt.Sprintf("/billing_modes/%d", i))
		}
		seen[m] = true
	}
	if mode != "" && len(modes) > 0 && !seen[mode] {
		return Errorf(CodeInvalidArgument, "billing_mode %q is not among billing_modes %v", mode, modes).At("/billing_mode")
	}
	return ValidateCode("tool_class", toolClass)
}

// ValidateText checks a one-line text field: valid UTF-8, at most max
// bytes, no control characters (NUL, line breaks, escapes …); required
// refuses a blank one.
func ValidateText(field, v string, max int, required bool) error {
	if required && strings.TrimSpace(v) == "" {
		return Errorf(CodeInvalidArgument, "%s is required", field).At("/" + field)
	}
	if len(v) > max || !utf8.ValidString(v) {
		return Errorf(CodeInvalidArgument, "%s must be valid UTF-8 of at most %d bytes", field, max).At("/" + field)
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return Errorf(CodeInvalidArgument, "%s contains a control character (U+%04X) at byte %d; it must be one line of text", field, []rune(v[i:])[0], i).At("/" + field)
	}
	return nil
}

// ValidateNote checks free text that may span lines (a title, a failure
// reason): valid UTF-8, at most max bytes, no NUL.
func ValidateNote(field, v string, max int) error {
	if len(v) > max || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return Errorf(CodeInvalidArgument, "%s must be valid UTF-8 without NUL bytes, at most %d bytes", field, max).At("/" + field)
	}
	return nil
}

// ValidateJSON checks an optional JSON field: at most max bytes of valid
// JSON in UTF-8.
func ValidateJSON(field string, raw json.RawMessage, max int) error {
	if len(raw) == 0 {
		return nil
	}
	if len(raw) > max {
		return Errorf(CodeInvalidArgument, "%s is %d bytes; at most %d are allowed", field, len(raw), max).At("/" + field)
	}
	if !json.Valid(raw) || !utf8.Valid(raw) {
		return Errorf(CodeInvalidArgument, "%s is not valid JSON in UTF-8", field).At("/" + field)
	}
	return nil
}
