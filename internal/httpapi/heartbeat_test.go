package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/events"
)

// The heartbeat routes on the real stack (apitest: SQLite, app.Service on a
// fake clock, httpapi), every response checked against api/openapi.yaml.

func strp(s string) *string { return &s }

func (e *env) beat(t *testing.T, token, ref, body string, hdr ...[2]string) response {
	t.Helper()
	return e.do(t, "POST", "/v1/agents/"+ref+"/heartbeat", token, body)
}

func TestHeartbeatRoute(t *testing.T) {
	e := newEnv(t)
	a := e.vend(t, e.admin, app.VendInput{Handle: "hb", Queues: []string{"build"}, BillingMode: "subscription", ToolClass: "claude-code"})
	var ack app.Ack
	e.beat(t, a.Credential, "hb", `{"state":"online"}`).want(t, 200, &ack)
	if ack.IntervalMS != 15000 {
		t.Errorf("interval_ms = %d, want 15000", ack.IntervalMS)
	}
	e.beat(t, a.Credential, a.Agent.ID, `{"state":"online"}`).want(t, 200, nil) // by id too

	// A full report, with a sender whose clock is hours off: the Date header
	// (and anything else the sender says about time) changes nothing.
	full := `{"state":"degraded","billing_mode":"api","billing_modes_supported":["api","subscription"],` +
		`"tool_class":"claude-code","runtime_version":"2.1.3","billing_evidence":{"key_type":"api_key","method":"env"},` +
		`"details":{"degraded_reasons":["rate_limited"],"adapter":{"name":"rollcall-adapter","version":"0.4.0"},"runtime":{"name":"claude-code"}},` +
		`"project_readiness":[{"queue":"build","ready":false,"reason":"no_checkout"}]}`
	hr, _ := http.NewRequestWithContext(t.Context(), "POST", e.URL+"/v1/agents/hb/heartbeat", strings.NewReader(full))
	hr.Header.Set("Authorization", "Bearer "+a.Credential)
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Date", time.Now().Add(-7*time.Hour).UTC().Format(http.TimeFormat))
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("full heartbeat = %d", resp.StatusCode)
	}

	var st app.AgentRuntimeStatus
	e.do(t, "GET", "/v1/agents/hb/status", e.admin, nil).want(t, 200, &st)
	if st.State != "degraded" || st.LastHeartbeatAt == nil || !st.LastHeartbeatAt.Equal(e.Clock.Now()) {
		t.Errorf("state %s at %v, want degraded at the server clock %v", st.State, st.LastHeartbeatAt, e.Clock.Now())
	}
	if st.BillingEvidence == nil || *st.BillingEvidence != (app.BillingEvidence{KeyType: "api_key", Method: "env"}) {
		t.Errorf("billing_evidence = %+v", st.BillingEvidence)
	}
	if st.Runtime == nil || st.Runtime.Name != "claude-code" || st.Runtime.RuntimeVersion == nil || *st.Runtime.RuntimeVersion != "2.1.3" {
		t.Errorf("runtime = %+v", st.Runtime)
	}
	if st.Adapter == nil || st.Adapter.Name != "rollcall-adapter" || st.Adapter.Version == nil || *st.Adapter.Version != "0.4.0" {
		t.Errorf("adapter = %+v", st.Adapter)
	}
	if len(st.ProjectReadiness) != 1 || st.ProjectReadiness[0] != (app.Readiness{Queue: "build", Ready: false, Reason: "no_checkout"}) {
		t.Errorf("project_readiness = %+v", st.ProjectReadiness)
	}
	if strings.Join(st.Warnings, ",") != "" || *st.ReportedBillingMode != "api" {
		t.Errorf("warnings %v mode %v (mismatch warns only after billing.mismatch_alert_after)", st.Warnings, st.ReportedBillingMode)
	}
	for range 41 { // heartbeats every 15 s for 10 min 15 s: the mismatch held > 10 min
		e.Clock.Advance(15 * time.Second)
		e.beat(t, a.Credential, "hb", `{"state":"online","billing_mode":"api","tool_class":"codex"}`).want(t, 200, nil)
	}
	e.do(t, "GET", "/v1/agents/hb/status", e.admin, nil).want(t, 200, &st)
	if strings.Join(st.Warnings, ",") != "billing_mode_mismatch,tool_class_mismatch" {
		t.Errorf("warnings after 10 min = %v", st.Warnings)
	}
	if st.Presence.Presence != "in" || st.Presence.Agent != "hb" {
		t.Errorf("presence = %+v", st.Presence)
	}
	e.Clock.Advance(45 * time.Second)
	e.do(t, "GET", "/v1/agents/hb/status", e.admin, nil).want(t, 200, &st)
	if st.State != "offline" || len(st.Warnings) != 0 || st.ReportedBillingMode == nil || *st.ReportedBillingMode != "api" {
		t.Errorf("offline status = %s %v %v, want offline, no warnings, mode kept", st.State, st.Warnings, st.ReportedBillingMode)
	}
}

