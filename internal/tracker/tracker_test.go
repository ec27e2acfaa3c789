package tracker_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/liveness"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/testkit"
	"github.com/rollcall/rollcall/internal/tracker"
)

// TestHeartbeatAuthorization is the authorization matrix (design: Heartbeat authorization): the agent itself
// may send; its owner gets 403 forbidden (subject_kind_not_allowed); any
// other person or agent gets 404 not_found, also for an agent that exists
// (404 before 403).
func TestHeartbeatAuthorization(t *testing.T) {
	e := newLvEnv(t)
	self := e.vend("self")
	other := e.vend("other")
	stranger := e.person("stranger")
	owner := domain.Principal{Person: &e.admin}
	cases := []struct {
		name   string
		p      domain.Principal
		ref    string
		code   domain.Code
		reason string
	}{
		{"agent itself by id", self, self.Agent.ID, "", ""},
		{"agent itself by handle", self, "self", "", ""},
		{"another agent", other, self.Agent.ID, domain.CodeNotFound, ""},
		{"another agent by handle", other, "self", domain.CodeNotFound, ""},
		{"agent, unknown ref", self, "nobody", domain.CodeNotFound, ""},
		{"owner", owner, self.Agent.ID, domain.CodeForbidden, "subject_kind_not_allowed"},
		{"owner by handle", owner, "self", domain.CodeForbidden, "subject_kind_not_allowed"},
		{"owner, unknown ref", owner, "nobody", domain.CodeNotFound, ""},
		{"another person", domain.Principal{Person: &stranger}, self.Agent.ID, domain.CodeNotFound, ""},
		{"another person by handle", domain.Principal{Person: &stranger}, "self", domain.CodeNotFound, ""},
		{"nobody", domain.Principal{}, self.Agent.ID, domain.CodeUnauthenticated, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ack, err := e.svc.Heartbeat(t.Context(), tc.p, tc.ref, []byte(online), app.Arrival{})
			if tc.code == "" {
				if err != nil {
					t.Fatalf("err = %v, want ok", err)
				}
				if ack.IntervalMS != 15000 {
					t.Errorf("interval_ms = %d, want 15000 (sync.heartbeat_interval)", ack.IntervalMS)
				}
				return
			}
			var de *domain.Error
			if !errors.As(err, &de) || de.Code != tc.code || de.Reason != tc.reason {
				t.Fatalf("err = %#v, want code %s reason %q", err, tc.code, tc.reason)
			}
		})
	}
	// A refused heartbeat changes nothing: only the agent's own counted.
	wantState(t, e.svc, other.Agent.ID, "untracked", "the other agent after refused heartbeats")
}

// TestHeartbeatBodyErrors: the one decoder's errors come back with their
// code and pointer and change nothing.
func TestHeartbeatBodyErrors(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("bodies")
	cases := []struct{ body, code, ptr string }{
		{`{"state":"online","nope":1}`, "unknown_member", "/nope"},
		{`{"state":"asleep"}`, "invalid_argument", "/state"},
		{`{"state":"degraded"}`, "invalid_argument", "/state"},
		{`{"state":"online","details":{"adapter":{"name":"x","colour":"red"}}}`, "unknown_member", "/details/adapter/colour"},
		{`{"state":"online","billing_mode":"Has Space"}`, "invalid_argument", "/billing_mode"},
		{`not json`, "invalid_argument", ""},
	}
	for _, tc := range cases {
		_, err := e.svc.Heartbeat(t.Context(), p, p.Agent.ID, []byte(tc.body), app.Arrival{})
		var de *domain.Error
		if !errors.As(err, &de) || string(de.Code) != tc.code || de.Pointer != tc.ptr {
			t.Errorf("%s: err = %v, want %s at %q", tc.body, err, tc.code, tc.ptr)
		}
	}
	wantState(t, e.svc, p.Agent.ID, "untracked", "after refused bodies")
}

