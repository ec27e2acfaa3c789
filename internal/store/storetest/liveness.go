package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
)

// livenessTests are the contract of store.LivenessStore (design: Store contract, Billing-mode audit, Flush loop, Start rule, Project readiness);
// with Instance.Twin set the races run across two
// instances on one database.
var livenessTests = []contractTest{
	{"Liveness/DefaultsAndScan", testLivenessDefaults},
	{"Liveness/PersistMonotone", testPersistMonotone},
	{"Liveness/PersistKeepsAuditedColumns", testPersistKeepsAudited},
	{"Liveness/PersistAscendingNoDeadlock", testPersistAscending},
	{"Liveness/ListLiveAgents", testListLiveAgents},
	{"Liveness/ReportedChange", testReportedChange},
	{"Liveness/ReportedChangeConcurrent", testReportedChangeConcurrent},
	{"Liveness/ProjectReadiness", testProjectReadiness},
	{"Liveness/ReportedChangesBatch", testReportedChangesBatch},
	{"Liveness/DBNow", testDBNow},
}

func hbRow(id, state string, hb time.Time, version string, body string) store.HeartbeatRow {
	r := store.HeartbeatRow{AgentID: id, State: state, LastHeartbeatAt: hb, HasReport: true, ReportedState: []byte(body)}
	if version != "" {
		r.RuntimeVersion = &version
	}
	return r
}

func testLivenessDefaults(t *testing.T, in Instance) {
	s := in.Store
	a := vend(t, s, newAgent("fresh", ownerID, "q"))
	got := agentByID(t, s, a.ID).Liveness
	if got.State != "unknown" {
		t.Errorf("state of a new agent = %q, want unknown", got.State)
	}
	if got.LastHeartbeatAt != nil || got.ReportedBillingMode != nil || got.ReportedToolClass != nil ||
		got.ReportedRuntimeVersion != nil || got.ReportedState != nil || got.ProjectReadiness != nil {
		t.Errorf("liveness of a new agent = %+v, want all unset", got)
	}
}

func testPersistMonotone(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ls := s
	a := vend(t, s, newAgent("mono", ownerID, "q"))
	t2 := at(2*time.Minute + 1234567*time.Nanosecond)
	n, err := ls.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{Rows: []store.HeartbeatRow{
		hbRow(a.ID, "online", t2, "1.2.3", `{"state":"online"}`),
	}})
	must(t, "PersistHeartbeats", err)
	if n != 1 {
		t.Errorf("written = %d, want 1", n)
	}
	got := agentByID(t, s, a.ID)
	if got.Liveness.State != "online" {
		t.Errorf("state = %q, want online", got.Liveness.State)
	}
	sameTime(t, "last_heartbeat_at", got.Liveness.LastHeartbeatAt, t2)
	if v := got.Liveness.ReportedRuntimeVersion; v == nil || *v != "1.2.3" {
		t.Errorf("reported_runtime_version = %v, want 1.2.3", v)
	}
	sameJSON(t, "reported_state", got.Liveness.ReportedState, json.RawMessage(`{"state":"online"}`))
	if !got.UpdatedAt.Equal(micro(Base)) {
		t.Errorf("updated_at = %v, want unchanged %v (a heartbeat is no configuration change)", got.UpdatedAt, Base)
	}

	// An older heartbeat (another instance's, flushed late) never moves the
	// time back nor overwrites the fresher state.
	n, err = ls.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{Rows: []store.HeartbeatRow{
		hbRow(a.ID, "offline", t2.Add(-time.Second), "0.9", `{"state":"degraded"}`),
	}})
	must(t, "PersistHeartbeats (older)", err)
	if n != 0 {
		t.Errorf("written (older) = %d, want 0", n)
	}
	got = agentByID(t, s, a.ID)
	sameTime(t, "last_heartbeat_at after an older write", got.Liveness.LastHeartbeatAt, t2)
	if got.Liveness.State != "online" {
		t.Errorf("state after an older write = %q, want online", got.Liveness.State)
	}

	// The offline write uses the entry's last heartbeat: equal passes, and
	// without a report it keeps the stored reported state.
	n, err = ls.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{Rows: []store.HeartbeatRow{
		{AgentID: a.ID, State: "offline", LastHeartbeatAt: t2},
		{AgentID: uuid.NewString(), State: "offline", LastHeartbeatAt: t2}, // unknown id: skipped
	}})
	must(t, "PersistHeartbeats (offline)", err)
	if n != 1 {
		t.Errorf("written (offline) = %d, want 1", n)
	}
	got = agentByID(t, s, a.ID)
	if got.Liveness.State != "offline" {
		t.Errorf("state = %q, want offline", got.Liveness.State)
	}
	sameJSON(t, "reported_state kept", got.Liveness.ReportedState, json.RawMessage(`{"state":"online"}`))
	if v := got.Liveness.ReportedRuntimeVersion; v == nil || *v != "1.2.3" {
		t.Errorf("reported_runtime_version kept = %v, want 1.2.3", v)
	}

	// Empty pass: nothing to do.
	if n, err := ls.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{}); err != nil || n != 0 {
		t.Errorf("empty PersistHeartbeats = %d, %v", n, err)
	}
}

