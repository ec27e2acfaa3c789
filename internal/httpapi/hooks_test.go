package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
	"github.com/rollcall/rollcall/internal/store"
)

// deliver posts a delivery with exactly the given headers and checks the
// response against api/openapi.yaml.
func (e *env) deliver(t *testing.T, url string, h http.Header, body []byte) response {
	t.Helper()
	hr, err := http.NewRequestWithContext(t.Context(), "POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header = h.Clone()
	return e.roundTrip(t, hr)
}

// standardSender returns a function that delivers body to the Standard
// Webhooks hook hk as message id, signed with its secret at ts.
func (e *env) standardSender(t *testing.T, hk app.HookSecretResult) func(id string, ts time.Time, body string) response {
	wh, err := standardwebhooks.NewWebhook(hk.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return func(id string, ts time.Time, body string) response {
		sig, err := wh.Sign(id, ts, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
		h.Set("webhook-signature", sig)
		return e.deliver(t, hk.URL, h, []byte(body))
	}
}

func (e *env) createHook(t *testing.T, token string, in app.HookInput) app.HookSecretResult {
	t.Helper()
	var res app.HookSecretResult
	e.do(t, "POST", "/v1/hooks", token, in).want(t, http.StatusCreated, &res)
	return res
}

func (e *env) todos(t *testing.T, ref string) []domain.Todo {
	t.Helper()
	var l struct{ Items []domain.Todo }
	e.do(t, "GET", "/v1/agents/"+ref+"/todos", e.admin, nil).want(t, 200, &l)
	return l.Items
}

func TestHookLifecycle(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	r := e.do(t, "POST", "/v1/hooks", e.admin, app.HookInput{Kind: "github", Agent: "builder", Queue: "review",
		Filter: &domain.HookFilter{Repositories: []string{"acme-corp/widgets"}}, TitleTemplate: "[{repository}] {title}", KindLabel: "review"})
	var res app.HookSecretResult
	r.want(t, http.StatusCreated, &res)
	h := res.Hook
	if !strings.HasPrefix(res.Secret, "whsec_") || res.URL != e.URL+"/v1/hooks/"+h.ID+"/deliveries" || h.URL != res.URL ||
		h.AgentHandle != "builder" || h.Queue != "review" || r.header.Get("Location") != "/v1/hooks/"+h.ID {
		t.Fatalf("create = %+v", res)
	}
	for _, path := range []string{"/v1/hooks/" + h.ID, "/v1/hooks", "/v1/hooks?agent=builder"} {
		body := e.do(t, "GET", path, e.admin, nil)
		body.want(t, 200, nil)
		if bytes.Contains(body.body, []byte(res.Secret)) || bytes.Contains(body.body, []byte("secret")) {
			t.Fatalf("GET %s shows the secret: %s", path, body.body)
		}
	}
	// Bad input creates nothing and points at the member.
	for _, c := range []struct {
		in  app.HookInput
		ptr string
	}{
		{app.HookInput{Kind: "gitlab", Agent: "builder", Queue: "review"}, "/kind"},
		{app.HookInput{Kind: "github", Agent: "nobody", Queue: "review"}, "/agent"},
		{app.HookInput{Kind: "github", Agent: "builder", Queue: "deploy"}, "/queue"},
		{app.HookInput{Kind: "github", Agent: "builder", Queue: "review", TitleTemplate: "{secret}"}, "/title_template"},
		{app.HookInput{Kind: "github", Agent: "builder", Queue: "review", Filter: &domain.HookFilter{Actions: []string{"push"}}}, "/filter/actions/0"},
		{app.HookInput{Kind: "standard", Agent: "builder", Queue: "review", Filter: &domain.HookFilter{}}, "/filter"},
		{app.HookInput{Kind: "github", Agent: "builder", Queue: "review", KindLabel: "Not A Code"}, "/kind_label"},
	} {
		r := e.do(t, "POST", "/v1/hooks", e.admin, c.in)
		if p := r.problem(t); r.status/100 != 4 || p.Pointer != c.ptr {
			t.Errorf("%+v: %d %+v, want pointer %s", c.in, r.status, p, c.ptr)
		}
	}
	// Another person's hook is not found, like an unknown one.
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/hooks/" + h.ID}, {"DELETE", "/v1/hooks/" + h.ID}, {"POST", "/v1/hooks/" + h.ID + "/secret"}, {"GET", "/v1/hooks?agent=builder"},
	} {
		if r := e.do(t, c.method, c.path, e.bob, nil); r.status != http.StatusNotFound {
			t.Errorf("bob %s %s = %d %s", c.method, c.path, r.status, r.body)
		}
	}
	var bobs struct{ Items []app.HookView }
	e.do(t, "GET", "/v1/hooks", e.bob, nil).want(t, 200, &bobs)
	if len(bobs.Items) != 0 {
		t.Fatalf("bob lists %v", bobs.Items)
	}
	if r := e.do(t, "POST", "/v1/hooks", e.bob, app.HookInput{Kind: "github", Agent: "builder", Queue: "review"}); r.status != http.StatusNotFound {
		t.Fatalf("bob hooks admin's agent: %d", r.status)
	}

	hdr, body := intaketest.GitHub(t, "pull_request.review_requested")
	intaketest.SignGitHub(hdr, res.Secret, body)
	e.deliver(t, res.URL, hdr, body).want(t, http.StatusCreated, nil)

	var rot app.HookSecretResult
	e.do(t, "POST", "/v1/hooks/"+h.ID+"/secret", e.admin, nil).want(t, 200, &rot)
	if rot.Secret == res.Secret || !strings.HasPrefix(rot.Secret, "whsec_") {
		t.Fatalf("rotated secret %q", rot.Secret)
	}
	hdr.Set("X-GitHub-Delivery", "11111111-2222-3333-4444-555555555555")
	if r := e.deliver(t, res.URL, hdr, body); r.status != http.StatusUnauthorized {
		t.Fatalf("old secret after rotation = %d", r.status)
	}
	intaketest.SignGitHub(hdr, rot.Secret, body)
	e.deliver(t, res.URL, hdr, body).want(t, http.StatusCreated, nil)

	var shown app.HookView
	e.do(t, "GET", "/v1/hooks/"+h.ID, e.admin, nil).want(t, 200, &shown)
	var outcomes []string
	for _, d := range shown.LastDeliveries {
		outcomes = append(outcomes, d.Outcome)
	}
	if strings.Join(outcomes, ",") != "created,refused,created" {
		t.Fatalf("last deliveries %v", outcomes)
	}

	e.do(t, "DELETE", "/v1/hooks/"+h.ID, e.admin, nil).want(t, http.StatusOK, nil)
	if r := e.deliver(t, res.URL, hdr, body); r.status != http.StatusNotFound {
		t.Fatalf("delivery to a deleted hook = %d", r.status)
	}
	var audit struct{ Items []domain.AuditEntry }
	e.do(t, "GET", "/v1/audit?agent=builder", e.admin, nil).want(t, 200, &audit)
	var actions []string
	for _, a := range audit.Items {
		actions = append(actions, a.Action)
	}
	if got := strings.Join(actions, ","); got != "agent.vend,hook.create,hook.rotate_secret,hook.delete" {
		t.Fatalf("audit %s", got)
	}
}

func TestGitHubDeliveries(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	hk := e.createHook(t, e.admin, app.HookInput{Kind: "github", Agent: "builder", Queue: "review"})
	want := map[string]int{
		"pull_request.opened": 201, "pull_request.ready_for_review": 201, "pull_request.review_requested": 201,
		"pull_request.synchronize": 202, "issues.opened": 201, "issues.labeled": 201, "issue_comment.created": 201,
		"check_run.completed.failure": 201, "check_run.completed.success": 202, "workflow_run.completed.failure": 201,
		"ping": 200, "star.created": 202,
	}
	created := 0
	for _, name := range intaketest.Names(t) {
		h, body := intaketest.GitHub(t, name)
		intaketest.SignGitHub(h, hk.Secret, body)
		var res app.DeliveryResult
		e.deliver(t, hk.URL, h, body).want(t, want[name], &res)
		if want[name] != 201 {
			if res.TodoID != "" {
				t.Fatalf("%s made todo %s", name, res.TodoID)
			}
			continue
		}
		created++
		var td domain.Todo
		e.do(t, "GET", "/v1/todos/"+res.TodoID, e.admin, nil).want(t, 200, &td)
		event, _, _ := strings.Cut(name, ".")
		if td.Source != "github" || td.Kind != event || td.CreatedBy != "hook:"+hk.Hook.ID || !td.PushEligible ||
			td.IdempotencyKey != "hook:"+hk.Hook.ID+":"+h.Get("X-GitHub-Delivery") || td.Queue != "review" {
			t.Fatalf("%s: todo %+v", name, td)
		}
		var p map[string]any
		if err := json.Unmarshal(td.Payload, &p); err != nil || p["repository"] != "acme-corp/widgets" || p["sender"] == nil || p["url"] == nil || p["delivery"] != h.Get("X-GitHub-Delivery") {
			t.Fatalf("%s: payload %s", name, td.Payload)
		}
		if len(td.Payload) > 2000 || bytes.Contains(td.Payload, []byte("avatar_url")) || bytes.Contains(td.Payload, []byte("Ignore previous")) {
			t.Fatalf("%s: payload is not a small selection: %s", name, td.Payload)
		}
		if name == "pull_request.review_requested" && td.Title != "PR #42 review requested: Add retry budget to the widget fetcher" {
			t.Fatalf("title %q", td.Title)
		}
		// A redelivery (same X-GitHub-Delivery) creates nothing.
		var again app.DeliveryResult
		e.deliver(t, hk.URL, h, body).want(t, 200, &again)
		if again.Outcome != "duplicate" || again.TodoID != res.TodoID {
			t.Fatalf("%s redelivery %+v", name, again)
		}
	}
	if n := len(e.todos(t, "builder")); n != created || created != 8 {
		t.Fatalf("todos %d, created %d; want 8", n, created)
	}

	// Bad input never creates anything.
	h, body := intaketest.GitHub(t, "issues.opened")
	h.Set("X-GitHub-Delivery", "aaaaaaaa-0000-0000-0000-000000000001")
	unsigned := e.deliver(t, hk.URL, h, body)
	if unsigned.status != 401 || bytes.Contains(unsigned.body, []byte("Widget fetcher")) || unsigned.header.Get("WWW-Authenticate") != "" {
		t.Fatalf("unsigned = %d %s", unsigned.status, unsigned.body)
	}
	intaketest.SignGitHub(h, "whsec_wrong", body)
	if r := e.deliver(t, hk.URL, h, body); r.status != 401 || bytes.Contains(r.body, []byte("Widget fetcher")) {
		t.Fatalf("bad signature = %d %s", r.status, r.body)
	}
	intaketest.SignGitHub(h, hk.Secret, body)
	tampered := bytes.Replace(body, []byte("panics"), []byte("PANICS"), 1)
	if r := e.deliver(t, hk.URL, h, tampered); r.status != 401 {
		t.Fatalf("tampered = %d", r.status)
	}
	big := append(append([]byte(`{"zen":"`), bytes.Repeat([]byte("x"), 1<<20)...), []byte(`"}`)...)
	bh := h.Clone()
	intaketest.SignGitHub(bh, hk.Secret, big)
	if r := e.deliver(t, hk.URL, bh, big); r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("over 1 MiB = %d", r.status)
	}
	xml := h.Clone()
	xml.Set("Content-Type", "text/xml")
	if r := e.deliver(t, hk.URL, xml, body); r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("xml = %d", r.status)
	}
	noID := h.Clone()
	noID.Del("X-GitHub-Delivery")
	if r := e.deliver(t, hk.URL, noID, body); r.status != 400 {
		t.Fatalf("no delivery id = %d", r.status)
	}
	lying := h.Clone()
	lying.Set("X-GitHub-Event", "pull_request")
	lying.Set("X-GitHub-Delivery", "aaaaaaaa-0000-0000-0000-000000000002")
	garbage := []byte(`{"action":"opened","pull_request":"not an object"}`)
	intaketest.SignGitHub(lying, hk.Secret, garbage)
	if r := e.deliver(t, hk.URL, lying, garbage); r.status != 400 {
		t.Fatalf("body not the event = %d", r.status)
	}
	if n := len(e.todos(t, "builder")); n != created {
		t.Fatalf("bad input created todos: %d", n)
	}
	if r := e.deliver(t, e.URL+"/v1/hooks/00000000-0000-0000-0000-000000000000/deliveries", h, body); r.status != 404 {
		t.Fatalf("unknown hook = %d", r.status)
	}
	refusals := 0
	var shown app.HookView
	e.do(t, "GET", "/v1/hooks/"+hk.Hook.ID, e.admin, nil).want(t, 200, &shown)
	for _, d := range shown.LastDeliveries {
		if d.Outcome == "refused" {
			refusals++
			if d.TodoID != "" || d.Key != "" {
				t.Fatalf("refused delivery %+v", d)
			}
		}
	}
	if refusals < 3 {
		t.Fatalf("refusals recorded %d, want the unsigned, bad and tampered ones", refusals)
	}
}