// TestHeartbeatRouteAuthorization is the authorization matrix (design: Heartbeat authorization) over REST.
func TestHeartbeatRouteAuthorization(t *testing.T) {
	e := newEnv(t)
	a := e.vend(t, e.admin, app.VendInput{Handle: "mine", Queues: []string{"build"}})
	other := e.vend(t, e.admin, app.VendInput{Handle: "other", Queues: []string{"build"}})
	body := `{"state":"online"}`
	cases := []struct {
		name, token, ref string
		status           int
		code, reason     string
	}{
		{"owner", e.admin, "mine", 403, "forbidden", "subject_kind_not_allowed"},
		{"another person", e.bob, "mine", 404, "not_found", ""},
		{"another person, unknown agent", e.bob, "nobody", 404, "not_found", ""},
		{"another agent", other.Credential, "mine", 404, "not_found", ""},
		{"no token", "", "mine", 401, "unauthenticated", ""},
		{"unknown credential", "rca_wrongwrongwrongwrongwrongwrongwrongwrongwro", "mine", 401, "unauthenticated", ""},
	}
	for _, tc := range cases {
		r := e.beat(t, tc.token, tc.ref, body)
		if r.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
			continue
		}
		if p := r.problem(t); p.Code != tc.code || p.Reason != tc.reason {
			t.Errorf("%s: problem %+v, want %s %s", tc.name, p, tc.code, tc.reason)
		}
	}
	e.beat(t, a.Credential, "mine", body).want(t, 200, nil)
	// The status route is the owner's: another person gets 404, an agent 403.
	e.do(t, "GET", "/v1/agents/mine/status", e.bob, nil).want(t, 404, nil)
	r := e.do(t, "GET", "/v1/agents/mine/status", a.Credential, nil)
	if r.status != 403 || r.problem(t).Reason != "subject_kind_not_allowed" {
		t.Errorf("agent on the status route: %d %s", r.status, r.body)
	}
}

func TestHeartbeatRouteBodies(t *testing.T) {
	e := newEnv(t)
	a := e.vend(t, e.admin, app.VendInput{Handle: "bodies", Queues: []string{"build"}})
	r := e.beat(t, a.Credential, "bodies", `{"state":"online","details":{"runtime":{"name":"x","v":1}}}`)
	if p := r.problem(t); r.status != 400 || p.Code != "unknown_member" || p.Pointer != "/details/runtime/v" {
		t.Errorf("unknown member: %d %+v", r.status, p)
	}
	r = e.do(t, "POST", "/v1/agents/bodies/heartbeat", a.Credential, `{"state":"online"}`, req{contentType: strp("text/plain")})
	if r.status != 415 {
		t.Errorf("text/plain: %d", r.status)
	}
	big := `{"state":"online","billing_mode":"` + strings.Repeat("a", 70<<10) + `"}`
	r = e.beat(t, a.Credential, "bodies", big)
	if r.status != 413 || r.problem(t).Code != "invalid_argument" {
		t.Errorf("70 KiB body: %d %s", r.status, r.body)
	}
	var st app.AgentRuntimeStatus
	e.do(t, "GET", "/v1/agents/bodies/status", e.admin, nil).want(t, 200, &st)
	if st.State != "unknown" || st.LastHeartbeatAt != nil {
		t.Errorf("after refused bodies: %s %v, want unknown, never", st.State, st.LastHeartbeatAt)
	}
}