// TestNoFlapAtOneSecond: heartbeats 1 s apart for a minute never flap; the
// agent goes offline exactly at last heartbeat + agent.presence_timeout
// (inclusive boundary), published once.
func TestNoFlapAtOneSecond(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("steady")
	rec := e.record(e.svc, e.admin)
	for i := range 60 {
		e.beat(e.svc, p, online)
		if i == 0 {
			rec.expect("steady", "online", nil)
		}
		e.clock.Advance(time.Second)
		if st := state(t, e.svc, p.Agent.ID); st != "online" {
			t.Fatalf("after %d s: state %s, want online", i+1, st)
		}
	}
	rec.none("a minute of heartbeats 1 s apart")
	last := t0.Add(59 * time.Second) // the 60th heartbeat
	// One microsecond before the deadline: still online, no timer fired.
	e.clock.Advance(last.Add(45*time.Second - time.Microsecond).Sub(e.clock.Now()))
	if st := state(t, e.svc, p.Agent.ID); st != "online" {
		t.Fatalf("1 µs before the deadline: %s, want online", st)
	}
	rec.none("1 µs before the deadline")
	e.clock.Advance(time.Microsecond) // exactly last + timeout
	rec.expect("steady", "offline", nil)
	wantState(t, e.svc, p.Agent.ID, "offline", "at the deadline")
	e.clock.Advance(time.Hour)
	rec.none("an hour offline")
}

// TestSenderClockIgnored: freshness is the server clock's. The heartbeat
// body carries no time; what a sender's clock says (hours off) cannot move
// last_heartbeat_at or the deadline.
func TestSenderClockIgnored(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("skewed")
	e.clock.Advance(3 * time.Hour) // the sender's clock is irrelevant; the server's moved
	e.beat(e.svc, p, body("api"))
	st, err := e.svc.AgentStatus(t.Context(), e.admin, "skewed")
	if err != nil {
		t.Fatal(err)
	}
	if st.LastHeartbeatAt == nil || !st.LastHeartbeatAt.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("last_heartbeat_at = %s, want the server clock %s", fmtTime(st.LastHeartbeatAt), t0.Add(3*time.Hour))
	}
	e.clock.Advance(44 * time.Second)
	wantState(t, e.svc, p.Agent.ID, "online", "44 s later")
}

// TestPublishPair: agent.presence_changed is published exactly when (state,
// reported_billing_mode) changes; the last reported mode stays while
// offline (design: Billing-mode audit, Presence-changed events).
func TestPublishPair(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("pairs")
	rec := e.record(e.svc, e.admin)
	degraded := `{"state":"degraded","billing_mode":"api","details":{"degraded_reasons":["rate_limited"]}}`
	steps := []struct {
		body  string
		event bool
		state string
		mode  *string
	}{
		{online, true, "online", nil},
		{online, false, "", nil},
		{body("api"), true, "online", ptr("api")},
		{body("api", `"tool_class":"claude-code"`), false, "", nil}, // the class is not in the pair
		{degraded, true, "degraded", ptr("api")},
		{degraded, false, "", nil},
		{body("api"), true, "online", ptr("api")},
		{body("subscription"), true, "online", ptr("subscription")},
	}
	for i, st := range steps {
		e.beat(e.svc, p, st.body)
		if st.event {
			rec.expect("pairs", st.state, st.mode)
		} else {
			rec.none(st.body)
		}
		e.clock.Advance(time.Second)
		_ = i
	}
	e.clock.Advance(45 * time.Second)
	rec.expect("pairs", "offline", ptr("subscription")) // the last reported mode stays
	e.beat(e.svc, p, body("subscription"))
	rec.expect("pairs", "online", ptr("subscription"))
}