func testPersistKeepsAudited(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ls := s
	a := vend(t, s, newAgent("audited", ownerID, "q"))
	mode, class := "api", "claude-code"
	wrote, err := ls.ApplyReportedChange(ctx, reportedChange(a.ID, &mode, &class, at(time.Minute)))
	must(t, "ApplyReportedChange", err)
	if !wrote {
		t.Fatal("first report: wrote = false")
	}
	_, err = ls.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{Rows: []store.HeartbeatRow{
		hbRow(a.ID, "degraded", at(2*time.Minute), "", `{"state":"degraded"}`),
	}})
	must(t, "PersistHeartbeats", err)
	got := agentByID(t, s, a.ID).Liveness
	if got.ReportedBillingMode == nil || *got.ReportedBillingMode != mode || got.ReportedToolClass == nil || *got.ReportedToolClass != class {
		t.Errorf("audited columns after a flush = %v, %v; want %s, %s (only the audit path writes them)",
			got.ReportedBillingMode, got.ReportedToolClass, mode, class)
	}
	if got.ReportedRuntimeVersion != nil {
		t.Errorf("reported_runtime_version = %q, want NULL (not reported by the last heartbeat)", *got.ReportedRuntimeVersion)
	}
	if got.State != "degraded" {
		t.Errorf("state = %q, want degraded", got.State)
	}
}

func testPersistAscending(t *testing.T, in Instance) {
	s := in.Store
	ls, ls2 := s, twinOrSelf(t, in)
	var ids []string
	for i := range 12 {
		ids = append(ids, vend(t, s, newAgent(fmt.Sprintf("asc-%02d", i), ownerID, "q")).ID)
	}
	rows := func(ids []string, hb time.Time) []store.HeartbeatRow {
		out := make([]store.HeartbeatRow, len(ids))
		for i, id := range ids {
			out[i] = hbRow(id, "online", hb, "", `{"state":"online"}`)
		}
		return out
	}
	desc := slices.Clone(ids)
	slices.Sort(desc)
	slices.Reverse(desc)
	// Two instances flush overlapping sets given in opposite orders, many
	// times: the adapter orders the writes by id, so no deadlock error.
	const rounds = 20
	errs := parallel(2*rounds, func(i int) error {
		hb := at(time.Duration(i) * time.Second)
		if i%2 == 0 {
			_, err := ls.PersistHeartbeats(t.Context(), store.PersistHeartbeatsParams{Rows: rows(ids, hb)})
			return err
		}
		_, err := ls2.PersistHeartbeats(t.Context(), store.PersistHeartbeatsParams{Rows: rows(desc, hb)})
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("flush %d: %v", i, err)
		}
	}
	for _, id := range ids {
		got := agentByID(t, s, id)
		// Monotone: whatever the interleaving, the latest flush time wins.
		sameTime(t, "last_heartbeat_at of "+got.Handle, got.Liveness.LastHeartbeatAt, at((2*rounds-1)*time.Second))
	}
}

