package domain

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ChannelMethod is the MCP notification a doorbell is sent as
// (design: Doorbell message).
const ChannelMethod = "notifications/claude/channel"

// ChannelMessage is the params of one notifications/claude/channel: Content
// is one line of text; Meta has snake_case keys (letters, digits, underscore)
// and string values.
type ChannelMessage struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// TodoReady is the todo-ready signal carried over the bus after a todo is
// committed (design: Ring on create). It holds what the doorbell needs so no
// instance has to read the row to ring it.
type TodoReady struct {
	AgentID string `json:"agent_id"`
	TodoID  string `json:"todo_id"`
	Queue   string `json:"queue"`
	Title   string `json:"title"`
	Kind    string `json:"kind,omitempty"`
	Source  string `json:"source,omitempty"`
	// PoolID is set for a pooled todo (design: Pool routing): AgentID is
	// then the member rung, or "" when no member is rung for it yet.
	PoolID string `json:"pool_id,omitempty"`
}

var metaKeyRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// ValidMetaKey reports whether k is allowed as a channel meta key.
func ValidMetaKey(k string) bool { return metaKeyRE.MatchString(k) }

// channelTagRE matches the start of an opening or closing channel tag as a
// reader (Claude Code, or the model reading the line) could take it, once
// the text is NFKC-folded (full-width ＜／ｃｈａｎｎｅｌ, U+FE64, the
// Unicode spaces U+00A0 and U+3000 fold to ASCII): `<`, an optional `/`,
// the letters of "channel" in any case, with any run of white space,
// Unicode spaces (Z) or combining marks (M) between any two of them, and
// an optional `_` after it (a tag already defused).
var channelTagRE = func() *regexp.Regexp {
	const gap = `[\s\p{Z}\p{M}]*`
	pat := `(?i)<` + gap + `(/?)` + gap
	for i, c := range "channel" {
		if i > 0 {
			pat += gap
		}
		pat += string(c)
	}
	return regexp.MustCompile(pat + `(_?)`)
}()

// Neutralize makes todo-derived text safe to put inside a channel
// (design: Neutralised text): it is NFKC-folded (full-width and other compatibility forms
// become their plain equivalents, Unicode spaces become U+0020), every
// control or line-breaking character becomes a space (the content is one
// line), invisible format characters (category Cf: bidi overrides,
// zero-width characters) are dropped, and every opening or closing channel
// tag — `<channel …`, `</channel`, in any case, with white space, Unicode
// spaces or combining marks anywhere inside the tag name — is defused to
// `<channel_` / `</channel_`, so the text can neither end the channel block
// early nor open a new one. Look-alikes count as the characters they
// imitate when tags are sought (see lookalikes: `‹/channel›`, `〈/channel〉`,
// `<сhannel` with a Cyrillic с are defused too), but text that is no tag
// keeps them. Neutralize is idempotent.
func Neutralize(s string) string {
	if plainASCII(s) {
		return s // nothing to fold, map or defuse: the common case
	}
	clean := func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return ' '
		}
		if unicode.Is(unicode.Cf, r) {
			return -1 // bidi overrides, zero-width characters: invisible, can disguise text
		}
		return r
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(clean, norm.NFKC.String(strings.Map(clean, s)))
	return defuseTags(s)
}

// lookalikes maps characters a reader could take for `<`, `/` or a letter
// of "channel" (after NFKC, which already folds full-width and small
// forms) to that character: angle brackets and quotation marks (‹ 〈 ⟨ ❮ …),
// slashes (⁄ ∕ ╱ ノ …), Cyrillic, Greek and Armenian letters and Latin small
// capitals (с һ а п е ӏ …), and I, 1, | for l. Neutralize looks for channel
// tags in the text seen through this map; the text itself keeps them.
var lookalikes = func() map[rune]rune {
	m := map[rune]rune{}
	for to, from := range map[rune]string{
		'<': "\u02C2\u1438\u16B2\u2039\u2329\u276C\u276E\u2770\u27E8\u29FC\u3008\u227A\U0001D236",
		'/': "\u2044\u2215\u2571\u29F8\u3033\u30CE\u4E3F\u31D3\u1735\U0001D23A",
		'c': "\u0441\u0421\u03F2\u03F9\u1D04\u2CA5\u2CA4",
		'h': "\u04BB\u04BA\u0570\u029C\u043D\u041D\u0397",
		'a': "\u0430\u0410\u0391\u03B1\u1D00\u0251",
		'n': "\u0578\u039D\u043F\u0274\u03B7",
		'e': "\u0435\u0415\u0395\u04BD\u1D07\u212E",
		'l': "\u04C0\u04CF\u0399\u0406\u05C0\u01C0\u2223\u029FI1|",
	} {
		for _, r := range from {
			m[r] = to
		}
	}
	return m
}()

// defuseTags replaces every channel tag start that channelTagRE finds in
// s seen through lookalikes with `<channel_` or `</channel_`; everything
// else of s is kept as it is.
func defuseTags(s string) string {
	sk := make([]byte, 0, len(s))
	pos := make([]int, 0, len(s)+1) // pos[j]: offset in s of the rune that skeleton byte j belongs to
	for i, r := range s {
		if to, ok := lookalikes[r]; ok {
			r = to
		}
		n := len(sk)
		sk = utf8.AppendRune(sk, r)
		for range len(sk) - n {
			pos = append(pos, i)
		}
	}
	pos = append(pos, len(s))
	ms := channelTagRE.FindAllSubmatchIndex(sk, -1)
	if len(ms) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + len(ms))
	last := 0
	for _, m := range ms {
		b.WriteString(s[last:pos[m[0]]])
		if m[3] > m[2] { // the optional slash matched
			b.WriteString("</channel_")
		} else {
			b.WriteString("<channel_")
		}
		last = pos[m[1]]
	}
	b.WriteString(s[last:])
	return b.String()
}

// plainASCII reports whether s is printable ASCII without '<'.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '<' {
			return false
		}
	}
	return true
}

// TodoDoorbell builds the doorbell for one todo. It stands alone
// (design: Doorbell message: the first doorbell of a fresh Claude Code session
// reaches the model without the server's instructions), so its one line names
// the tool to call with the todo_id and what follows:
//
//	todo ready in <queue>: "<title>" — call claim {"todo_id":"<id>"}, then complete {"todo_id":"<id>"} when done
//
// The title is neutralised and JSON-quoted; no payload. Meta: todo_id, queue
// and, when set, kind and source (design: Doorbell message).
func TodoDoorbell(r TodoReady) ChannelMessage {
	meta := map[string]string{"todo_id": Neutralize(r.TodoID), "queue": Neutralize(r.Queue)}
	if r.Kind != "" {
		meta["kind"] = Neutralize(r.Kind)
	}
	if r.Source != "" {
		meta["source"] = Neutralize(r.Source)
	}
	id := jsonString(meta["todo_id"])
	content := "todo ready in " + meta["queue"] + ": " + jsonString(Neutralize(r.Title)) +
		` — call claim {"todo_id":` + id + `}, then complete {"todo_id":` + id + `} when done`
	return ChannelMessage{Content: content, Meta: meta}
}

// jsonString quotes s as a JSON string without HTML escaping (the text is
// already neutralised; `<` stays readable).
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
