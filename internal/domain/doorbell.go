package domain

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode"

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
// (design: Neutralised text): it is NFKC-folded (full-width and other
// compatibility forms become their plain equivalents, Unicode spaces become
// U+0020), every control or line-breaking character becomes a space (the
// content is one line), invisible format characters (category Cf: bidi
// overrides, zero-width characters) are dropped, and every opening or closing
// channel tag — `<channel …`, `</channel`, in any case, with white space,
// Unicode spaces or combining marks anywhere inside the tag name — is defused
// to `<channel_` / `</channel_`, so the text can neither end the channel block
// early nor open a new one. Neutralize is idempotent.
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
	return channelTagRE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.Contains(m, "/") {
			return "</channel_"
		}
		return "<channel_"
	})
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