func testListLiveAgents(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ls := s
	states := []string{"online", "degraded", "offline", "online", "", "degraded", "online"}
	var live []string
	var rows []store.HeartbeatRow
	for i, st := range states {
		a := vend(t, s, newAgent(fmt.Sprintf("live-%d", i), ownerID, "q"))
		if st == "" {
			continue // never heartbeated: unknown
		}
		rows = append(rows, hbRow(a.ID, st, at(time.Duration(i)*time.Second), "", `{}`))
		if st != "offline" {
			live = append(live, a.ID)
		}
	}
	_, err := ls.PersistHeartbeats(ctx, store.PersistHeartbeatsParams{Rows: rows})
	must(t, "PersistHeartbeats", err)
	slices.Sort(live)

	all, err := ls.ListLiveAgents(ctx, store.ListLiveAgentsParams{})
	must(t, "ListLiveAgents", err)
	var got []string
	for _, a := range all {
		got = append(got, a.ID)
		if a.Liveness.State != "online" && a.Liveness.State != "degraded" {
			t.Errorf("listed %s with state %q", a.Handle, a.Liveness.State)
		}
		if a.Liveness.LastHeartbeatAt == nil {
			t.Errorf("listed %s without last_heartbeat_at", a.Handle)
		}
	}
	diff(t, "live agent ids (ascending)", live, got)

	// Paging by id.
	var paged []string
	after := ""
	for {
		page, err := ls.ListLiveAgents(ctx, store.ListLiveAgentsParams{AfterID: after, Limit: 2})
		must(t, "ListLiveAgents page", err)
		if len(page) > 2 {
			t.Fatalf("page of %d > limit 2", len(page))
		}
		for _, a := range page {
			paged = append(paged, a.ID)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	diff(t, "paged live agent ids", live, paged)
}

func reportedChange(id string, mode, class *string, hb time.Time) store.ApplyReportedChangeParams {
	return store.ApplyReportedChangeParams{
		AgentID: id, BillingMode: mode, ToolClass: class, State: "online", HeartbeatAt: hb,
		ReportedState: []byte(`{"state":"online"}`),
		Audit: func(old store.ReportedPair) domain.AuditRecord {
			data := map[string]string{}
			put := func(k string, v *string) {
				if v != nil {
					data[k] = *v
				}
			}
			put("billing_mode_old", old.BillingMode)
			put("billing_mode_new", mode)
			put("tool_class_old", old.ToolClass)
			put("tool_class_new", class)
			return domain.AuditRecord{Actor: "agent:" + id, Action: "agent.heartbeat", AgentID: id, Decision: "allow", Data: data}
		},
	}
}

func heartbeatAudits(t *testing.T, s store.Store, agentID string) []domain.AuditEntry {
	t.Helper()
	es, err := s.ListAudit(t.Context(), store.ListAuditParams{AgentID: agentID})
	must(t, "ListAudit", err)
	var out []domain.AuditEntry
	for _, e := range es {
		if e.Action == "agent.heartbeat" {
			out = append(out, e)
		}
	}
	return out
}

func testReportedChange(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ls := s
	a := vend(t, s, newAgent("reported", ownerID, "q"))
	api, sub, cc := "api", "subscription", "claude-code"
	steps := []struct {
		name        string
		mode, class *string
		wrote       bool
		data        string
	}{
		{"first report", &api, nil, true, `{"billing_mode_new":"api"}`},
		{"equal", &api, nil, false, ""},
		{"mode and class change", &sub, &cc, true, `{"billing_mode_new":"subscription","billing_mode_old":"api","tool_class_new":"claude-code"}`},
		{"stop reporting the mode", nil, &cc, true, `{"billing_mode_old":"subscription","tool_class_new":"claude-code","tool_class_old":"claude-code"}`},
		{"equal again", nil, &cc, false, ""},
	}
	var want []string
	for i, st := range steps {
		hb := at(time.Duration(i+1) * time.Minute)
		wrote, err := ls.ApplyReportedChange(ctx, reportedChange(a.ID, st.mode, st.class, hb))
		must(t, st.name, err)
		if wrote != st.wrote {
			t.Errorf("%s: wrote = %v, want %v", st.name, wrote, st.wrote)
		}
		if st.wrote {
			want = append(want, st.data)
		}
		got := agentByID(t, s, a.ID).Liveness
		if !store.SamePtr(got.ReportedBillingMode, st.mode) || !store.SamePtr(got.ReportedToolClass, st.class) {
			t.Errorf("%s: stored pair = %v, %v", st.name, deref(got.ReportedBillingMode), deref(got.ReportedToolClass))
		}
		if st.wrote {
			sameTime(t, st.name+": last_heartbeat_at", got.LastHeartbeatAt, hb)
			if got.State != "online" {
				t.Errorf("%s: state = %q, want online", st.name, got.State)
			}
		}
	}
	es := heartbeatAudits(t, s, a.ID)
	var got []string
	for _, e := range es {
		got = append(got, string(e.Data))
		if e.Decision != "allow" || e.Actor != "agent:"+a.ID {
			t.Errorf("audit seq %d: decision %q actor %q", e.Seq, e.Decision, e.Actor)
		}
	}
	diff(t, "agent.heartbeat audit data", want, got)
	if got := agentByID(t, s, a.ID).UpdatedAt; !got.Equal(micro(Base)) {
		t.Errorf("updated_at = %v, want unchanged", got)
	}

	// An older heartbeat's change never moves last_heartbeat_at back.
	wrote, err := ls.ApplyReportedChange(ctx, reportedChange(a.ID, &api, &cc, at(time.Second)))
	must(t, "older change", err)
	if !wrote {
		t.Error("older change: wrote = false, want true (the pair differs)")
	}
	sameTime(t, "last_heartbeat_at after an older change", agentByID(t, s, a.ID).Liveness.LastHeartbeatAt, at(4*time.Minute)) // the last written change

	_, err = ls.ApplyReportedChange(ctx, reportedChange(uuid.NewString(), &api, nil, at(time.Hour)))
	wantErr(t, "unknown agent", err, domain.ErrNotFound)
}

// testReportedChangeConcurrent tests the audit (design: Billing-mode audit): 50 concurrent
// heartbeats changing the mode from A to B, spread over two instances
// (when the adapter can open a twin) → exactly one audit entry, and the
// audit chain verifies.
func testReportedChangeConcurrent(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	stores := twoStores(t, in)
	a := vend(t, s, newAgent("racer", ownerID, "q"))
	modeA, modeB := "api", "subscription"
	wrote, err := s.ApplyReportedChange(ctx, reportedChange(a.ID, &modeA, nil, at(time.Minute)))
	must(t, "report A", err)
	if !wrote {
		t.Fatal("report A: wrote = false")
	}
	before := len(heartbeatAudits(t, s, a.ID))
	const n = 50
	wrotes := make([]bool, n)
	errs := parallel(n, func(i int) error {
		ls := stores[i%len(stores)]
		w, err := ls.ApplyReportedChange(ctx, reportedChange(a.ID, &modeB, nil, at(2*time.Minute+time.Duration(i)*time.Millisecond)))
		wrotes[i] = w
		return err
	})
	winners := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("heartbeat %d: %v", i, err)
		}
		if wrotes[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d heartbeats wrote the change, want exactly 1", winners)
	}
	es := heartbeatAudits(t, s, a.ID)
	if len(es)-before != 1 {
		t.Fatalf("agent.heartbeat entries added = %d, want exactly 1", len(es)-before)
	}
	sameJSON(t, "audit data", es[len(es)-1].Data, json.RawMessage(`{"billing_mode_new":"subscription","billing_mode_old":"api"}`))
	res, err := s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	if !res.OK {
		t.Errorf("VerifyAudit = %+v, want ok", res)
	}
	if got := agentByID(t, s, a.ID).Liveness.ReportedBillingMode; got == nil || *got != modeB {
		t.Errorf("reported_billing_mode = %v, want %s", deref(got), modeB)
	}
}

// testReportedChangesBatch: ApplyReportedChanges is ApplyReportedChange for
// many agents in one transaction (design: Billing-mode audit): each element compared
// again and audited on its own, equal ones write nothing, an unknown agent
// is false (not an error), and the audit chain stays whole — also when two
// instances' batches race.
func testReportedChangesBatch(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	stores := twoStores(t, in)
	api, sub := "api", "subscription"
	var ids []string
	for i := range 6 {
		ids = append(ids, vend(t, s, newAgent(fmt.Sprintf("batch-%d", i), ownerID, "q")).ID)
	}
	// ids[0] already reports api: equal in the batch, written nothing.
	if w, err := s.ApplyReportedChange(ctx, reportedChange(ids[0], &api, nil, at(time.Minute))); err != nil || !w {
		t.Fatalf("pre-report: %v, %v", w, err)
	}
	before := len(heartbeatAudits(t, s, ids[0]))
	ps := []store.ApplyReportedChangeParams{
		reportedChange(ids[3], &sub, nil, at(2*time.Minute)),
		reportedChange(ids[0], &api, nil, at(2*time.Minute)),
		reportedChange("00000000-0000-0000-0000-000000000000", &api, nil, at(2*time.Minute)),
		reportedChange(ids[1], &api, nil, at(2*time.Minute)),
	}
	wrote, err := s.ApplyReportedChanges(ctx, ps)
	must(t, "ApplyReportedChanges", err)
	if want := []bool{true, false, false, true}; fmt.Sprint(wrote) != fmt.Sprint(want) {
		t.Fatalf("wrote = %v, want %v", wrote, want)
	}
	if n := len(heartbeatAudits(t, s, ids[0])); n != before {
		t.Errorf("the equal element was audited: %d entries, want %d", n, before)
	}
	for _, id := range []string{ids[1], ids[3]} {
		if es := heartbeatAudits(t, s, id); len(es) != 1 {
			t.Errorf("agent %s: %d agent.heartbeat entries, want 1", id, len(es))
		}
	}
	if got := agentByID(t, s, ids[3]).Liveness; got.ReportedBillingMode == nil || *got.ReportedBillingMode != sub || got.State != "online" {
		t.Errorf("ids[3] stored %+v", got)
	}
	// Two instances' batches over the same agents: each change audited
	// exactly once, the chain verifies.
	errs := parallel(2, func(i int) error {
		var ps []store.ApplyReportedChangeParams
		for _, id := range ids[2:] {
			ps = append(ps, reportedChange(id, &sub, &sub, at(3*time.Minute)))
		}
		_, err := stores[i%len(stores)].ApplyReportedChanges(ctx, ps)
		return err
	})
	for _, err := range errs {
		must(t, "racing batches", err)
	}
	for _, id := range ids[2:] {
		n := 2 // ids[3] was reported once before
		if id != ids[3] {
			n = 1
		}
		if es := heartbeatAudits(t, s, id); len(es) != n {
			t.Errorf("agent %s after racing batches: %d entries, want %d", id, len(es), n)
		}
	}
	res, err := s.VerifyAudit(ctx, store.VerifyAuditParams{})
	must(t, "VerifyAudit", err)
	if !res.OK {
		t.Errorf("VerifyAudit = %+v, want ok", res)
	}
	if w, err := s.ApplyReportedChanges(ctx, nil); err != nil || len(w) != 0 {
		t.Errorf("empty batch: %v, %v", w, err)
	}
}

// testDBNow: the database's clock is a real, current time (the test runs
// on the same host: within a minute of this process's clock) and moves
// forward.
func testDBNow(t *testing.T, in Instance) {
	a, err := in.Store.DBNow(t.Context())
	must(t, "DBNow", err)
	if d := time.Since(a); d > time.Minute || d < -time.Minute {
		t.Fatalf("DBNow = %s, %s from this host's clock", a, d)
	}
	b, err := in.Store.DBNow(t.Context())
	must(t, "DBNow", err)
	if b.Before(a) {
		t.Errorf("DBNow went back: %s then %s", a, b)
	}
}

func testProjectReadiness(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	ls := s
	a := vend(t, s, newAgent("ready", ownerID, "q", "r"))
	list := []byte(`[{"queue":"q","ready":false,"reason":"no_checkout"},{"queue":"r","ready":true}]`)
	now := at(3*time.Minute + 987654*time.Nanosecond)
	must(t, "ApplyProjectReadiness", ls.ApplyProjectReadiness(ctx, store.ApplyProjectReadinessParams{AgentID: a.ID, Readiness: list, Now: now}))
	got := agentByID(t, s, a.ID)
	sameJSON(t, "project_readiness", got.Liveness.ProjectReadiness, list)
	if !got.UpdatedAt.Equal(micro(now)) {
		t.Errorf("updated_at = %v, want bumped to %v (other instances' presence caches refresh)", got.UpdatedAt, micro(now))
	}
	// Another instance's "changed since" net sees it.
	if ps, ok := s.(store.PresenceStore); ok {
		changed, err := ps.ListAgentsChangedSince(ctx, store.ListChangedParams{Since: now, Limit: 10})
		must(t, "ListAgentsChangedSince", err)
		if len(changed) != 1 || changed[0].ID != a.ID {
			t.Errorf("ListAgentsChangedSince(now) = %d agents, want the one with new readiness", len(changed))
		}
	}
	must(t, "ApplyProjectReadiness (empty list)", ls.ApplyProjectReadiness(ctx, store.ApplyProjectReadinessParams{AgentID: a.ID, Readiness: []byte(`[]`), Now: now.Add(time.Second)}))
	sameJSON(t, "project_readiness (empty)", agentByID(t, s, a.ID).Liveness.ProjectReadiness, json.RawMessage(`[]`))

	err := ls.ApplyProjectReadiness(ctx, store.ApplyProjectReadinessParams{AgentID: uuid.NewString(), Readiness: list, Now: now})
	if !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("unknown agent: error = %v, want ErrNotFound", err)
	}
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}
