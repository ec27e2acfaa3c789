package domain

import (
	"regexp"
	"strings"
	"unicode"
)

// ChannelMethod is the MCP notification a doorbell is sent as (DESIGN.md §2).
const ChannelMethod = "notifications/claude/channel"

// ChannelMessage is the params of one notifications/claude/channel: Content
// is one line of text; Meta has snake_case keys (letters, digits, underscore)
// and string values.
type ChannelMessage struct {
	Content string            `json:"content"`
	Meta    map[string]string `json:"meta"`
}

// TodoReady is the todo-ready signal carried over the bus after a todo is
// committed (DESIGN.md §3.8). It holds what the doorbell needs so no
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

// closeTagRE matches a closing channel tag in any letter case, with optional
// whitespace inside the tag, e.g. "</channel>", "</ Channel >".
var closeTagRE = regexp.MustCompile(`(?i)<\s*/\s*channel\s*>`)

// Neutralize makes todo-derived text safe to put inside a channel: every
// control or line-breaking character becomes a space (the content is one
// line), invisible format characters (bidi overrides, zero-width) are
// dropped, and any closing `</channel>` tag is defused to `</channel_>` so it
// cannot end the channel block early (DESIGN.md §2).
func Neutralize(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return ' '
		}
		if unicode.Is(unicode.Cf, r) {
			return -1 // bidi overrides, zero-width characters: invisible, can disguise text
		}
		return r
	}, s)
	return closeTagRE.ReplaceAllString(s, "</channel_>")
}

// TodoDoorbell builds the doorbell for one todo: content `todo ready in
// <queue>: <title> — claim todo_id <id>`, meta todo_id, queue and, when set,
// kind and source (DESIGN.md §2).
func TodoDoorbell(r TodoReady) ChannelMessage {
	meta := map[string]string{"todo_id": r.TodoID, "queue": r.Queue}
	if r.Kind != "" {
		meta["kind"] = Neutralize(r.Kind)
	}
	if r.Source != "" {
		meta["source"] = Neutralize(r.Source)
	}
	content := "todo ready in " + Neutralize(r.Queue) + ": " + Neutralize(r.Title) + " (claim todo_id " + r.TodoID + ")"
	return ChannelMessage{Content: content, Meta: meta}
}
