package intake

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rollcall/rollcall/internal/domain"
)

// Fields are the placeholders a title template may use, and the only data
// it can reach: `{event}`, `{action}`, `{repository}`, `{number}`,
// `{title}`, `{url}`, `{sender}`, `{labels}` (comma-joined), `{label}`,
// `{name}`, `{conclusion}`, `{branch}`, `{reviewer}`.
var Fields = []string{"event", "action", "repository", "number", "title", "url", "sender", "labels", "label", "name", "conclusion", "branch", "reviewer"}

// MaxTemplateLen bounds a title template (bytes).
const MaxTemplateLen = 500

// defaultTemplates are the titles of the supported events and actions.
var defaultTemplates = map[string]string{
	"pull_request.opened":           "PR #{number} opened: {title}",
	"pull_request.ready_for_review": "PR #{number} ready for review: {title}",
	"pull_request.review_requested": "PR #{number} review requested: {title}",
	"issues.opened":                 "Issue #{number} opened: {title}",
	"issues.labeled":                "Issue #{number} labeled {label}: {title}",
	"issue_comment.created":         "Comment by {sender} on #{number}: {title}",
	"check_run.completed":           "Check {name} failed on {repository} {branch}",
	"workflow_run.completed":        "Workflow {name} failed on {repository} {branch}",
}

// DefaultTemplate returns the title template used for event.action when a
// hook has none, e.g. "PR #{number} review requested: {title}".
func DefaultTemplate(event, action string) string {
	if t, ok := defaultTemplates[event+"."+action]; ok {
		return t
	}
	return "{event} {action} on {repository}"
}

// ValidateTemplate checks a title template: at most MaxTemplateLen bytes of
// UTF-8, every `{name}` one of Fields, literal braces doubled (`{{`, `}}`).
// Errors are invalid_argument naming the byte offset (pointer
// /title_template).
func ValidateTemplate(t string) error {
	if len(t) > MaxTemplateLen || !utf8.ValidString(t) {
		return domain.Errorf(domain.CodeInvalidArgument, "title_template must be UTF-8 of at most %d bytes", MaxTemplateLen).At("/title_template")
	}
	_, err := expand(t, func(string) string { return "" })
	return err
}

// Render expands the template t (DefaultTemplate of the event when t is
// "") with the event's fields and makes the result safe as a todo title:
// neutralised like doorbell text (domain.Neutralize: one line, no
// invisible characters, no closing channel tag), trimmed, cut to
// domain.MaxTitleLen bytes. An empty result falls back to "<event>
// <action>". A template that does not validate renders the default.
func Render(t string, ev Event) string {
	if t == "" {
		t = DefaultTemplate(ev.Event, ev.Action)
	}
	vals := ev.fieldValues()
	out, err := expand(t, func(k string) string { return vals[k] })
	if err != nil {
		out, _ = expand(DefaultTemplate(ev.Event, ev.Action), func(k string) string { return vals[k] })
	}
	return Safe(out, strings.TrimSpace(ev.Event+" "+ev.Action))
}

// Safe neutralises third-party text for a todo title (domain.Neutralize),
// trims it and cuts it to domain.MaxTitleLen bytes on a rune boundary;
// empty → fallback.
func Safe(s, fallback string) string {
	s = strings.TrimSpace(domain.Neutralize(strings.ToValidUTF8(s, "\uFFFD")))
	if len(s) > domain.MaxTitleLen {
		i := domain.MaxTitleLen
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = strings.TrimSpace(s[:i])
	}
	if s == "" {
		s = fallback
	}
	if s == "" {
		s = "delivery"
	}
	return s
}

func (e Event) fieldValues() map[string]string {
	num := ""
	if e.Number != 0 {
		num = strconv.Itoa(e.Number)
	}
	return map[string]string{
		"event": e.Event, "action": e.Action, "repository": e.Repository, "number": num,
		"title": e.Title, "url": e.URL, "sender": e.Sender, "labels": strings.Join(e.Labels, ","),
		"label": e.Label, "name": e.Name, "conclusion": e.Conclusion, "branch": e.Branch, "reviewer": e.Reviewer,
	}
}

// expand is the whole template language: `{name}` is replaced by
// value(name) for a name in Fields, `{{` and `}}` are literal braces,
// anything else is copied. There is no other syntax (no method calls, no
// conditionals), so a template can reach nothing but the listed fields.
func expand(t string, value func(string) string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(t); {
		c := t[i]
		switch {
		case c == '{' && i+1 < len(t) && t[i+1] == '{':
			b.WriteByte('{')
			i += 2
		case c == '}' && i+1 < len(t) && t[i+1] == '}':
			b.WriteByte('}')
			i += 2
		case c == '{':
			end := strings.IndexByte(t[i+1:], '}')
			if end < 0 {
				return "", domain.Errorf(domain.CodeInvalidArgument, "title_template has an unclosed { at byte %d (write {{ for a literal brace)", i).At("/title_template")
			}
			name := t[i+1 : i+1+end]
			if !slices.Contains(Fields, name) {
				return "", domain.Errorf(domain.CodeInvalidArgument, "title_template placeholder {%s} at byte %d is not one of %s", name, i, fmt.Sprint(Fields)).At("/title_template")
			}
			b.WriteString(value(name))
			i += end + 2
		case c == '}':
			return "", domain.Errorf(domain.CodeInvalidArgument, "title_template has a stray } at byte %d (write }} for a literal brace)", i).At("/title_template")
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), nil
}
