package mcpserver_test

// The presence scenarios (design: Effective presence, Self verbs, Operator
// overrides, Held doorbells, Digest on return, Sweep), run against the
// real stack: SQLite store, use cases on a fake clock, the MCP adapter and
// mcp-go's client. The fake clock starts Monday 2026-11-30 09:00 UTC; the
// evaluator and the sweep run when the test calls them.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/doorbell"
	"github.com/rollcall/rollcall/internal/mcpserver"
	"github.com/rollcall/rollcall/internal/store"
)

var (
	monday0900  = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	tuesday0900 = monday0900.Add(24 * time.Hour)
)

const workHours = "Mon-Fri 09:00-13:00"

func (e *env) at(t time.Time) {
	e.t.Helper()
	d := t.Sub(e.clock.Now())
	if d < 0 {
		e.t.Fatalf("the clock cannot go back from %s to %s", e.clock.Now(), t)
	}
	e.clock.Advance(d)
}

func (e *env) setShift(handle, shift string) {
	e.t.Helper()
	if _, err := e.svc.SetShift(e.ctx, e.admin, handle, &shift); err != nil {
		e.t.Fatalf("SetShift(%q): %v", shift, err)
	}
}

// clockedOut is a fresh env with one agent, handle, granted every scope
// verb in the queues, listening on a GET stream, and clocked out.
func clockedOut(t *testing.T, handle string, queues ...string) (*env, app.VendResult, *agentClient) {
	t.Helper()
	e := newEnv(t)
	v := e.vend(handle, allScope, queues...)
	ac := e.listening(v.Credential)
	ac.ok("clock_out", map[string]any{}, nil)
	return e, v, ac
}

// onShift is a fresh env with one agent, handle, granted every scope verb
// in queue "q", on the work-hours shift, and a session of it.
func onShift(t *testing.T, handle string) (*env, app.VendResult, *agentClient) {
	t.Helper()
	e := newEnv(t)
	v := e.vend(handle, allScope, "q")
	e.setShift(handle, workHours)
	return e, v, e.connect(v.Credential, clientConfig{})
}

// outAtEight is a fresh env with agent "morning" (every scope verb, queue
// "q") listening on a GET stream at Monday 20:00, then put on the
// work-hours shift: it is out until Tuesday 09:00.
func outAtEight(t *testing.T) (*env, *agentClient) {
	t.Helper()
	e := newEnv(t)
	v := e.vend("morning", allScope, "q")
	ac := e.listening(v.Credential)
	e.at(monday0900.Add(11 * time.Hour)) // Monday 20:00
	e.setShift("morning", workHours)     // out now
	return e, ac
}

// pass runs one evaluator pass and returns the transitions it claimed.
func (e *env) pass() int {
	e.t.Helper()
	return e.count("evaluator pass", e.svc.EvaluatePresence)
}

// sweep runs one doorbell sweep and returns the doorbells it rang.
func (e *env) sweep() int {
	e.t.Helper()
	return e.count("sweep", e.svc.SweepOnce)
}

// count runs one engine round and returns its count; an error fails the test.
func (e *env) count(what string, round func(context.Context) (int, error)) int {
	e.t.Helper()
	n, err := round(e.ctx)
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
	return n
}

func (e *env) todo(id string) domain.Todo {
	e.t.Helper()
	e.svc.FlushRingRecords()
	td, err := e.store.GetTodo(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetTodo: %v", err)
	}
	return td
}