func TestGitHubFilterAndRateLimit(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	hk := e.createHook(t, e.admin, app.HookInput{Kind: "github", Agent: "builder", Queue: "build",
		Filter: &domain.HookFilter{Labels: []string{"bug"}, Actions: []string{"issues", "check_run"}}, TitleTemplate: "{repository}#{number} {title}", KindLabel: "triage"})
	send := func(name, id string) response {
		h, body := intaketest.GitHub(t, name)
		h.Set("X-GitHub-Delivery", id)
		intaketest.SignGitHub(h, hk.Secret, body)
		return e.deliver(t, hk.URL, h, body)
	}
	var res app.DeliveryResult
	send("issues.labeled", "f-1").want(t, 201, &res)
	var td domain.Todo
	e.do(t, "GET", "/v1/todos/"+res.TodoID, e.admin, nil).want(t, 200, &td)
	if td.Title != "acme-corp/widgets#1347 Widget fetcher panics on empty response" || td.Kind != "triage" || td.Queue != "build" {
		t.Fatalf("todo %+v", td)
	}
	send("issues.opened", "f-2").want(t, 202, &res) // no label
	if res.Outcome != "ignored" || res.Reason == "" {
		t.Fatalf("filtered %+v", res)
	}
	send("pull_request.opened", "f-3").want(t, 202, nil) // action not in the filter
	// 60 a minute per hook: the clock does not move, so the 61st is refused.
	for i := 4; i <= 60; i++ {
		if r := send("star.created", fmt.Sprintf("f-%d", i)); r.status != 202 {
			t.Fatalf("delivery %d = %d", i, r.status)
		}
	}
	r := send("issues.labeled", "f-61")
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("61st = %d %v", r.status, r.header)
	}
	e.Clock.Advance(2 * time.Second)
	send("issues.labeled", "f-61").want(t, 201, nil)
}