// TestReportedChangeAudit: a change of the reported billing mode or tool
// class (first report, to and from not reported) appends exactly one
// agent.heartbeat entry with only the (design: Billing-mode audit) keys; equal reports append
// nothing.
func TestReportedChangeAudit(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("audited")
	ev := `"billing_evidence":{"key_type":"oauth","method":"credentials_file"}`
	bodies := []string{
		online,          // nothing reported: no change from the stored NULLs
		body("api", ev), // first report
		body("api", ev), // equal
		body("api", `"tool_class":"claude-code"`), // class first reported
		online, // both stop being reported
		online,
	}
	for _, b := range bodies {
		e.beat(e.svc, p, b)
		e.clock.Advance(time.Second)
	}
	es := auditOf(t, e.store, p.Agent.ID, "agent.heartbeat")
	want := []string{
		`{"billing_mode_new":"api","key_type":"oauth","method":"credentials_file"}`,
		`{"billing_mode_new":"api","billing_mode_old":"api","tool_class_new":"claude-code"}`,
		`{"billing_mode_old":"api","tool_class_old":"claude-code"}`,
	}
	if len(es) != len(want) {
		t.Fatalf("%d agent.heartbeat entries, want %d", len(es), len(want))
	}
	for i, en := range es {
		if string(en.Data) != want[i] || en.Decision != "allow" || en.Actor != "agent:"+p.Agent.ID {
			t.Errorf("entry %d = %s %s %s, want allow by the agent with %s", i, en.Actor, en.Decision, en.Data, want[i])
		}
	}
	if !es[0].At.Equal(t0.Add(time.Second)) {
		t.Errorf("audit time = %s, want the server clock at the heartbeat", es[0].At)
	}
	a := e.agent(p.Agent.ID)
	if a.Liveness.ReportedBillingMode != nil || a.Liveness.ReportedToolClass != nil {
		t.Errorf("stored pair = %s, %s; want not reported", deref(a.Liveness.ReportedBillingMode), deref(a.Liveness.ReportedToolClass))
	}
	res, err := e.store.VerifyAudit(t.Context(), store.VerifyAuditParams{})
	if err != nil || !res.OK {
		t.Errorf("VerifyAudit = %+v, %v", res, err)
	}
}

