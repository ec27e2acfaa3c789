package intake

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v89/github"

	"github.com/rollcall/rollcall/internal/strictjson"
)

// GitHub delivery headers (https://docs.github.com/webhooks: "Delivery
// headers"). Header.Get canonicalises, so GitHub's mixed case matches.
const (
	HeaderGitHubSignature = github.SHA256SignatureHeader // "X-Hub-Signature-256"
	HeaderGitHubEvent     = github.EventTypeHeader       // "X-Github-Event"
	HeaderGitHubDelivery  = github.DeliveryIDHeader      // "X-Github-Delivery"
)

// todoEvents lists the GitHub events and actions that make todos
// (design: Hooks); check_run and workflow_run count only when completed with the
// conclusion "failure".
var todoEvents = map[string][]string{
	"pull_request":  {"opened", "ready_for_review", "review_requested"},
	"issues":        {"opened", "labeled"},
	"issue_comment": {"created"},
	"check_run":     {"completed"},
	"workflow_run":  {"completed"},
}

// SupportedEvents returns the GitHub events that can make todos, sorted.
func SupportedEvents() []string {
	out := make([]string, 0, len(todoEvents))
	for e := range todoEvents {
		out = append(out, e)
	}
	slices.Sort(out)
	return out
}

// SupportedActions returns the actions of event that can make todos (nil
// for an event that makes none).
func SupportedActions(event string) []string { return slices.Clone(todoEvents[event]) }

// Supported reports whether a decoded event is one that makes todos: a
// listed event and action and, for check_run and workflow_run, the
// conclusion "failure".
func (e Event) Supported() bool {
	if !slices.Contains(todoEvents[e.Event], e.Action) {
		return false
	}
	if e.Event == "check_run" || e.Event == "workflow_run" {
		return e.Conclusion == "failure"
	}
	return true
}

// VerifyGitHub checks a GitHub delivery's X-Hub-Signature-256 (HMAC-SHA256
// of the raw body under secret) with go-github's ValidatePayloadFromBody
// before anything of the body is parsed, and returns the JSON payload
// (the body itself for application/json, the "payload" form field for
// application/x-www-form-urlencoded). Only the SHA-256 header counts: a
// delivery signed only with the legacy SHA-1 X-Hub-Signature is unsigned.
// Errors: ErrUnsigned (no X-Hub-Signature-256), ErrContentType,
// ErrBadSignature.
func VerifyGitHub(secret string, h http.Header, body []byte) ([]byte, error) {
	sig := h.Get(HeaderGitHubSignature)
	if sig == "" {
		return nil, ErrUnsigned
	}
	if !strings.HasPrefix(sig, "sha256=") {
		return nil, ErrBadSignature
	}
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || (mt != "application/json" && mt != "application/x-www-form-urlencoded") {
		return nil, ErrContentType
	}
	payload, err := github.ValidatePayloadFromBody(mt, bytes.NewReader(body), sig, []byte(secret))
	if err != nil {
		return nil, ErrBadSignature
	}
	return payload, nil
}

