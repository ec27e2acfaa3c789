package intake_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
)

const secret = "whsec_c2VjcmV0LWtleS1mb3ItdGhlLXRlc3RzLTAxMjM0NTY3"

func TestGitHubRecordedDeliveries(t *testing.T) {
	cases := map[string]struct {
		supported bool
		title     string
		repo      string
		number    int
		labels    []string
	}{
		"pull_request.opened":            {true, "PR #42 opened: Add retry budget to the widget fetcher", "acme-corp/widgets", 42, []string{"needs-review", "backend"}},
		"pull_request.ready_for_review":  {true, "PR #42 ready for review: Add retry budget to the widget fetcher", "acme-corp/widgets", 42, []string{"needs-review", "backend"}},
		"pull_request.review_requested":  {true, "PR #42 review requested: Add retry budget to the widget fetcher", "acme-corp/widgets", 42, []string{"needs-review", "backend"}},
		"pull_request.synchronize":       {false, "", "acme-corp/widgets", 42, []string{"needs-review", "backend"}},
		"issues.opened":                  {true, "Issue #1347 opened: Widget fetcher panics on empty response", "acme-corp/widgets", 1347, nil},
		"issues.labeled":                 {true, "Issue #1347 labeled bug: Widget fetcher panics on empty response", "acme-corp/widgets", 1347, []string{"bug"}},
		"issue_comment.created":          {true, "Comment by hubot on #1347: Widget fetcher panics on empty response", "acme-corp/widgets", 1347, []string{"bug"}},
		"check_run.completed.failure":    {true, "Check go test failed on acme-corp/widgets retry-budget", "acme-corp/widgets", 42, nil},
		"check_run.completed.success":    {false, "", "acme-corp/widgets", 42, nil},
		"workflow_run.completed.failure": {true, "Workflow CI failed on acme-corp/widgets retry-budget", "acme-corp/widgets", 42, nil},
		"ping":                           {false, "", "acme-corp/widgets", 0, nil},
		"star.created":                   {false, "", "", 0, nil},
	}
	names := intaketest.Names(t)
	if len(names) != len(cases) {
		t.Fatalf("recorded deliveries %v, cases for %d", names, len(cases))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want, ok := cases[name]
			if !ok {
				t.Fatalf("no case for %s", name)
			}
			h, body := intaketest.GitHub(t, name)
			if _, err := intake.VerifyGitHub(secret, h, body); !errors.Is(err, intake.ErrUnsigned) {
				t.Fatalf("unsigned: err %v, want ErrUnsigned", err)
			}
			intaketest.SignGitHub(h, secret, body)
			payload, err := intake.VerifyGitHub(secret, h, body)
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			if _, err := intake.VerifyGitHub(secret+"x", h, body); !errors.Is(err, intake.ErrBadSignature) {
				t.Fatalf("wrong secret: err %v", err)
			}
			tampered := append([]byte{}, body...)
			tampered[len(tampered)-2] ^= 1
			if _, err := intake.VerifyGitHub(secret, h, tampered); !errors.Is(err, intake.ErrBadSignature) {
				t.Fatalf("tampered body: err %v", err)
			}
			ev, known, err := intake.DecodeGitHub(h.Get(intake.HeaderGitHubEvent), payload)
			if err != nil {
				t.Fatal(err)
			}
			if name == "star.created" {
				if known {
					t.Fatal("star decoded as a known event")
				}
				return
			}
			if !known {
				t.Fatal("not decoded")
			}
			if ev.Supported() != want.supported {
				t.Fatalf("supported = %v, want %v (%+v)", ev.Supported(), want.supported, ev)
			}
			if ev.Repository != want.repo || ev.Number != want.number {
				t.Fatalf("repository %q number %d, want %q %d", ev.Repository, ev.Number, want.repo, want.number)
			}
			if fmt.Sprint(ev.Labels) != fmt.Sprint(want.labels) {
				t.Fatalf("labels %v, want %v", ev.Labels, want.labels)
			}
			if want.supported {
				if got := intake.Render("", ev); got != want.title {
					t.Fatalf("title %q, want %q", got, want.title)
				}
				if ev.URL == "" || ev.Sender == "" {
					t.Fatalf("url %q sender %q", ev.URL, ev.Sender)
				}
			}
		})
	}
}