// TestReportedChangeConcurrentInstances: 50 concurrent heartbeats changing
// the mode from A to B, spread over two instances (two Services on one
// store and bus) → exactly one audit entry, and the chain verifies.
func TestReportedChangeConcurrentInstances(t *testing.T) {
	cfg := lvCfg
	cfg.RateBurst = 100
	e := newLvEnv(t, withConfig(cfg))
	b := e.instance("b", cfg)
	p := e.vend("racer")
	e.beat(e.svc, p, body("api"))
	fresh := func() domain.Principal { // each transport authenticates afresh
		a := e.agent(p.Agent.ID)
		return domain.Principal{Agent: &a, CredentialID: p.CredentialID}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	start := make(chan struct{})
	for i := range 50 {
		svc := e.svc
		if i%2 == 1 {
			svc = b
		}
		pp := fresh()
		wg.Go(func() {
			<-start
			_, err := svc.Heartbeat(context.Background(), pp, pp.Agent.ID, []byte(body("subscription")), app.Arrival{})
			if err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("heartbeat: %v", err)
	}
	es := auditOf(t, e.store, p.Agent.ID, "agent.heartbeat")
	if len(es) != 2 { // A (first report), then A→B exactly once
		t.Fatalf("%d agent.heartbeat entries, want 2", len(es))
	}
	if got := string(es[1].Data); got != `{"billing_mode_new":"subscription","billing_mode_old":"api"}` {
		t.Errorf("A→B entry data = %s", got)
	}
	if res, err := e.store.VerifyAudit(t.Context(), store.VerifyAuditParams{}); err != nil || !res.OK {
		t.Errorf("VerifyAudit = %+v, %v", res, err)
	}
}

// failingReadiness makes ApplyProjectReadiness fail, to test that its
// failure fails the heartbeat and changes no presence (design: Project readiness).
type failingReadiness struct {
	*sqlite.Store
	mu    sync.Mutex
	fail  bool
	calls int
}

func (f *failingReadiness) ApplyProjectReadiness(ctx context.Context, p store.ApplyProjectReadinessParams) error {
	f.mu.Lock()
	f.calls++
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return errors.New("disk on fire")
	}
	return f.Store.ApplyProjectReadiness(ctx, p)
}

// TestProjectReadiness: applied only when present and different from the
// last list applied, in its own unit of work; absent means unchanged; a
// failure fails the heartbeat (internal) and changes no presence.
func TestProjectReadiness(t *testing.T) {
	var fr *failingReadiness
	e := newLvEnv(t, withStore(func(s *sqlite.Store) store.Store { fr = &failingReadiness{Store: s}; return fr }))
	p := e.vend("ready")
	rec := e.record(e.svc, e.admin)
	list := func(ready bool) string {
		if ready {
			return `"project_readiness":[{"queue":"build","ready":true},{"queue":"review","ready":false,"reason":"no_checkout"}]`
		}
		return `"project_readiness":[{"queue":"build","ready":false}]`
	}
	e.beat(e.svc, p, body("", list(true)))
	rec.expect("ready", "online", nil)
	e.beat(e.svc, p, body("", `"project_readiness":[{"queue":"review","ready":false,"reason":"no_checkout"},{"queue":"build","ready":true}]`)) // same, other order
	e.beat(e.svc, p, online)                                                                                                                   // absent: unchanged
	if fr.calls != 1 {
		t.Errorf("ApplyProjectReadiness calls = %d, want 1 (only when present and changed)", fr.calls)
	}
	st, err := e.svc.AgentStatus(t.Context(), e.admin, "ready")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.ProjectReadiness) != 2 || st.ProjectReadiness[1] != (app.Readiness{Queue: "review", Ready: false, Reason: "no_checkout"}) {
		t.Errorf("status project_readiness = %+v", st.ProjectReadiness)
	}
	if got := string(e.agent(p.Agent.ID).Liveness.ProjectReadiness); got != `[{"queue":"build","ready":true},{"queue":"review","ready":false,"reason":"no_checkout"}]` {
		t.Errorf("stored project_readiness = %s", got)
	}

	// A failure: internal error, no presence change (no event, mode kept).
	fr.mu.Lock()
	fr.fail = true
	fr.mu.Unlock()
	_, err = e.svc.Heartbeat(t.Context(), p, p.Agent.ID, []byte(`{"state":"degraded","billing_mode":"api","details":{"degraded_reasons":["x"]},`+list(false)+`}`), app.Arrival{})
	if domain.CodeOf(err) != domain.CodeInternal {
		t.Fatalf("heartbeat with a failing readiness write: %v, want internal", err)
	}
	rec.none("failed heartbeat")
	if got := auditOf(t, e.store, p.Agent.ID, "agent.heartbeat"); len(got) != 0 {
		t.Errorf("audit entries after the failed heartbeat: %d, want 0 (readiness runs first)", len(got))
	}
	// The deadline was not moved by the failed heartbeat.
	e.clock.Advance(45 * time.Second)
	rec.expect("ready", "offline", nil)
}

// TestFlushLoop: dirty entries are written at most once per persist
// interval per agent, in one pass, with the monotone write; the rows carry
// the state and the full report; updated_at is untouched. Transitions (the
// first heartbeat, offline) are written at once besides (design: Transitions written at once),
// so the steady heartbeats between them cost no write.
func TestFlushLoop(t *testing.T) {
	e := newLvEnv(t)
	if err := trk(e.svc).Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var ps []domain.Principal
	for i := range 5 {
		ps = append(ps, e.vend("flush-"+string(rune('a'+i))))
	}
	rec := e.record(e.svc, e.admin)
	created := e.agent(ps[0].Agent.ID).UpdatedAt
	for s := 0; s < 30; s++ { // 30 heartbeats each within the interval
		for _, p := range ps {
			e.beat(e.svc, p, body("", `"runtime_version":"1.0.`+string(rune('0'+s%10))+`"`))
		}
		if s == 0 {
			waitRows(t, e.svc, 5) // the first heartbeats, written at once
		}
		e.clock.Advance(time.Second)
	}
	if n := trk(e.svc).RowsWritten(); n != 5 {
		t.Fatalf("rows written before the first flush tick: %d, want the 5 first heartbeats", n)
	}
	e.clock.Advance(30 * time.Second) // the tick at t0+60s
	waitRows(t, e.svc, 10)
	a := e.agent(ps[0].Agent.ID)
	if a.Liveness.State != "online" || a.Liveness.LastHeartbeatAt == nil || !a.Liveness.LastHeartbeatAt.Equal(t0.Add(29*time.Second)) {
		t.Errorf("stored liveness = %s at %s, want online at %s", a.Liveness.State, fmtTime(a.Liveness.LastHeartbeatAt), t0.Add(29*time.Second))
	}
	if v := a.Liveness.ReportedRuntimeVersion; v == nil || *v != "1.0.9" {
		t.Errorf("reported_runtime_version = %v", deref(v))
	}
	if string(a.Liveness.ReportedState) != `{"state":"online","runtime_version":"1.0.9"}` {
		t.Errorf("reported_state = %s", a.Liveness.ReportedState)
	}
	if !a.UpdatedAt.Equal(created) {
		t.Errorf("updated_at moved: %s → %s", created, a.UpdatedAt)
	}
	// No heartbeat during the next interval: offline at 29+45 = 74 s,
	// written at once with the last heartbeat; the tick at 120 s has
	// nothing left to write.
	for range ps {
		rec.expect("", "online", nil)
	}
	e.clock.Advance(15 * time.Second) // t0+75s
	for range ps {                    // published after the entry is marked dirty
		rec.expect("", "offline", nil)
	}
	waitRows(t, e.svc, 15)
	e.clock.Advance(45 * time.Second) // the tick at t0+120s
	if a := e.agent(ps[0].Agent.ID); a.Liveness.State != "offline" || !a.Liveness.LastHeartbeatAt.Equal(t0.Add(29*time.Second)) {
		t.Errorf("after the offline flush: %s at %s, want offline at the last heartbeat", a.Liveness.State, fmtTime(a.Liveness.LastHeartbeatAt))
	}
	e.clock.Advance(60 * time.Second)
	if n := trk(e.svc).RowsWritten(); n != 15 {
		t.Errorf("rows written with nothing dirty = %d, want still 15", n)
	}
}

func waitRows(t *testing.T, svc *app.Service, want int64) {
	t.Helper()
	deadline := time.Now().Add(testkit.Wait)
	for trk(svc).RowsWritten() < want {
		if time.Now().After(deadline) {
			t.Fatalf("rows written = %d, want %d within %s", trk(svc).RowsWritten(), want, testkit.Wait)
		}
		time.Sleep(time.Millisecond)
	}
	if got := trk(svc).RowsWritten(); got != want {
		t.Fatalf("rows written = %d, want exactly %d", got, want)
	}
}

// TestStartRule: after a restart, an agent stored online with a heartbeat
// older than timeout + persist interval is offline at once; the others keep
// their state until start + timeout, and those that heartbeat are never
// reported offline (a restart is not an agent going offline).
func TestStartRule(t *testing.T) {
	e := newLvEnv(t)
	stale, recent, beating := e.vend("stale"), e.vend("recent"), e.vend("beating")
	ls := e.store.(store.LivenessStore)
	_, err := ls.PersistHeartbeats(t.Context(), store.PersistHeartbeatsParams{Rows: []store.HeartbeatRow{
		// At the start (t0+1s) stale is exactly timeout + persist interval
		// (105 s) old: offline at once (inclusive); recent is 1 µs younger.
		{AgentID: stale.Agent.ID, State: "online", LastHeartbeatAt: t0.Add(-104 * time.Second)},
		{AgentID: recent.Agent.ID, State: "degraded", LastHeartbeatAt: t0.Add(-104*time.Second + time.Microsecond)},
		{AgentID: beating.Agent.ID, State: "online", LastHeartbeatAt: t0.Add(-10 * time.Second)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	restarted := e.instance("restarted", lvCfg)
	rec := e.record(restarted, e.admin)
	if err := trk(restarted).Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec.expect("stale", "offline", nil)
	rec.none("start")
	wantState(t, restarted, recent.Agent.ID, "degraded", "recent (degraded kept)")
	for range 60 {
		e.beat(restarted, beating, online)
		e.clock.Advance(time.Second)
	}
	// recent's grace ended at start + 45 s; beating never went offline.
	rec.expect("recent", "offline", nil)
	rec.none("a minute after the restart")
	wantState(t, restarted, beating.Agent.ID, "online", "beating")
}

// TestShutdownFlush: Stop stops the timers without publishing and writes
// the dirty entries; nothing goes offline after it.
func TestShutdownFlush(t *testing.T) {
	e := newLvEnv(t)
	if err := trk(e.svc).Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := e.vend("stopper")
	rec := e.record(e.svc, e.admin)
	e.beat(e.svc, p, body("api"))
	rec.expect("stopper", "online", ptr("api"))
	e.clock.Advance(10 * time.Second)
	e.beat(e.svc, p, body("api"))
	if err := trk(e.svc).Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	a := e.agent(p.Agent.ID)
	if a.Liveness.State != "online" || !a.Liveness.LastHeartbeatAt.Equal(t0.Add(10*time.Second)) {
		t.Errorf("after Stop: %s at %s, want online at the last heartbeat", a.Liveness.State, fmtTime(a.Liveness.LastHeartbeatAt))
	}
	e.clock.Advance(time.Hour)
	rec.none("after Stop")
	if a := e.agent(p.Agent.ID); a.Liveness.State != "online" {
		t.Errorf("stored state after Stop and an hour: %s, want online (a restart is not going offline)", a.Liveness.State)
	}
}

// TestInactiveAgents: an agent stored online but inactive loads inactive:
// no gauge series, but its deadline runs.
func TestInactiveAgents(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("sleepy", app.VendInput{BillingMode: "subscription"})
	q := e.vend("awake", app.VendInput{BillingMode: "subscription"})
	e.beat(e.svc, p, body("api"))
	e.beat(e.svc, q, body("api"))
	if err := trk(e.svc).Stop(t.Context()); err != nil { // the first instance stops (flushes)
		t.Fatal(err)
	}
	if _, err := e.svc.UpdateAgent(t.Context(), e.admin, "sleepy", app.UpdateInput{Active: new(false)}); err != nil {
		t.Fatal(err)
	}
	restarted := e.instance("r", lvCfg)
	rec := e.record(restarted, e.admin)
	if err := trk(restarted).Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{}
	trk(restarted).MismatchAges(func(h string, v float64) { series[h] = v })
	if _, ok := series["sleepy"]; ok || len(series) != 1 {
		t.Errorf("gauge series = %v, want only awake (inactive agents have none)", series)
	}
	e.clock.Advance(45 * time.Second)
	got := map[string]string{}
	for range 2 {
		_, d := rec.next()
		got[d.Agent] = d.State
	}
	if got["sleepy"] != "offline" || got["awake"] != "offline" {
		t.Errorf("offline events = %v, want both (the deadline runs for inactive agents)", got)
	}
}

// TestWarningsTiming: billing_mode_mismatch only after the difference held
// for longer than billing.mismatch_alert_after; unsupported and unknown
// evidence at once; none while offline; the gauge counts seconds since any
// difference began, 0 without one.
func TestWarningsTiming(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("warned", app.VendInput{BillingMode: "subscription", BillingModes: []string{"subscription", "api"}, ToolClass: "claude-code"})
	warnings := func() []string {
		st, err := e.svc.AgentStatus(t.Context(), e.admin, "warned")
		if err != nil {
			t.Fatal(err)
		}
		return st.Warnings
	}
	gauge := func() float64 {
		v := -1.0
		trk(e.svc).MismatchAges(func(h string, s float64) {
			if h == "warned" {
				v = s
			}
		})
		return v
	}
	e.beat(e.svc, p, body("subscription", `"tool_class":"claude-code"`))
	if w := warnings(); len(w) != 0 || gauge() != 0 {
		t.Errorf("no difference: warnings %v gauge %v", w, gauge())
	}
	// Kind (a): mismatch, warned only after 10 min (strictly).
	start := e.clock.Now()
	for e.clock.Now().Sub(start) < 10*time.Minute {
		e.beat(e.svc, p, body("api", `"tool_class":"codex"`))
		if w := strings.Join(warnings(), ","); w != liveness.WarnToolClassMismatch {
			t.Fatalf("after %s: warnings %s, want only tool_class_mismatch", e.clock.Now().Sub(start), w)
		}
		e.clock.Advance(15 * time.Second)
	}
	e.beat(e.svc, p, body("api", `"tool_class":"codex"`))
	if w := strings.Join(warnings(), ","); w != liveness.WarnToolClassMismatch {
		t.Fatalf("at exactly 10 min: %s", w)
	}
	if g := gauge(); g != 600 {
		t.Errorf("gauge at 10 min = %v, want 600", g)
	}
	e.clock.Advance(time.Microsecond)
	if w := strings.Join(warnings(), ","); w != "billing_mode_mismatch,tool_class_mismatch" {
		t.Errorf("after 10 min: %s", w)
	}
	// Offline: no warnings, no difference; the gauge series stays, at 0.
	rec := e.record(e.svc, e.admin)
	e.clock.Advance(45 * time.Second)
	rec.expect("warned", "offline", ptr("api"))
	if w := warnings(); len(w) != 0 || gauge() != 0 {
		t.Errorf("offline: warnings %v gauge %v", w, gauge())
	}
	// Back online with kinds (b) and (c): warned at once; the timing restarts.
	e.beat(e.svc, p, `{"state":"online","billing_modes_supported":["api"],"billing_evidence":{"key_type":"unknown","method":"guess"}}`)
	if w := strings.Join(warnings(), ","); w != "billing_mode_unsupported,billing_evidence_unknown" {
		t.Errorf("unsupported + unknown evidence: %s", w)
	}
	e.clock.Advance(30 * time.Second)
	if g := gauge(); g != 30 {
		t.Errorf("gauge 30 s into a new difference = %v", g)
	}
}

// TestRateLimit: a principal over its bucket gets rate_limited with the
// time after which a retry succeeds; an adapter at 1 heartbeat per second
// is never limited.
func TestRateLimit(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("calm")
	for range 120 {
		e.beat(e.svc, p, online)
		e.clock.Advance(time.Second)
	}
	q := e.vend("noisy")
	limited := 0
	var rl *app.RateLimitedError
	for range tracker.DefaultBurst + 5 {
		_, err := e.svc.Heartbeat(t.Context(), q, q.Agent.ID, []byte(online), app.Arrival{})
		if errors.As(err, &rl) {
			limited++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if limited != 5 {
		t.Fatalf("limited = %d, want 5 beyond the burst of %d", limited, tracker.DefaultBurst)
	}
	if rl.Err.Code != domain.CodeRateLimited || rl.RetryAfter <= 0 || rl.RetryAfter > time.Second || rl.RetryAfterSeconds() != 1 {
		t.Errorf("rate limited error = %+v (retry after %s)", rl.Err, rl.RetryAfter)
	}
	e.clock.Advance(rl.RetryAfter)
	if _, err := e.svc.Heartbeat(t.Context(), q, q.Agent.ID, []byte(online), app.Arrival{}); err != nil {
		t.Errorf("after Retry-After: %v", err)
	}
	// The limit is per principal: the calm agent is unaffected.
	e.beat(e.svc, p, online)
}

// TestConfigRefresh: a PATCH of the configured billing mode reaches the
// tracker's warnings without a new heartbeat.
func TestConfigRefresh(t *testing.T) {
	e := newLvEnv(t)
	p := e.vend("patched", app.VendInput{BillingMode: "api"})
	e.beat(e.svc, p, body("api"))
	if _, err := e.svc.UpdateAgent(t.Context(), e.admin, "patched", app.UpdateInput{BillingMode: new("subscription")}); err != nil {
		t.Fatal(err)
	}
	// No heartbeat since: the refresh travels over the bus (asynchronously).
	deadline := time.Now().Add(testkit.Wait)
	for {
		v := -1.0
		trk(e.svc).MismatchAges(func(h string, s float64) { v = s })
		if v > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the configuration change did not reach the tracker")
		}
		time.Sleep(time.Millisecond)
		e.clock.Advance(time.Second)
	}
}