// TestHeartbeatRoute429: over the principal's rate limit, 429 rate_limited
// with Retry-After in whole seconds; a retry after it succeeds.
func TestHeartbeatRoute429(t *testing.T) {
	e := newEnv(t)
	a := e.vend(t, e.admin, app.VendInput{Handle: "flood", Queues: []string{"build"}})
	var r response
	n := 0
	for ; n < 100; n++ {
		r = e.beat(t, a.Credential, "flood", `{"state":"online"}`)
		if r.status != 200 {
			break
		}
	}
	if r.status != 429 || n != app.DefaultHeartbeatBurst {
		t.Fatalf("request %d: %d, want 429 after the burst of %d", n+1, r.status, app.DefaultHeartbeatBurst)
	}
	if p := r.problem(t); p.Code != "rate_limited" {
		t.Errorf("problem %+v", p)
	}
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || ra < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds ≥ 1", r.header.Get("Retry-After"))
	}
	e.Clock.Advance(time.Duration(ra) * time.Second)
	e.beat(t, a.Credential, "flood", `{"state":"online"}`).want(t, 200, nil)
}

// sse is a client of GET /v1/events.
type sse struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
	stop context.CancelFunc
}

type sseEvent struct {
	id, kind string
	data     string
}

func (e *env) events(t *testing.T, token, lastID string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	hr, _ := http.NewRequestWithContext(ctx, "GET", e.URL+"/v1/events", nil)
	hr.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		hr.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("GET /v1/events = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sse{t: t, resp: resp, sc: bufio.NewScanner(resp.Body), stop: cancel}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return s
}

// next returns the next event; comment lines are skipped. The read is
// bounded by the stream (closed at cleanup) and the test's timeout.
func (s *sse) next() sseEvent {
	s.t.Helper()
	var ev sseEvent
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if ev.kind != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
	s.t.Fatalf("stream ended: %v", s.sc.Err())
	return ev
}

// opened waits for the comment that says the subscription is in place.
func (s *sse) opened() *sse {
	s.t.Helper()
	for s.sc.Scan() {
		if s.sc.Text() == ": stream open" {
			return s
		}
	}
	s.t.Fatalf("stream ended before it opened: %v", s.sc.Err())
	return s
}

func TestEventStream(t *testing.T) {
	e := newEnv(t)
	a := e.vend(t, e.admin, app.VendInput{Handle: "watched", Queues: []string{"build"}})
	bobAgent := e.vend(t, e.bob, app.VendInput{Handle: "bobs", Queues: []string{"build"}})
	mine := e.events(t, e.admin, "").opened()
	bobs := e.events(t, e.bob, "").opened()

	e.beat(t, a.Credential, "watched", `{"state":"online","billing_mode":"api"}`).want(t, 200, nil)
	ev := mine.next()
	var got struct {
		ID, Kind string
		AgentID  string `json:"agent_id"`
		Data     events.PresenceChangedData
	}
	if err := json.Unmarshal([]byte(ev.data), &got); err != nil {
		t.Fatal(err)
	}
	if ev.kind != events.KindPresenceChanged || ev.id == "" || got.ID != ev.id || got.AgentID != a.Agent.ID ||
		got.Data.Agent != "watched" || got.Data.State != "online" || got.Data.ReportedBillingMode == nil || *got.Data.ReportedBillingMode != "api" {
		t.Fatalf("event = %+v %s", ev, ev.data)
	}
	first := ev.id
	e.beat(t, bobAgent.Credential, "bobs", `{"state":"online"}`).want(t, 200, nil)
	if ev := bobs.next(); ev.kind != events.KindPresenceChanged || !strings.Contains(ev.data, `"agent":"bobs"`) {
		t.Errorf("bob's stream: %+v", ev)
	}
	e.Clock.Advance(45 * time.Second) // watched and bobs go offline
	if ev := mine.next(); !strings.Contains(ev.data, `"state":"offline"`) || !strings.Contains(ev.data, `"watched"`) {
		t.Errorf("offline event = %+v (bob's agents never reach this stream)", ev)
	}
	// Resume after the first event: the offline event again, only mine.
	resumed := e.events(t, e.admin, first)
	if ev := resumed.next(); !strings.Contains(ev.data, `"watched"`) || !strings.Contains(ev.data, `"offline"`) {
		t.Errorf("resumed: %+v", ev)
	}
	// An id not in the buffer: stream.missed first.
	missed := e.events(t, e.admin, "9999-gone")
	if ev := missed.next(); ev.kind != events.KindStreamMissed || !strings.Contains(ev.data, `"last_event_id":"9999-gone"`) {
		t.Errorf("unknown Last-Event-ID: %+v", ev)
	}
	// At shutdown the hub closes and the streams end.
	e.Service.CloseEvents()
	for mine.sc.Scan() {
	}
}