func (e *env) auditCount(agentID string) int {
	e.t.Helper()
	es, err := e.store.ListAudit(e.ctx, store.ListAuditParams{AgentID: agentID, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(es)
}

// listening connects a client with an open GET stream and waits until the
// server has it.
func (e *env) listening(cred string) *agentClient {
	e.t.Helper()
	ac := e.connect(cred, clientConfig{listen: true})
	e.waitEvent(ac.sessionID(), mcpserver.StreamOpened)
	return ac
}

func presenceOf(ac *agentClient) app.PresenceView {
	ac.t.Helper()
	var v app.PresenceView
	ac.ok("presence", map[string]any{}, &v)
	return v
}

func wantPresence(t testing.TB, v app.PresenceView, presence, source string, until *time.Time) {
	t.Helper()
	if v.Presence != presence || v.Source != source || !sameTime(v.Until, until) {
		t.Fatalf("presence = %s/%s until %v, want %s/%s until %v", v.Presence, v.Source, fmtT(v.Until), presence, source, fmtT(until))
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func fmtT(t *time.Time) string {
	if t == nil {
		return "nil"
	}
	return t.UTC().Format(time.RFC3339)
}

func tp(t time.Time) *time.Time { return &t }

var allScope = []string{"list_todos", "claim", "claim_next", "renew", "complete", "fail"}

func TestPresenceDefaultIsIn(t *testing.T) {
	e := newEnv(t)
	v := e.vend("default-in", allScope, "q")
	ac := e.connect(v.Credential, clientConfig{})
	wantPresence(t, presenceOf(ac), "in", "default", nil)
}

func TestClockOutWithShift(t *testing.T) {
	e, _, ac := onShift(t, "shifty")
	e.at(monday0900.Add(time.Hour)) // Monday 10:00
	var got app.PresenceView
	ac.ok("clock_out", map[string]any{}, &got)
	// Out by the agent's override until 13:00, then by the shift until
	// Tuesday 09:00: presence next changes Tuesday 09:00.
	wantPresence(t, got, "out", "agent", tp(tuesday0900))
	e.at(monday0900.Add(4 * time.Hour)) // 13:00: the override ended, the shift says out
	wantPresence(t, presenceOf(ac), "out", "shift", tp(tuesday0900))
	e.at(tuesday0900)
	wantPresence(t, presenceOf(ac), "in", "shift", tp(tuesday0900.Add(4*time.Hour)))
}

func TestClockOutWithoutShiftLastsUntilClockIn(t *testing.T) {
	e := newEnv(t)
	v := e.vend("noshift", allScope, "q")
	ac := e.connect(v.Credential, clientConfig{})
	var got app.PresenceView
	ac.ok("clock_out", map[string]any{}, &got)
	wantPresence(t, got, "out", "agent", nil)
	e.at(monday0900.Add(72 * time.Hour))
	e.pass()
	wantPresence(t, presenceOf(ac), "out", "agent", nil)
	ac.ok("clock_in", map[string]any{}, &got)
	wantPresence(t, got, "in", "default", nil)
}

func TestClockInOutsideShift(t *testing.T) {
	e, _, ac := onShift(t, "late")
	e.at(monday0900.Add(11 * time.Hour)) // Monday 20:00
	var got app.PresenceView
	ac.ok("clock_in", map[string]any{"for": "2h"}, &got)
	wantPresence(t, got, "in", "agent", tp(monday0900.Add(13*time.Hour)))
	e.at(monday0900.Add(13 * time.Hour)) // 22:00
	wantPresence(t, presenceOf(ac), "out", "shift", tp(tuesday0900))
}

func TestClockInOverCapChangesNothing(t *testing.T) {
	e, v, ac := onShift(t, "capped")
	e.at(monday0900.Add(11 * time.Hour))
	before := presenceOf(ac)
	audits := e.auditCount(v.Agent.ID)
	for _, bad := range []any{"9h", "0s", "-1h", "soon", 5} {
		te := ac.fails("clock_in", map[string]any{"for": bad})
		if te.Code != domain.CodeInvalidArgument || te.Pointer != "/for" {
			t.Fatalf("clock_in for=%v: %+v, want invalid_argument at /for", bad, te)
		}
	}
	if after := presenceOf(ac); after.Presence != before.Presence || after.Source != before.Source || !sameTime(after.Until, before.Until) {
		t.Fatalf("presence changed: %+v → %+v", before, after)
	}
	if n := e.auditCount(v.Agent.ID); n != audits {
		t.Fatalf("audit entries %d → %d: a refused clock_in wrote", audits, n)
	}
}

func TestRepeatedClockOutChangesNothing(t *testing.T) {
	e, v, ac := clockedOut(t, "twice", "q")
	e.pass()
	audits := e.auditCount(v.Agent.ID)
	ac.ok("clock_out", map[string]any{}, nil)
	e.pass()
	if n := e.auditCount(v.Agent.ID); n != audits {
		t.Fatalf("a repeated clock_out wrote %d audit entries", n-audits)
	}
	ac.roundTrip()
	ac.noNote()
}

func TestSelfVerbsListedWhateverTheScope(t *testing.T) {
	e := newEnv(t)
	v := e.vend("narrow", []string{"list_todos", "claim"}, "q")
	ac := e.connect(v.Credential, clientConfig{})
	var names []string
	for _, tl := range ac.listTools() {
		names = append(names, tl.Name)
	}
	if want := []string{"list_todos", "claim", "clock_in", "clock_out", "presence"}; !slices.Equal(names, want) {
		t.Fatalf("tools/list = %v, want %v", names, want)
	}
	var got app.PresenceView
	ac.ok("clock_out", map[string]any{}, &got)
	if got.Presence != "out" {
		t.Fatalf("clock_out → %+v", got)
	}
}

// No self verb's schema accepts an identifier, and an extra argument is
// invalid_argument with nothing changed (design: Self verbs).
func TestSelfVerbsTakeNoIdentifier(t *testing.T) {
	e := newEnv(t)
	v := e.vend("strict", allScope, "q")
	ac := e.connect(v.Credential, clientConfig{})
	for _, tl := range ac.listTools() {
		if !slices.Contains([]string{"clock_in", "clock_out", "presence"}, tl.Name) {
			continue
		}
		if tl.InputSchema.AdditionalProperties != false && tl.InputSchema.AdditionalProperties != nil {
			t.Fatalf("%s: additionalProperties = %v, want false", tl.Name, tl.InputSchema.AdditionalProperties)
		}
		for p := range tl.InputSchema.Properties {
			if strings.Contains(p, "agent") || strings.Contains(p, "queue") || strings.Contains(p, "todo") || strings.HasSuffix(p, "id") {
				t.Fatalf("self verb %s accepts identifier %q", tl.Name, p)
			}
		}
	}
	audits := e.auditCount(v.Agent.ID)
	for _, name := range []string{"clock_out", "clock_in", "presence"} {
		for _, extra := range []string{"agent", "todo_id", "queue"} {
			te := ac.fails(name, map[string]any{extra: "other"})
			if te.Code != domain.CodeInvalidArgument || te.Pointer != "/"+extra {
				t.Fatalf("%s with %s: %+v, want invalid_argument at /%s", name, extra, te, extra)
			}
		}
	}
	wantPresence(t, presenceOf(ac), "in", "default", nil)
	if n := e.auditCount(v.Agent.ID); n != audits {
		t.Fatalf("refused self verbs wrote %d audit entries", n-audits)
	}
}

func TestTodoWhileOutIsHeldButPullable(t *testing.T) {
	e, _, ac := clockedOut(t, "away", "q", "fence")
	held := e.push("away", "q", "held while out")
	ac.roundTrip()
	ac.noNote()
	td := e.todo(held.ID)
	if td.State != domain.TodoPending || td.RingAttempts != 0 || td.LastRingedAt != nil {
		t.Fatalf("held todo = state %s ring_attempts %d last_ringed_at %v", td.State, td.RingAttempts, td.LastRingedAt)
	}
	// The sweep does not select it either.
	e.at(monday0900.Add(2 * time.Hour))
	if n := e.sweep(); n != 0 {
		t.Fatalf("sweep rang %d todos of an agent that is out", n)
	}
	if td := e.todo(held.ID); td.RingAttempts != 0 {
		t.Fatalf("ring_attempts = %d after a sweep while out", td.RingAttempts)
	}
	// Pull verbs work while out.
	var got domain.Todo
	ac.ok("claim_next", map[string]any{"queue": "q"}, &got)
	if got.ID != held.ID || got.State != domain.TodoClaimed {
		t.Fatalf("claim_next while out = %+v", got)
	}
	// GET presence shows what is held.
	ap, err := e.svc.GetPresence(e.ctx, e.admin, "away")
	if err != nil || ap.Presence != "out" {
		t.Fatalf("GetPresence = %+v, %v", ap, err)
	}
}

// wantDigest checks a digest notification.
func wantDigest(t testing.TB, ac *agentClient, pending, queues, reason string) string {
	t.Helper()
	content, meta := channelParams(t, ac.note())
	if meta["kind"] != "digest" || meta["pending"] != pending || meta["queues"] != queues || meta["reason"] != reason {
		t.Fatalf("digest meta = %v, want kind=digest pending=%s queues=%s reason=%s", meta, pending, queues, reason)
	}
	if _, ok := meta["todo_id"]; ok {
		t.Fatalf("a digest carries no todo_id: %v", meta)
	}
	if strings.ContainsAny(content, "\r\n") {
		t.Fatalf("digest content is not one line: %q", content)
	}
	return content
}

func TestShiftStartDigest(t *testing.T) {
	e, ac := outAtEight(t)
	var ids []string
	for i := range 7 {
		ids = append(ids, e.push("morning", "q", "night work "+string(rune('a'+i))).ID)
	}
	ac.roundTrip()
	ac.noNote()

	e.at(tuesday0900)
	if n := e.pass(); n != 1 {
		t.Fatalf("evaluator claimed %d transitions at the shift start, want 1", n)
	}
	content := wantDigest(t, ac, "7", "q", app.ReasonShiftStart)
	for _, id := range ids {
		if td := e.todo(id); strings.Contains(content, td.Title) {
			t.Fatalf("digest content names a title: %q", content)
		}
	}
	e.settle() // the digest's marks are written after its notification
	if n := e.pass(); n != 0 {
		t.Fatalf("a second pass claimed %d transitions", n)
	}
	for _, id := range ids {
		td := e.todo(id)
		if td.RingAttempts != 0 || td.LastRingedAt == nil || !td.LastRingedAt.Equal(tuesday0900) {
			t.Fatalf("after the digest: ring_attempts %d last_ringed_at %v, want 0 and 09:00", td.RingAttempts, fmtT(td.LastRingedAt))
		}
	}
	// No individual ring before the backoff from 09:00.
	e.at(tuesday0900.Add(5*time.Minute - time.Second))
	if n := e.sweep(); n != 0 {
		t.Fatalf("the sweep rang %d todos before 09:05", n)
	}
	ac.roundTrip()
	ac.noNote()
	e.at(tuesday0900.Add(5 * time.Minute))
	if n := e.sweep(); n != doorbell.SweepPerAgent {
		t.Fatalf("the sweep at 09:05 rang %d todos, want %d (per-agent limit)", n, doorbell.SweepPerAgent)
	}
	for range doorbell.SweepPerAgent {
		if _, meta := channelParams(t, ac.note()); meta["todo_id"] == "" {
			t.Fatalf("sweep ring without todo_id: %v", meta)
		}
	}
}

func TestClockInWithNothingWaitingSendsNoDigest(t *testing.T) {
	e, _, ac := clockedOut(t, "idle", "q", "fence")
	ac.ok("clock_in", map[string]any{}, nil)
	e.pass()
	e.settle() // the transition's digest (if any) is decided before the fence exists
	// Fence: a todo pushed now rings; nothing may come before it.
	f := e.push("idle", "fence", "fence")
	_, meta := channelParams(t, ac.note())
	if meta["todo_id"] != f.ID {
		t.Fatalf("first notification after clock_in = %v, want the fence todo's doorbell", meta)
	}
}

func TestDigestQueuesSortedNoTitles(t *testing.T) {
	e, _, ac := clockedOut(t, "multi", "reviews", "lane-m")
	var first domain.Todo
	for i := range 5 {
		td := e.push("multi", "reviews", "secret review title "+string(rune('a'+i)))
		if i == 0 {
			first = td
		}
		e.at(e.clock.Now().Add(time.Minute))
	}
	for i := range 2 {
		e.push("multi", "lane-m", "secret lane title "+string(rune('a'+i)))
	}
	ac.ok("clock_in", map[string]any{}, nil)
	content := wantDigest(t, ac, "7", "lane-m,reviews", app.ReasonClockIn)
	if strings.Contains(content, "secret") {
		t.Fatalf("digest content carries a title: %q", content)
	}
	// It stands alone and names the oldest todo, which may be claimed
	// directly (design: Doorbell message; Digest names the oldest todo).
	want := `digest: 7 pending todos (lane-m 2, reviews 5), oldest waiting 5m is todo ` + first.ID +
		` — take it first with claim {"todo_id":"` + first.ID + `"}, or call claim_next {} (or claim_next {"queue":"<name>"}), complete each todo it gives you, and repeat until it answers not_found`
	if content != want {
		t.Fatalf("digest content\n got %s\nwant %s", content, want)
	}
}

// TestDigestOldestTodoIsClaimable: the digest's meta.oldest_todo_id is the
// todo pushed first, and claim on that id hands it over.
func TestDigestOldestTodoIsClaimable(t *testing.T) {
	e, _, ac := clockedOut(t, "fifo", "q")
	oldest := e.push("fifo", "q", "first")
	e.at(e.clock.Now().Add(time.Second))
	e.push("fifo", "q", "second")
	ac.ok("clock_in", map[string]any{}, nil)
	_, meta := channelParams(t, ac.note())
	if meta["kind"] != "digest" || meta["oldest_todo_id"] != oldest.ID {
		t.Fatalf("digest meta = %v, want kind=digest oldest_todo_id=%s", meta, oldest.ID)
	}
	var got struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	ac.ok("claim", map[string]any{"todo_id": meta["oldest_todo_id"]}, &got)
	if got.ID != oldest.ID || got.State != "claimed" {
		t.Fatalf("claim of oldest_todo_id = %+v, want todo %s claimed", got, oldest.ID)
	}
}

// failingHub is fault injection around the real session hub: every digest
// write fails, as a session that vanished between selection and write.
type failingHub struct{ app.SessionHub }

func (f failingHub) Notify(id string, m domain.ChannelMessage) error {
	if m.Meta["kind"] == "digest" {
		return errors.New("injected: stream write failed")
	}
	return f.SessionHub.Notify(id, m)
}

func TestFailedDigestMarksNothing(t *testing.T) {
	e := newEnv(t)
	v := e.vend("flaky", allScope, "q")
	e.listening(v.Credential)
	e.at(monday0900.Add(11 * time.Hour))
	e.setShift("flaky", workHours)
	td := e.push("flaky", "q", "waits")
	e.svc.SetSessionHub(failingHub{e.srv})
	e.at(tuesday0900)
	if n := e.pass(); n != 1 {
		t.Fatalf("evaluator claimed %d transitions at the shift start, want 1", n)
	}
	e.settle() // the transition's digest, written through the failing hub
	if got := e.todo(td.ID); got.LastRingedAt != nil || got.RingAttempts != 0 {
		t.Fatalf("a failed digest marked the todo: last_ringed_at %v ring_attempts %d", fmtT(got.LastRingedAt), got.RingAttempts)
	}
	if !strings.Contains(e.logs.String(), "digest not delivered") {
		t.Fatalf("the failed digest write was not logged:\n%s", e.logs.String())
	}
}

func TestTodoWithNoSessionIsNotCounted(t *testing.T) {
	e := newEnv(t)
	v := e.vend("nightly", allScope, "q")
	e.at(monday0900.Add(9 * time.Hour)) // Monday 18:00, no session
	e.setShift("nightly", workHours)
	td := e.push("nightly", "q", "for the morning")
	e.at(tuesday0900.Add(-time.Minute))
	e.sweep()
	ac := e.listening(v.Credential)
	e.at(tuesday0900)
	e.pass()
	wantDigest(t, ac, "1", "q", app.ReasonShiftStart)
	e.settle()
	if got := e.todo(td.ID); got.RingAttempts != 0 {
		t.Fatalf("ring_attempts = %d, want 0: no ring was ever sent", got.RingAttempts)
	}
}

func TestRingBudget(t *testing.T) {
	e := newEnv(t)
	v := e.vend("budget", allScope, "q")
	ac := e.listening(v.Credential)
	td := e.push("budget", "q", "ring me")
	channelParams(t, ac.note()) // ring 1: on create
	now := monday0900
	for _, d := range []time.Duration{5 * time.Minute, 20 * time.Minute, time.Hour, 6 * time.Hour} {
		now = now.Add(d)
		e.at(now)
		if n := e.sweep(); n != 1 {
			t.Fatalf("sweep at %s rang %d, want 1", now.Format("15:04"), n)
		}
		channelParams(t, ac.note())
	}
	if got := e.todo(td.ID); got.RingAttempts != domain.MaxRings {
		t.Fatalf("ring_attempts = %d, want %d", got.RingAttempts, domain.MaxRings)
	}
	e.at(now.Add(7 * 24 * time.Hour))
	if n := e.sweep(); n != 0 {
		t.Fatalf("a todo rung %d times was rung again", domain.MaxRings)
	}
	ac.roundTrip()
	ac.noNote()
	var list struct {
		Todos []domain.Todo `json:"todos"`
	}
	ac.ok("list_todos", map[string]any{"state": "pending"}, &list)
	if len(list.Todos) != 1 || list.Todos[0].ID != td.ID {
		t.Fatalf("the todo must stay pending and visible: %+v", list.Todos)
	}
}

func TestReconnectDigest(t *testing.T) {
	e := newEnv(t)
	v := e.vend("returning", allScope, "q")
	// Three todos arrive overnight with no session anywhere.
	for i := range 3 {
		e.push("returning", "q", "overnight "+string(rune('a'+i)))
	}
	e.at(tuesday0900)
	// The agent's first stream ever: reason connect (design: Connect and reconnect digests).
	ac := e.listening(v.Credential)
	wantDigest(t, ac, "3", "q", app.ReasonConnect)
	ac.c.Close()
	e.waitEvent(ac.sessionID(), mcpserver.SessionClosed)
	// Back after the 10-minute gate: reason reconnect.
	e.at(tuesday0900.Add(11 * time.Minute))
	ac = e.listening(v.Credential)
	wantDigest(t, ac, "3", "q", app.ReasonReconnect)
}

func TestReconnectDigestAtMostOncePer10Minutes(t *testing.T) {
	e := newEnv(t)
	v := e.vend("flapping", allScope, "q", "fence")
	e.push("flapping", "q", "waiting")
	digests := 0
	start := e.clock.Now()
	for i := 0; i < 30; i++ { // reconnect every 30 s for 15 minutes
		e.at(start.Add(time.Duration(i) * 30 * time.Second))
		ac := e.listening(v.Credential)
		// Fence: ring a todo on this session; a digest, if any, comes first.
		f := e.push("flapping", "fence", "fence")
		for {
			_, meta := channelParams(t, ac.note())
			if meta["kind"] == "digest" {
				digests++
				continue
			}
			if meta["todo_id"] == f.ID {
				break
			}
		}
		ac.c.Close()
		e.waitEvent(ac.sessionID(), mcpserver.SessionClosed)
	}
	// 15 minutes of reconnects: a digest at 0 and one after 10 minutes.
	if digests != 2 {
		t.Fatalf("%d reconnect digests in 15 minutes of reconnecting every 30 s, want 2", digests)
	}
}
