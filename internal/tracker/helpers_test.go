package tracker_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/events"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/sqlite"
	"github.com/rollcall/rollcall/internal/testkit"
	"github.com/rollcall/rollcall/internal/tracker"
)

// The liveness tests run the real tracker on a real SQLite store, a real
// in-process bus and a clockwork fake clock. Nothing sleeps for
// correctness: deadlines fire when the test advances the clock, and the
// few asynchronous effects (a timer's callback runs on its own goroutine)
// are awaited with a generous bound.

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// lvCfg is the (design: Configuration sources) defaults the tests run with.
var lvCfg = tracker.Config{
	PresenceTimeout: 45 * time.Second, PersistInterval: 60 * time.Second, HeartbeatInterval: 15 * time.Second,
	MismatchAlertAfter: 10 * time.Minute, ShutdownTimeout: 30 * time.Second,
}

type lvEnv struct {
	t      testing.TB
	clock  *clockwork.FakeClock
	store  store.Store
	bus    bus.Bus
	dbPath string
	admin  domain.Person
	svc    *app.Service
}

type envOpt func(*envOptions)

type envOptions struct {
	cfg       tracker.Config
	store     func(*sqlite.Store) store.Store
	realClock bool
	postgres  bool
	wrap      func(store.Store) store.Store // on either store
}

// wrapStore wraps the environment's store, SQLite or PostgreSQL.
func wrapStore(w func(store.Store) store.Store) envOpt { return func(o *envOptions) { o.wrap = w } }

// onPostgres runs the environment on a fresh PostgreSQL database (skipped
// when ROLLCALL_TEST_POSTGRES is unreachable) instead of SQLite.
func onPostgres() envOpt { return func(o *envOptions) { o.postgres = true } }

func withConfig(c tracker.Config) envOpt { return func(o *envOptions) { o.cfg = c } }

func withStore(wrap func(*sqlite.Store) store.Store) envOpt {
	return func(o *envOptions) { o.store = wrap }
}