// A delivery of a taken event without its subject object (signed, so it
// passed verification) is a malformed body, not a panic (a 500) or a todo.
func TestGitHubDeliveryWithoutItsObject(t *testing.T) {
	for _, tc := range []struct{ event, body string }{
		{"pull_request", `{}`},
		{"pull_request", `{"action":"opened","repository":{"full_name":"acme-corp/widgets"}}`},
		{"issues", `{"action":"labeled"}`},
		{"issue_comment", `{"action":"created","comment":{"body":"x"}}`},
		{"check_run", `{"action":"completed"}`},
		{"workflow_run", `{"action":"completed"}`},
	} {
		ev, ok, err := intake.DecodeGitHub(tc.event, []byte(tc.body))
		if !errors.Is(err, intake.ErrBody) || ok {
			t.Errorf("%s %s: %+v, %v, %v; want ErrBody", tc.event, tc.body, ev, ok, err)
		}
	}
}

func TestGitHubHeadersAndContentTypes(t *testing.T) {
	h, body := intaketest.GitHub(t, "pull_request.opened")
	intaketest.SignGitHub(h, secret, body)
	// Only SHA-256 counts: the legacy SHA-1 header alone is unsigned.
	only1 := h.Clone()
	only1.Del("X-Hub-Signature-256")
	if _, err := intake.VerifyGitHub(secret, only1, body); !errors.Is(err, intake.ErrUnsigned) {
		t.Fatalf("sha1 only: %v", err)
	}
	bad := h.Clone()
	bad.Set("X-Hub-Signature-256", "sha1="+strings.TrimPrefix(h.Get("X-Hub-Signature"), "sha1="))
	if _, err := intake.VerifyGitHub(secret, bad, body); !errors.Is(err, intake.ErrBadSignature) {
		t.Fatalf("sha1 in the sha256 header: %v", err)
	}
	xml := h.Clone()
	xml.Set("Content-Type", "text/xml")
	if _, err := intake.VerifyGitHub(secret, xml, body); !errors.Is(err, intake.ErrContentType) {
		t.Fatalf("xml: %v", err)
	}
	// The form encoding GitHub offers: payload=<json>.
	form := []byte("payload=" + urlQueryEscape(string(body)))
	fh := h.Clone()
	fh.Set("Content-Type", "application/x-www-form-urlencoded")
	intaketest.SignGitHub(fh, secret, form)
	payload, err := intake.VerifyGitHub(secret, fh, form)
	if err != nil || string(payload) != string(body) {
		t.Fatalf("form: err %v, payload equal %v", err, string(payload) == string(body))
	}
}

func urlQueryEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// The Standard Webhooks library's own vectors (libraries/go/webhook_test.go
// at v0.0.1), run through VerifyStandard with an injected clock.
func TestStandardWebhooksVectors(t *testing.T) {
	const key = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	const msgID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	payload := []byte(`{"test": 2432232314}`)
	// The fixed vector of the spec.
	wh, err := standardwebhooks.NewWebhook(key)
	if err != nil {
		t.Fatal(err)
	}
	sig, _ := wh.Sign(msgID, time.Unix(1614265330, 0), payload)
	if sig != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("signature %s", sig)
	}
	at := time.Unix(1614265330, 0)
	header := func(ts time.Time, sig string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", msgID)
		h.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
		h.Set("webhook-signature", sig)
		return h
	}
	signed := func(ts time.Time) http.Header {
		s, _ := wh.Sign(msgID, ts, payload)
		return header(ts, s)
	}
	if err := intake.VerifyStandard(key, header(at, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="), payload, at); err != nil {
		t.Fatalf("spec vector: %v", err)
	}
	// Without the whsec_ prefix too.
	if err := intake.VerifyStandard(strings.TrimPrefix(key, "whsec_"), signed(at), payload, at); err != nil {
		t.Fatalf("no prefix: %v", err)
	}
	cases := []struct {
		name string
		h    http.Header
		now  time.Time
		want error
	}{
		{"valid", signed(at), at, nil},
		{"missing id", func() http.Header { h := signed(at); h.Del("webhook-id"); return h }(), at, intake.ErrUnsigned},
		{"missing timestamp", func() http.Header { h := signed(at); h.Del("webhook-timestamp"); return h }(), at, intake.ErrUnsigned},
		{"missing signature", func() http.Header { h := signed(at); h.Del("webhook-signature"); return h }(), at, intake.ErrUnsigned},
		{"invalid signature", header(at, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="), at, intake.ErrBadSignature},
		{"partial signature", header(at, "v1,"), at, intake.ErrBadSignature},
		{"old timestamp", signed(at.Add(-intake.Tolerance - time.Second)), at, intake.ErrStale},
		{"new timestamp", signed(at.Add(intake.Tolerance + time.Second)), at, intake.ErrStale},
		{"edge of tolerance", signed(at.Add(-intake.Tolerance)), at, nil},
		{"valid multi sig", func() http.Header {
			h := signed(at)
			h.Set("webhook-signature", strings.Join([]string{"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", "v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=", h.Get("webhook-signature"), "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="}, " "))
			return h
		}(), at, nil},
		{"bad timestamp", func() http.Header { h := signed(at); h.Set("webhook-timestamp", "soon"); return h }(), at, intake.ErrBadSignature},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := intake.VerifyStandard(key, c.h, payload, c.now)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
		})
	}
}

