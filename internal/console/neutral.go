package console

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Neutralize makes every character that changes how text around it is
// shown, or is not shown at all, visible as "[U+XXXX]" (design: Operator overrides):
// Unicode format characters (Cf: bidi embeddings, overrides and isolates
// U+202A–U+202E and U+2066–U+2069, marks U+200E/U+200F/U+061C, zero-width
// U+200B–U+200D and U+2060–U+2064, U+FEFF, the soft hyphen …), line and
// paragraph separators (Zl, Zp), control characters other than tab, line
// feed and carriage return (Cc, C1 included), and invalid UTF-8 (as
// [U+FFFD]). A title such as "invoice\u202Efdp.exe" is shown as
// "invoice[U+202E]fdp.exe", not as "invoiceexe.pdf". Everything else is
// kept byte for byte.
func Neutralize(s string) string {
	if !needsNeutralizing(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if hidden(r, n) {
			fmt.Fprintf(&b, "[U+%04X]", r)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsNeutralizing(s string) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if hidden(r, n) {
			return true
		}
		i += n
	}
	return false
}

func hidden(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n <= 1:
		return true
	case r == '\t' || r == '\n' || r == '\r':
		return false
	}
	return unicode.In(r, unicode.Cf, unicode.Cc, unicode.Zl, unicode.Zp)
}

// writeNeutral renders through render into a buffer and writes the result
// neutralized: the templates hold no such characters, so only data is
// changed (HTML escapes such as &#x202e; are decoded by the browser, but
// html/template never emits them for these characters).
func writeNeutral(w io.Writer, render func(io.Writer) error) error {
	var buf bytes.Buffer
	err := render(&buf)
	_, werr := io.WriteString(w, Neutralize(buf.String()))
	if err != nil {
		return err
	}
	return werr
}