// DecodeGitHub decodes the verified payload of a GitHub delivery of the
// given event (X-GitHub-Event) with go-github's ParseWebHook into an Event.
// ok is false for an event Rollcall does not take (answered 202, ignored);
// "ping" decodes to Event{Event: "ping"} with ok true.
// Errors: ErrBody (not valid JSON for the event, or a member name
// repeated in one object, also in another letter case).
func DecodeGitHub(event string, payload []byte) (ev Event, ok bool, err error) {
	if event != "ping" && todoEvents[event] == nil {
		return Event{Event: cut(event)}, false, nil
	}
	// go-github decodes with encoding/json v1, which takes the last of a
	// repeated name and matches names in any letter case: one reading of
	// a body (design: One reading of a body).
	if err := strictjson.CheckNames(payload); err != nil {
		return Event{Event: event}, false, fmt.Errorf("%w: %v", ErrBody, err)
	}
	parsed, perr := github.ParseWebHook(event, payload)
	if perr != nil {
		return Event{Event: event}, false, fmt.Errorf("%w: %v", ErrBody, perr)
	}
	// A taken event's delivery always carries its object (the pull request,
	// issue, check run or workflow run): its absence is a malformed body
	// (400), never a todo without a subject, and the decoding below may then
	// read the object's fields without nil checks.
	missing := func(object string) (Event, bool, error) {
		return Event{Event: event}, false, fmt.Errorf("%w: a %s delivery without its %q object", ErrBody, event, object)
	}
	ev = Event{Event: event}
	switch p := parsed.(type) {
	case *github.PingEvent:
	case *github.PullRequestEvent:
		if p.PullRequest == nil {
			return missing("pull_request")
		}
		pr := p.GetPullRequest()
		ev.Action, ev.Number, ev.Title, ev.URL = p.GetAction(), pr.GetNumber(), pr.GetTitle(), pr.GetHTMLURL()
		if ev.Number == 0 {
			ev.Number = p.GetNumber()
		}
		ev.Labels = labelNames(pr.Labels)
		ev.Label = p.GetLabel().GetName()
		ev.Branch = pr.GetHead().GetRef()
		ev.Reviewer = p.GetRequestedReviewer().GetLogin()
		if ev.Reviewer == "" {
			ev.Reviewer = p.GetRequestedTeam().GetSlug()
		}
	case *github.IssuesEvent:
		if p.Issue == nil {
			return missing("issue")
		}
		is := p.GetIssue()
		ev.Action, ev.Number, ev.Title, ev.URL = p.GetAction(), is.GetNumber(), is.GetTitle(), is.GetHTMLURL()
		ev.Labels, ev.Label = labelNames(is.Labels), p.GetLabel().GetName()
	case *github.IssueCommentEvent:
		if p.Issue == nil {
			return missing("issue")
		}
		is := p.GetIssue()
		ev.Action, ev.Number, ev.Title = p.GetAction(), is.GetNumber(), is.GetTitle()
		ev.URL = p.GetComment().GetHTMLURL()
		if ev.URL == "" {
			ev.URL = is.GetHTMLURL()
		}
		ev.Labels = labelNames(is.Labels)
	case *github.CheckRunEvent:
		if p.CheckRun == nil {
			return missing("check_run")
		}
		cr := p.GetCheckRun()
		ev.Action, ev.Name, ev.Conclusion, ev.URL = p.GetAction(), cr.GetName(), cr.GetConclusion(), cr.GetHTMLURL()
		ev.Branch = cr.GetCheckSuite().GetHeadBranch()
		if len(cr.PullRequests) > 0 {
			ev.Number = cr.PullRequests[0].GetNumber()
		}
	case *github.WorkflowRunEvent:
		if p.WorkflowRun == nil {
			return missing("workflow_run")
		}
		wr := p.GetWorkflowRun()
		ev.Action, ev.Name, ev.Conclusion, ev.URL = p.GetAction(), wr.GetName(), wr.GetConclusion(), wr.GetHTMLURL()
		if ev.Name == "" {
			ev.Name = p.GetWorkflow().GetName()
		}
		ev.Branch = wr.GetHeadBranch()
		if len(wr.PullRequests) > 0 {
			ev.Number = wr.PullRequests[0].GetNumber()
		}
	default:
		return Event{Event: event}, false, nil
	}
	// Every event taken carries the repository and the sender.
	rs := parsed.(interface {
		GetRepo() *github.Repository
		GetSender() *github.User
	})
	ev.Repository, ev.Sender = rs.GetRepo().GetFullName(), rs.GetSender().GetLogin()
	ev.clip()
	return ev, true, nil
}

func labelNames(ls []*github.Label) []string {
	var out []string
	for _, l := range ls {
		if n := l.GetName(); n != "" && len(out) < maxLabels {
			out = append(out, cut(n))
		}
	}
	return out
}

// clip cuts every text field to maxFieldLen bytes.
func (e *Event) clip() {
	for _, p := range []*string{&e.Event, &e.Action, &e.Repository, &e.Title, &e.URL, &e.Sender, &e.Label, &e.Name, &e.Conclusion, &e.Branch, &e.Reviewer} {
		*p = cut(*p)
	}
}