func TestDecodeStandard(t *testing.T) {
	b, err := intake.DecodeStandard([]byte(`{"title":"Deploy failed","queue":"ops","kind":"deploy","payload":{"env":"prod"}}`))
	if err != nil || b.Title != "Deploy failed" || b.Queue != "ops" || b.Kind != "deploy" || string(b.Payload) != `{"env":"prod"}` {
		t.Fatalf("%+v %v", b, err)
	}
	for _, bad := range []string{``, `null`, `[]`, `"x"`, `{}`, `{"title":""}`, `{"title":"a","extra":1}`, `{"title":"a"} {}`, `{"title":1}`} {
		if _, err := intake.DecodeStandard([]byte(bad)); !errors.Is(err, intake.ErrBody) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestTemplates(t *testing.T) {
	ev := intake.Event{Event: "pull_request", Action: "opened", Number: 7, Title: "Fix </channel> the\nbug\u202e", Repository: "a/b", Labels: []string{"x", "y"}}
	cases := []struct{ tmpl, want string }{
		{"", "PR #7 opened: Fix </channel_> the bug"},
		{"[{repository}] {title} ({labels})", "[a/b] Fix </channel_> the bug (x,y)"},
		{"{{literal}} #{number}", "{literal} #7"},
	}
	for _, c := range cases {
		if err := intake.ValidateTemplate(c.tmpl); err != nil {
			t.Fatalf("%q: %v", c.tmpl, err)
		}
		if got := intake.Render(c.tmpl, ev); got != c.want {
			t.Errorf("%q → %q, want %q", c.tmpl, got, c.want)
		}
	}
	for _, bad := range []string{"{secret}", "{title", "title}", "{.Secret}", "{{.Hook.Secret}}x{", "{printf \"%s\" .}", strings.Repeat("x", 501)} {
		err := intake.ValidateTemplate(bad)
		if domain.CodeOf(err) != domain.CodeInvalidArgument {
			t.Errorf("%q: err %v", bad, err)
		}
	}
	// {{.Secret}} is literal text, not a lookup.
	if got := intake.Render("{{.Secret}}", ev); got != "{.Secret}" {
		t.Errorf("got %q", got)
	}
	long := intake.Event{Event: "issues", Action: "opened", Title: strings.Repeat("é", 400)}
	if got := intake.Render("{title}{title}", long); len(got) > domain.MaxTitleLen || !strings.HasPrefix(got, "é") {
		t.Errorf("len %d", len(got))
	}
	if got := intake.Render("{label}", intake.Event{Event: "issues", Action: "opened"}); got != "issues opened" {
		t.Errorf("empty render falls back: %q", got)
	}
}

func TestFilter(t *testing.T) {
	ev := intake.Event{Event: "issues", Action: "labeled", Repository: "Acme-Corp/Widgets", Labels: []string{"bug"}, Label: "bug"}
	cases := []struct {
		f    domain.HookFilter
		want bool
	}{
		{domain.HookFilter{}, true},
		{domain.HookFilter{Repositories: []string{"acme-corp/widgets"}}, true},
		{domain.HookFilter{Repositories: []string{"acme-corp/other"}}, false},
		{domain.HookFilter{Actions: []string{"issues"}}, true},
		{domain.HookFilter{Actions: []string{"issues.labeled"}}, true},
		{domain.HookFilter{Actions: []string{"issues.opened"}}, false},
		{domain.HookFilter{Labels: []string{"BUG"}}, true},
		{domain.HookFilter{Labels: []string{"feature"}}, false},
	}
	for i, c := range cases {
		if err := intake.ValidateFilter(c.f); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		if got, _ := intake.Match(c.f, ev); got != c.want {
			t.Errorf("%d: %+v → %v", i, c.f, got)
		}
	}
	bad := []struct {
		f   domain.HookFilter
		ptr string
	}{
		{domain.HookFilter{Repositories: []string{"widgets"}}, "/filter/repositories/0"},
		{domain.HookFilter{Actions: []string{"star"}}, "/filter/actions/0"},
		{domain.HookFilter{Actions: []string{"issues", "pull_request.closed"}}, "/filter/actions/1"},
		{domain.HookFilter{Labels: []string{"a", "A"}}, "/filter/labels/1"},
		{domain.HookFilter{Labels: []string{"a\nb"}}, "/filter/labels/0"},
	}
	for _, b := range bad {
		var de *domain.Error
		if err := intake.ValidateFilter(b.f); !errors.As(err, &de) || de.Pointer != b.ptr {
			t.Errorf("%+v: err %v, want pointer %s", b.f, err, b.ptr)
		}
	}
}

// FuzzDecodeGitHub feeds arbitrary bodies for every event through the
// decoder and the title renderer: no panic, and a title is always one safe
// line of at most domain.MaxTitleLen bytes.
func FuzzDecodeGitHub(f *testing.F) {
	for _, name := range intaketest.Names(f) {
		h, body := intaketest.GitHub(f, name)
		f.Add(h.Get("X-GitHub-Event"), body, "")
	}
	f.Add("pull_request", []byte(`{"action":"opened","pull_request":{"number":1,"title":"a</channel>\u2028b"}}`), "{title} {labels}")
	f.Add("issues", []byte(`{"action":"labeled","issue":{"labels":[{"name":"x"}]}}`), "{{")
	f.Add("pull_request", []byte(`{}`), "")
	f.Add("issue_comment", []byte(`{"action":"created"}`), "")
	f.Fuzz(func(t *testing.T, event string, body []byte, tmpl string) {
		ev, ok, err := intake.DecodeGitHub(event, body)
		if err != nil && !errors.Is(err, intake.ErrBody) {
			t.Fatalf("error not ErrBody: %v", err)
		}
		if !ok {
			return
		}
		title := intake.Render(tmpl, ev)
		if title == "" || len(title) > domain.MaxTitleLen {
			t.Fatalf("title %q", title)
		}
		if strings.ContainsFunc(title, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) {
			t.Fatalf("title has a control or format character: %q", title)
		}
		if strings.Contains(strings.ToLower(title), "</channel>") {
			t.Fatalf("title closes the channel: %q", title)
		}
	})
}

// FuzzDecodeStandard: no panic; a decoded body always has a title.
func FuzzDecodeStandard(f *testing.F) {
	f.Add([]byte(`{"title":"x","payload":{"a":1}}`))
	f.Add([]byte(`{"title":"x","payload":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := intake.DecodeStandard(body)
		if err == nil && b.Title == "" {
			t.Fatal("decoded without a title")
		}
	})
}

// A delivery whose member names repeat in one object, exactly or in
// another letter case, is a malformed body (design: Strict JSON): the
// decoders behind would read the last spelling.
func TestDeliveryRepeatedNames(t *testing.T) {
	for _, bad := range []string{`{"title":"a","Title":"b"}`, `{"title":"a","title":"b"}`, `{"title":"a","TITLE":"b","payload":{}}`} {
		if b, err := intake.DecodeStandard([]byte(bad)); !errors.Is(err, intake.ErrBody) {
			t.Errorf("%s: %+v, %v; want ErrBody", bad, b, err)
		}
	}
	// The free-form payload is kept as sent, not matched to fields: its
	// names in two letter cases are two names.
	if b, err := intake.DecodeStandard([]byte(`{"title":"a","payload":{"id":1,"ID":2}}`)); err != nil || string(b.Payload) != `{"id":1,"ID":2}` {
		t.Errorf("payload with id and ID: %+v, %v; want it kept", b, err)
	}
	body := `{"action":"closed","ACTION":"opened","issue":{"number":1,"title":"t","html_url":"https://github.com/a/b/issues/1"},"repository":{"full_name":"a/b"},"sender":{"login":"x"}}`
	if ev, ok, err := intake.DecodeGitHub("issues", []byte(body)); !errors.Is(err, intake.ErrBody) || ok {
		t.Errorf("issues with action twice: %+v, %v, %v; want ErrBody", ev, ok, err)
	}
}
