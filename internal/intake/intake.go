// Package intake holds the pure rules that turn a webhook delivery into a
// todo (design: Hook signatures): signature verification (GitHub's
// X-Hub-Signature-256 through go-github, Standard Webhooks through its Go
// library), decoding of the events a review/triage agent needs into a small
// Event, the hook filter, and a tiny placeholder template for titles.
//
// Nothing here does I/O or reads a clock. Every function that takes a
// delivery's body expects the signature to have been verified first: the
// callers (app.Service.Deliver) verify, then decode.
//
// Third-party text is untrusted: a rendered title is neutralised with
// domain.Neutralize (the doorbell's own rule) and cut to
// domain.MaxTitleLen; templates reach only the fields listed in Fields.
package intake

import (
	"errors"
	"time"
	"unicode/utf8"
)

// Errors of verification and decoding. The caller maps them to HTTP:
// ErrUnsigned and ErrBadSignature → 401, ErrStale → 400, ErrContentType →
// 415, ErrBody → 400.
var (
	ErrUnsigned     = errors.New("the delivery carries no signature")
	ErrBadSignature = errors.New("the delivery's signature does not verify")
	ErrStale        = errors.New("the delivery's timestamp is outside the 5 minute tolerance")
	ErrContentType  = errors.New("the delivery's Content-Type is not supported")
	ErrBody         = errors.New("the delivery's body is not a valid event")
)

// Tolerance is how far a Standard Webhooks timestamp may lie from now, in
// either direction (design: Hook signatures).
const Tolerance = 5 * time.Minute

// MaxBody is the largest delivery body read (1 MiB; larger → 413).
const MaxBody = 1 << 20

// Limits on what a delivery may contribute to a todo.
const (
	maxLabels   = 20  // labels kept in the payload and for filtering
	maxFieldLen = 300 // bytes of any one selected text field
)

// Event is what a verified delivery says, reduced to the fields a todo may
// carry. Strings are as the sender sent them (untrusted), cut to a few
// hundred bytes; only Title is later neutralised for the doorbell.
type Event struct {
	Event      string   `json:"event"`                // X-GitHub-Event, e.g. "pull_request"
	Action     string   `json:"action,omitempty"`     // e.g. "review_requested"
	Repository string   `json:"repository,omitempty"` // "owner/name"
	Number     int      `json:"number,omitempty"`     // pull request or issue number
	Title      string   `json:"title,omitempty"`      // of the pull request or issue
	URL        string   `json:"url,omitempty"`        // html_url of the subject
	Sender     string   `json:"sender,omitempty"`     // login of the sender
	Labels     []string `json:"labels,omitempty"`     // labels of the issue or pull request
	Label      string   `json:"label,omitempty"`      // the label added (issues.labeled)
	Name       string   `json:"name,omitempty"`       // check run or workflow name
	Conclusion string   `json:"conclusion,omitempty"` // check run or workflow conclusion
	Branch     string   `json:"branch,omitempty"`     // head branch of a check run or workflow run
	Reviewer   string   `json:"reviewer,omitempty"`   // requested reviewer (pull_request.review_requested)
}

// cut shortens s to at most maxFieldLen bytes on a rune boundary.
func cut(s string) string {
	if len(s) <= maxFieldLen {
		return s
	}
	i := maxFieldLen
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
