package liveness

import "github.com/rollcall/rollcall/internal/domain"

// form is one string form of (design: Heartbeat body): a first byte, further bytes and
// a length bound. The forms admit only ASCII, so path separators,
// whitespace, control and bidi characters are unrepresentable (design: Value forms).
type form struct {
	what        string // "a name", …
	re          string // the pattern, for messages
	max         int    // bytes
	first, rest [256]bool
}

var (
	// nameForm: ^[a-z0-9][a-z0-9._-]*$, ≤ MaxNameLen.
	nameForm = newForm("a name", `^[a-z0-9][a-z0-9._-]*$`, MaxNameLen, "a-z0-9", "a-z0-9._-")
	// versionForm: ^[0-9A-Za-z][0-9A-Za-z.+_-]*$, ≤ MaxVersionLen.
	versionForm = newForm("a version", `^[0-9A-Za-z][0-9A-Za-z.+_-]*$`, MaxVersionLen, "0-9A-Za-z", "0-9A-Za-z.+_-")
	// codeForm: ^[a-z0-9][a-z0-9_.:-]*$, ≤ MaxCodeLen.
	codeForm = newForm("a code", `^[a-z0-9][a-z0-9_.:-]*$`, MaxCodeLen, "a-z0-9", "a-z0-9_.:-")
)

// newForm builds a form from two character classes written as in a regular
// expression bracket (ranges x-y, a trailing - is literal).
func newForm(what, re string, max int, first, rest string) form {
	f := form{what: what, re: re, max: max}
	fill := func(t *[256]bool, class string) {
		for i := 0; i < len(class); i++ {
			if i+2 < len(class) && class[i+1] == '-' {
				for c := class[i]; c <= class[i+2]; c++ {
					t[c] = true
				}
				i += 2
				continue
			}
			t[class[i]] = true
		}
	}
	fill(&f.first, first)
	fill(&f.rest, rest)
	return f
}

func (f *form) match(b []byte) bool {
	if len(b) == 0 || len(b) > f.max || !f.first[b[0]] {
		return false
	}
	for _, c := range b[1:] {
		if !f.rest[c] {
			return false
		}
	}
	return true
}

func (f *form) mismatch() *domain.Error {
	return invalid("must be %s: %s, at most %d bytes", f.what, f.re, f.max)
}

func invalid(format string, args ...any) *domain.Error {
	return domain.Errorf(domain.CodeInvalidArgument, format, args...)
}