func quietLog(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(tw{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

type tw struct{ t testing.TB }

func (w tw) Write(p []byte) (int, error) { return os.Stderr.Write(p) } // not t.Log: goroutines may log after the test

// newLvEnv opens a fresh SQLite store and one Service (one instance) on it.
func newLvEnv(t testing.TB, opts ...envOpt) *lvEnv {
	t.Helper()
	o := envOptions{cfg: lvCfg}
	for _, f := range opts {
		f(&o)
	}
	if o.postgres {
		return newPgEnv(t, o)
	}
	st, dbPath := testkit.OpenSQLiteLoose(t)
	var s store.Store = st
	if o.store != nil {
		s = o.store(st)
	}
	if o.wrap != nil {
		s = o.wrap(s)
	}
	e := &lvEnv{t: t, clock: clockwork.NewFakeClockAt(t0), store: s, bus: bus.NewLocal(), dbPath: dbPath}
	e.start(o)
	return e
}

// start builds the first instance and its admin.
func (e *lvEnv) start(o envOptions) {
	e.t.Helper()
	e.svc = e.instance("a", o.cfg, o.realClock)
	e.admin, _ = testkit.BootstrapAdmin(e.t, e.svc)
}

// instance builds another Service (another instance) on the same store, bus
// and clock.
func (e *lvEnv) instance(id string, cfg tracker.Config, realClock ...bool) *app.Service {
	var clock clockwork.Clock = e.clock
	if len(realClock) > 0 && realClock[0] {
		clock = clockwork.NewRealClock()
	}
	return e.newService(id, cfg, clock)
}

// trackers maps each Service the tests built to its tracker.
var trackers sync.Map // *app.Service → *tracker.Tracker

// trk returns the tracker of a Service built by newService.
func trk(svc *app.Service) *tracker.Tracker {
	t, _ := trackers.Load(svc)
	return t.(*tracker.Tracker)
}

// newService wires one instance as app.New does — the event hub, the
// tracker on the hub, the Service on both — keeping the tracker for trk.
// The tracker's presence signal is the Service's: <agent_id>:<cause> on
// bus.ChannelPresence.
func (e *lvEnv) newService(id string, cfg tracker.Config, clock clockwork.Clock) *app.Service {
	log := quietLog(e.t)
	hub := events.New(events.Options{Store: e.store, Bus: e.bus, Clock: clock, Log: log})
	b := e.bus
	tr := tracker.New(tracker.Options{Store: e.store, Bus: b, Events: hub, Clock: clock, Log: log, Instance: id, Config: cfg,
		SignalPresence: func(ctx context.Context, agentID, cause string) {
			_ = b.Publish(ctx, bus.ChannelPresence, agentID+":"+cause)
		}})
	svc := app.New(app.Options{Store: e.store, Bus: b, Clock: clock, Log: log, InstanceID: id, Events: hub, Tracker: tr})
	trackers.Store(svc, tr)
	e.t.Cleanup(func() { _ = tr.Stop(context.Background()); trackers.Delete(svc) })
	return svc
}

// person adds a non-admin person straight into the SQLite file (the store
// port creates only the bootstrap admin).
func (e *lvEnv) person(name string) domain.Person {
	e.t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?_pragma=busy_timeout(10000)")
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	p := domain.Person{ID: uuid.NewString(), Name: name, CreatedAt: t0}
	if _, err := db.ExecContext(e.t.Context(), `INSERT INTO persons (id, name, admin, created_at, updated_at) VALUES (?, ?, 0, ?, ?)`,
		p.ID, name, t0.UnixMicro(), t0.UnixMicro()); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// vend vends an agent owned by the admin and returns its principal as an
// agent credential authenticates it.
func (e *lvEnv) vend(handle string, in ...app.VendInput) domain.Principal {
	e.t.Helper()
	v := app.VendInput{Handle: handle, Queues: []string{"build", "review"}, Verbs: domain.ScopeVerbs}
	if len(in) > 0 {
		v = in[0]
		v.Handle = handle
		if v.Queues == nil {
			v.Queues = []string{"build", "review"}
		}
	}
	res, err := e.svc.Vend(e.t.Context(), e.admin, v)
	if err != nil {
		e.t.Fatalf("Vend %s: %v", handle, err)
	}
	p, err := e.svc.AuthenticateAgent(e.t.Context(), res.Credential)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// beat sends one heartbeat through svc and fails the test on an error.
func (e *lvEnv) beat(svc *app.Service, p domain.Principal, body string) app.Ack {
	e.t.Helper()
	ack, err := svc.Heartbeat(e.t.Context(), p, p.Agent.ID, []byte(body), app.Arrival{})
	if err != nil {
		e.t.Fatalf("Heartbeat(%s, %s): %v", p.Agent.Handle, body, err)
	}
	return ack
}

func (e *lvEnv) agent(id string) domain.Agent {
	e.t.Helper()
	a, err := e.store.GetAgent(e.t.Context(), store.AgentRef{ID: id})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

const online = `{"state":"online"}`

func body(mode string, extra ...string) string {
	s := `{"state":"online"`
	if mode != "" {
		s += `,"billing_mode":"` + mode + `"`
	}
	for _, x := range extra {
		s += "," + x
	}
	return s + "}"
}

// recorder collects the events one person's subscription receives.
type recorder struct {
	t   testing.TB
	sub *events.Subscription
	mu  sync.Mutex
	got []events.Event
	ch  chan events.Event
}

func (e *lvEnv) record(svc *app.Service, owner domain.Person) *recorder {
	sub, err := svc.SubscribeEvents(owner.ID, "", "")
	if err != nil {
		e.t.Fatal(err)
	}
	r := &recorder{t: e.t, sub: sub, ch: make(chan events.Event, 1024)}
	go func() {
		for ev := range sub.C() {
			r.mu.Lock()
			r.got = append(r.got, ev)
			r.mu.Unlock()
			r.ch <- ev
		}
	}()
	e.t.Cleanup(sub.Close)
	return r
}

// next waits for the next event (bounded) and returns its presence data.
func (r *recorder) next() (events.Event, events.PresenceChangedData) {
	r.t.Helper()
	select {
	case ev := <-r.ch:
		var d events.PresenceChangedData
		_ = json.Unmarshal(ev.Data, &d)
		return ev, d
	case <-time.After(testkit.Wait):
		r.t.Fatalf("no event within %s", testkit.Wait)
	}
	panic("unreachable")
}

// none checks that no event is waiting. Callers make sure no timer callback
// can be in flight (no deadline was crossed since the last awaited event).
func (r *recorder) none(what string) {
	r.t.Helper()
	select {
	case ev := <-r.ch:
		r.t.Errorf("%s: unexpected event %s %s", what, ev.Kind, ev.Data)
	default:
	}
}

// expect waits for agent.presence_changed of agent ("" = any) with the pair.
func (r *recorder) expect(agent, state string, mode *string) {
	r.t.Helper()
	ev, d := r.next()
	if ev.Kind != events.KindPresenceChanged || (agent != "" && d.Agent != agent) || d.State != state || !store.SamePtr(d.ReportedBillingMode, mode) {
		r.t.Fatalf("event = %s %s, want agent.presence_changed %s %s mode %v", ev.Kind, ev.Data, agent, state, deref(mode))
	}
}

func deref(p *string) string {
	if p == nil {
		return "<none>"
	}
	return *p
}

func ptr(s string) *string { return &s }

func state(t *testing.T, svc *app.Service, id string) string {
	t.Helper()
	st, ok := trk(svc).LivenessState(id)
	if !ok {
		return "untracked"
	}
	return st
}

// wantState reports an error unless svc's liveness state of agent id is
// want; when says at what point of the test.
func wantState(t *testing.T, svc *app.Service, id, want, when string) {
	t.Helper()
	if st := state(t, svc, id); st != want {
		t.Errorf("%s: state %s, want %s", when, st, want)
	}
}

// waitState waits (bounded) until svc reports the state for the agent: for
// effects of timer callbacks, which run on their own goroutines.
func waitState(t *testing.T, svc *app.Service, id, want string) {
	t.Helper()
	deadline := time.Now().Add(testkit.Wait)
	for state(t, svc, id) != want {
		if time.Now().After(deadline) {
			t.Fatalf("state of %s = %s, want %s within %s", id, state(t, svc, id), want, testkit.Wait)
		}
		time.Sleep(time.Millisecond)
	}
}

func auditOf(t *testing.T, s store.Store, agentID, action string) []domain.AuditEntry {
	t.Helper()
	es, err := s.ListAudit(t.Context(), store.ListAuditParams{AgentID: agentID})
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.AuditEntry
	for _, e := range es {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "<nil>"
	}
	return t.Format(time.RFC3339Nano)
}