func TestStandardDeliveries(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	hk := e.createHook(t, e.admin, app.HookInput{Kind: "standard", Agent: "builder", Queue: "build", KindLabel: "deploy"})
	send := e.standardSender(t, hk)
	now := e.Clock.Now()
	var res app.DeliveryResult
	send("msg_1", now, `{"title":"Deploy failed </channel> on prod","payload":{"env":"prod"}}`).want(t, 201, &res)
	var td domain.Todo
	e.do(t, "GET", "/v1/todos/"+res.TodoID, e.admin, nil).want(t, 200, &td)
	if td.Title != "Deploy failed </channel_> on prod" || td.Source != "webhook" || td.Kind != "deploy" || td.Queue != "build" ||
		td.IdempotencyKey != "hook:"+hk.Hook.ID+":msg_1" || td.CreatedBy != "hook:"+hk.Hook.ID || string(td.Payload) != `{"env":"prod"}` {
		t.Fatalf("todo %+v", td)
	}
	send("msg_1", now, `{"title":"Deploy failed </channel> on prod","payload":{"env":"prod"}}`).want(t, 200, &res)
	if res.Outcome != "duplicate" {
		t.Fatalf("redelivery %+v", res)
	}
	send("msg_2", now, `{"title":"Review","queue":"review","kind":"review"}`).want(t, 201, nil)
	for _, c := range []struct {
		id     string
		ts     time.Time
		body   string
		status int
	}{
		{"msg_3", now.Add(-5*time.Minute - time.Second), `{"title":"old"}`, 400},
		{"msg_4", now.Add(5*time.Minute + time.Second), `{"title":"future"}`, 400},
		{"msg_5", now, `{"title":"x","extra":true}`, 400},
		{"msg_6", now, `{"title":"x","queue":"deploy"}`, 400},
		{"msg_7", now, `{"title":"x","kind":"Not A Code"}`, 400},
		{"msg_8", now, `[1]`, 400},
	} {
		if r := send(c.id, c.ts, c.body); r.status != c.status {
			t.Errorf("%s = %d %s, want %d", c.id, r.status, r.body, c.status)
		}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("webhook-id", "msg_9")
	h.Set("webhook-timestamp", fmt.Sprint(now.Unix()))
	h.Set("webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
	if r := e.deliver(t, hk.URL, h, []byte(`{"title":"forged"}`)); r.status != 401 {
		t.Fatalf("forged = %d", r.status)
	}
	if n := len(e.todos(t, "builder")); n != 2 {
		t.Fatalf("todos %d, want 2", n)
	}
}

// TestForgedFloodDoesNotStarveTheHook: 70 deliveries with a bad signature
// and Content-Type text/plain use up only the hook's failed-check budget
// (60 refused, then 429); a correctly signed delivery right after them is
// taken, and the refusals are on the hook's delivery log.
func TestForgedFloodDoesNotStarveTheHook(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	hk := e.createHook(t, e.admin, app.HookInput{Kind: "github", Agent: "builder", Queue: "review"})
	refused, limited := 0, 0
	for i := range 70 {
		h, body := intaketest.GitHub(t, "pull_request.opened")
		h.Set("Content-Type", "text/plain")
		h.Set("X-Hub-Signature-256", "sha256=00")
		h.Set("X-GitHub-Delivery", fmt.Sprintf("forged-%d", i))
		switch r := e.deliver(t, hk.URL, h, body); r.status {
		case http.StatusUnauthorized, http.StatusUnsupportedMediaType:
			refused++
		case http.StatusTooManyRequests:
			if r.header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			limited++
		default:
			t.Fatalf("forged delivery %d = %d %s", i, r.status, r.body)
		}
	}
	if refused != 60 || limited != 10 {
		t.Fatalf("forged flood: %d refused, %d rate limited; want 60 and 10", refused, limited)
	}
	h, body := intaketest.GitHub(t, "pull_request.opened")
	intaketest.SignGitHub(h, hk.Secret, body)
	var res app.DeliveryResult
	e.deliver(t, hk.URL, h, body).want(t, http.StatusCreated, &res)
	if res.Outcome != "created" || res.TodoID == "" {
		t.Fatalf("the signed delivery after the flood: %+v", res)
	}
	var v app.HookView
	e.do(t, "GET", "/v1/hooks/"+hk.Hook.ID, e.admin, nil).want(t, 200, &v)
	n := 0
	for _, d := range v.LastDeliveries {
		if d.Outcome == "refused" {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no refusal on the delivery log: %+v", v.LastDeliveries)
	}
}

// TestDeliveryIDsHaveTheirOwnNamespace: a delivery id equal to an
// operator's idempotency key, or to another hook's delivery id, makes its
// own todo; an operator push with a delivery's id makes its own too.
func TestDeliveryIDsHaveTheirOwnNamespace(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	op := e.push(t, e.admin, "builder", app.PushInput{Queue: "build", Title: "operator's", IdempotencyKey: "shared-1"})

	std := e.createHook(t, e.admin, app.HookInput{Kind: "standard", Agent: "builder", Queue: "build"})
	send := e.standardSender(t, std)
	sendStd := func(id, body string) response { return send(id, e.Clock.Now(), body) }
	var a app.DeliveryResult
	sendStd("shared-1", `{"title":"standard's"}`).want(t, http.StatusCreated, &a)
	if a.Outcome != "created" || a.TodoID == op.ID {
		t.Fatalf("webhook-id equal to an operator's key: %+v (operator's todo %s)", a, op.ID)
	}
	// An operator push with the delivery's id is the operator's own.
	var pushed domain.Todo
	e.do(t, "POST", "/v1/agents/builder/todos", e.admin, app.PushInput{Queue: "build", Title: "operator again", IdempotencyKey: "shared-2"}).want(t, http.StatusCreated, &pushed)
	var b app.DeliveryResult
	sendStd("shared-2", `{"title":"standard's second"}`).want(t, http.StatusCreated, &b)
	if b.TodoID == pushed.ID {
		t.Fatalf("webhook-id equal to a later operator key swallowed: %+v", b)
	}

	// A GitHub delivery whose id an earlier webhook-id had.
	gh := e.createHook(t, e.admin, app.HookInput{Kind: "github", Agent: "builder", Queue: "review"})
	h, body := intaketest.GitHub(t, "pull_request.opened")
	h.Set("X-GitHub-Delivery", "shared-1")
	intaketest.SignGitHub(h, gh.Secret, body)
	var c app.DeliveryResult
	e.deliver(t, gh.URL, h, body).want(t, http.StatusCreated, &c)
	if c.Outcome != "created" || c.TodoID == a.TodoID || c.TodoID == op.ID {
		t.Fatalf("X-GitHub-Delivery equal to an earlier webhook-id: %+v", c)
	}
	// Redeliveries still deduplicate, per hook.
	var again app.DeliveryResult
	e.deliver(t, gh.URL, h, body).want(t, http.StatusOK, &again)
	if again.Outcome != "duplicate" || again.TodoID != c.TodoID {
		t.Fatalf("redelivery: %+v", again)
	}
	if n := len(e.todos(t, "builder")); n != 5 {
		t.Fatalf("todos %d, want 5 (2 pushed, 3 delivered)", n)
	}

	// A delivery recorded before delivery ids had their namespace (its todo
	// keyed by the bare id) is still a duplicate when redelivered: the
	// delivery log, keyed per hook, answers first.
	now := e.Clock.Now()
	old := domain.Todo{ID: "01900000-0000-7000-8000-000000000001", AgentID: op.AgentID, Queue: "review", Title: "old", Source: "github",
		IdempotencyKey: "legacy-1", PushEligible: true, CreatedBy: "hook:" + gh.Hook.ID, State: domain.TodoPending,
		MaxAttempts: domain.DefaultMaxAttempts, CreatedAt: now, UpdatedAt: now}
	if _, err := e.Store.RecordDelivery(t.Context(), store.RecordDeliveryParams{Todo: &old, Delivery: domain.HookDelivery{
		ID: "01900000-0000-7000-8000-000000000002", HookID: gh.Hook.ID, Key: "legacy-1", Event: "pull_request", Action: "opened",
		Outcome: domain.DeliveryCreated, ReceivedAt: now}}); err != nil {
		t.Fatal(err)
	}
	h.Set("X-GitHub-Delivery", "legacy-1")
	e.deliver(t, gh.URL, h, body).want(t, http.StatusOK, &again)
	if again.Outcome != "duplicate" || again.TodoID != old.ID {
		t.Fatalf("redelivery of a delivery recorded with a bare key: %+v", again)
	}
}

func TestVendHandoffGrants(t *testing.T) {
	e := newEnv(t)
	e.vend(t, e.admin, builder)
	e.vend(t, e.bob, app.VendInput{Handle: "bobs", Queues: []string{"q"}})
	for _, c := range []struct {
		in  app.VendInput
		ptr string
	}{
		{app.VendInput{Handle: "p1", Queues: []string{"plan"}, Handoff: []app.HandoffInput{{Agent: "bobs", Queue: "q"}}}, "/handoff/0/agent"},
		{app.VendInput{Handle: "p2", Queues: []string{"plan"}, Handoff: []app.HandoffInput{{Agent: "builder", Queue: "deploy"}}}, "/handoff/0/queue"},
		{app.VendInput{Handle: "p3", Queues: []string{"plan"}, Handoff: []app.HandoffInput{{Agent: "builder", Queue: "build"}, {Agent: "builder", Queue: "build"}}}, "/handoff/1"},
		{app.VendInput{Handle: "p4", Queues: []string{"plan"}, Verbs: []string{"hand_off"}}, "/verbs/0"},
	} {
		r := e.do(t, "POST", "/v1/agents", e.admin, c.in)
		if p := r.problem(t); r.status != 400 || p.Pointer != c.ptr {
			t.Errorf("%s: %d %+v, want %s", c.in.Handle, r.status, p, c.ptr)
		}
	}
	res := e.vend(t, e.admin, app.VendInput{Handle: "planner", Queues: []string{"plan"}, Verbs: []string{"claim"},
		Handoff: []app.HandoffInput{{Agent: "builder", Queue: "build"}}})
	if g := res.Agent.Scope.Handoff; len(g) != 1 || g[0].Handle != "builder" || g[0].Queue != "build" || g[0].AgentID == "" {
		t.Fatalf("grants %+v", g)
	}
}

// BenchmarkGitHubDelivery measures one signed pull_request delivery through
// the real REST stack on SQLite: verify, decode, todo and delivery record
// committed, doorbell signal published (docs/benchmarks.md).
func BenchmarkGitHubDelivery(b *testing.B) {
	e := apitestEnv(b)
	hk, err := e.Service.CreateHook(b.Context(), e.person, app.HookInput{Kind: "github", Agent: "builder", Queue: "review"})
	if err != nil {
		b.Fatal(err)
	}
	h, body := intaketest.GitHub(b, "pull_request.review_requested")
	intaketest.SignGitHub(h, hk.Secret, body)
	b.ResetTimer()
	for i := range b.N {
		e.Clock.Advance(time.Second) // stay under the per-hook rate limit
		h.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d", i))
		if status := intaketest.Post(b, hk.URL, h, body); status != http.StatusCreated {
			b.Fatalf("delivery %d = %d", i, status)
		}
	}
}
