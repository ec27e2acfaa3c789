// Package fault is Rollcall's fault suite (design: Operator event stream): real `rollcall
// serve` processes on a throwaway PostgreSQL cluster that the suite starts
// itself (initdb + pg_ctl from /usr/lib/postgresql/*/bin, its own port and
// temporary directory, removed at the end; the shared PostgreSQL at
// 127.0.0.1:5432 is never used), driven by real clients — gateway
// WebSockets (coder/websocket), REST, and MCP sessions (mcp-go, in this
// process or in a child process that the tests freeze and kill). The faults
// are injected for real: pg_terminate_backend of a listener, the cluster
// stopped and started, SIGSTOP/SIGCONT of a server or a client, load, and a
// skewed clock (ROLLCALL_TEST_CLOCK_OFFSET).
//
// Every "eventually" is a poll bounded by wait; the few "within 2 s" checks
// are the bounds of (design: Held doorbells, Digest on return, Catch-up after a lost
// listener, Deadline ownership), measured from the
// moment the test observed the fault end, never from a sleep.
//
// $ROLLCALL_FAULT_BIN runs the suite against a rollcall binary built
// elsewhere (e.g. from another commit) instead of building this tree's.
//
// Without the PostgreSQL server binaries the suite skips, unless
// ROLLCALL_REQUIRE_POSTGRES=1 (scripts/test.sh sets it), which fails it.
package fault

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/testkit"
)

// wait bounds every "eventually": reaching it fails the test (it is not a
// timing assertion).
const wait = testkit.Wait

// catchUp is the bound (design: Catch-up after a lost listener) for an instance to catch up after its
// listener returned, and for cross-instance liveness to agree.
const catchUp = 2 * time.Second

const adminToken = "rcp_fault-admin-token-0123456789abcdef0123456789"

var binPath string

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // this binary re-executed as a client process
		os.Exit(childMain())
	}
	remove := func() {}
	if binPath = os.Getenv("ROLLCALL_FAULT_BIN"); binPath == "" { // else a binary built elsewhere (e.g. from another commit)
		var err error
		if binPath, remove, err = testkit.BuildRollcall(raceEnabled); err != nil {
			fmt.Fprintln(os.Stderr, "fault:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	sharedMu.Lock()
	if shared != nil {
		shared.destroy()
	}
	sharedMu.Unlock()
	remove()
	os.Exit(code)
}

// ---- the throwaway PostgreSQL cluster ----

// cluster is one throwaway PostgreSQL cluster (testkit.Cluster) with a
// connection of the superuser for the tests' queries.
type cluster struct {
	*testkit.Cluster
	db *sql.DB // the superuser postgres on database postgres
}

var (
	sharedMu sync.Mutex
	shared   *cluster
)

// sharedCluster returns the package's cluster, started on first use and
// removed after the last test. Tests that stop the database start their own
// with newCluster instead.
func sharedCluster(t *testing.T) *cluster {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		c, err := startCluster()
		if err != nil {
			noPostgres(t, err)
		}
		shared = c
	}
	return shared
}

// newCluster starts a cluster of the test's own, removed at cleanup.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	c, err := startCluster()
	if err != nil {
		noPostgres(t, err)
	}
	t.Cleanup(c.destroy)
	return c
}

func noPostgres(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("ROLLCALL_REQUIRE_POSTGRES") == "1" {
		t.Fatalf("fault suite: %v", err)
	}
	t.Skipf("fault suite: %v (set ROLLCALL_REQUIRE_POSTGRES=1 to fail instead)", err)
}

func startCluster() (*cluster, error) {
	tc, err := testkit.StartCluster(300)
	if err != nil {
		return nil, err
	}
	c := &cluster{Cluster: tc}
	if c.db, err = sql.Open("pgx", c.URL("postgres", "postgres")); err != nil {
		c.destroy()
		return nil, err
	}
	// Each server logs in as its own role so the tests can tell its
	// connections apart (and refuse its logins: see holdListenerDown).
	for _, role := range []string{"rollcall_a", "rollcall_b", "rollcall_c"} {
		if _, err := c.db.Exec("CREATE ROLE " + role + " SUPERUSER LOGIN"); err != nil {
			c.destroy()
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) destroy() {
	if c.db != nil {
		c.db.Close()
	}
	c.Destroy()
}

// newDatabase creates an empty database for one test on the cluster and
// returns its name (dropped at cleanup while the cluster still runs).
func (c *cluster) newDatabase(t *testing.T) string {
	t.Helper()
	return pgtest.CreateDatabase(t, c.URL("postgres", "postgres"))
}

// listeners returns the backend pids of role's bus listener connections on
// db: application_name "rollcall bus listener" (or, on servers that do not
// name it, the one connection whose last statement is LISTEN).
func (c *cluster) listeners(t *testing.T, role, db string) []int {
	t.Helper()
	pids, _ := c.listenersErr(role, db) // the cluster may be restarting; callers poll
	return pids
}

func (c *cluster) listenersErr(role, db string) ([]int, error) {
	var list string // "pid,pid,…"
	if err := c.db.QueryRow(`SELECT coalesce(string_agg(pid::text, ','), '') FROM pg_stat_activity WHERE usename = $1 AND datname = $2
		AND (application_name = 'rollcall bus listener' OR query ILIKE 'listen %')`, role, db).Scan(&list); err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' }) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// terminateListeners kills role's LISTEN connections on db and returns how
// many it killed.
func (c *cluster) terminateListeners(t *testing.T, role, db string) int {
	t.Helper()
	n := 0
	for _, pid := range c.listeners(t, role, db) {
		var ok bool
		if err := c.db.QueryRow(`SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err == nil && ok {
			n++
		}
	}
	return n
}

// setLogin allows or refuses new logins of role (existing connections stay).
func (c *cluster) setLogin(t *testing.T, role string, allowed bool) {
	t.Helper()
	opt := "LOGIN"
	if !allowed {
		opt = "NOLOGIN"
	}
	if _, err := c.db.Exec("ALTER ROLE " + role + " " + opt); err != nil {
		t.Fatalf("ALTER ROLE %s %s: %v", role, opt, err)
	}
}

// ---- rollcall serve processes ----

// server is one running `rollcall serve` process on a database of a
// cluster, logged in as its own role.
type server struct {
	*testkit.Server
	Role string // its PostgreSQL role
	DB   string // its database
}

// baseArgs are the timings every scenario uses unless it says otherwise:
// interval 1 s and timeout 3 s as in the issue, a fast evaluator, and no
// doorbell sweep within a test's lifetime (a signal the sweep would deliver
// minutes later counts as lost).
var baseArgs = []string{
	"--sync.heartbeat_interval", "1s", "--agent.presence_timeout", "3s",
	"--presence.evaluate_interval", "200ms", "--doorbell.sweep_interval", "1h",
	"--shutdown.total_timeout", "5s",
}

// startServer runs `rollcall serve` on c's database db as role with
// baseArgs, then args; env adds to the environment. It is stopped with
// SIGTERM (SIGCONT first, should the test have stopped it) at cleanup.
func startServer(t *testing.T, name string, c *cluster, role, db string, env []string, args ...string) *server {
	t.Helper()
	argv := append([]string{"--store", c.URL(role, db)}, baseArgs...)
	env = append([]string{"ROLLCALL_BOOTSTRAP_TOKEN=" + adminToken}, env...)
	return &server{Server: testkit.StartServer(t, binPath, name, env, append(argv, args...)...), Role: role, DB: db}
}

// signal sends sig to srv's process.
func (s *server) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	s.Signal(t, sig)
}

// offlineLogged counts the offline changes the server logged, per handle.
func (s *server) offlineLogged() map[string]int { return s.ChangesLogged("offline") }

// ---- REST ----

// do sends a JSON request with token and decodes a JSON answer into into
// (when not nil); it returns the status, or 0 when the request failed.
func do(srv *server, token, method, path string, body, into any) int {
	code, _ := testkit.REST(srv.URL, token, method, path, body, into)
	return code
}

var allVerbs = testkit.WorkVerbs

type vended struct {
	Handle     string
	ID         string
	Credential string
}

// vend creates an agent over REST (POST /v1/agents) with one queue, "q".
func vend(t *testing.T, srv *server, handle string) vended {
	t.Helper()
	v, err := tryVend(srv, handle)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tryVend is vend for other goroutines than the test's.
func tryVend(srv *server, handle string) (vended, error) {
	var res struct {
		Agent struct {
			ID     string `json:"id"`
			Handle string `json:"handle"`
		} `json:"agent"`
		Credential string `json:"credential"`
	}
	if code := do(srv, adminToken, "POST", "/v1/agents", map[string]any{"handle": handle, "queues": []string{"q"}, "verbs": allVerbs}, &res); code != 201 && code != 200 {
		return vended{}, fmt.Errorf("vend %s: HTTP %d", handle, code)
	}
	return vended{Handle: handle, ID: res.Agent.ID, Credential: res.Credential}, nil
}

// push pushes a todo to agent's queue "q" and returns its id, retrying
// while the server answers errors (a database that is coming back) up to
// wait.
func push(t *testing.T, srv *server, agent, title string) string {
	t.Helper()
	return pushTo(t, srv, "/v1/agents/"+agent+"/todos", title)
}

// pushTo is push to the todos route path (an agent's or a pool's).
func pushTo(t *testing.T, srv *server, path, title string) string {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		var td struct {
			ID string `json:"id"`
		}
		code := do(srv, adminToken, "POST", path, map[string]string{"queue": "q", "title": title}, &td)
		if code == 201 && td.ID != "" {
			return td.ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("push to %s via %s: HTTP %d", path, srv.Name, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// setPresence sets agent's presence override ("in" or "out") through srv,
// retrying while the server answers errors, up to wait.
func setPresence(t *testing.T, srv *server, agent, presence string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		code := do(srv, adminToken, "PUT", "/v1/agents/"+agent+"/presence", map[string]any{"presence": presence}, nil)
		if code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("PUT presence %s of %s via %s: HTTP %d", presence, agent, srv.Name, code)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// state returns the agent's liveness state on srv (GET status), "" when
// the request failed.
func state(srv *server, agent string) string {
	var st struct {
		State string `json:"state"`
	}
	if do(srv, adminToken, "GET", "/v1/agents/"+agent+"/status", nil, &st) != 200 {
		return ""
	}
	return st.State
}

// ready returns GET /readyz's status (0 when the request failed).
func ready(srv *server) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(srv.URL + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// restHeartbeat sends one REST heartbeat (state online): the status, or 0
// and the error when the request failed.
func restHeartbeat(srv *server, a vended) (int, error) {
	return testkit.REST(srv.URL, a.Credential, "POST", "/v1/agents/"+a.Handle+"/heartbeat", map[string]any{"state": "online", "billing_mode": "api"}, nil)
}

// waitFor polls ok until it holds and returns when it did, failing the
// test after wait.
func waitFor(t *testing.T, what string, ok func() bool) time.Time {
	t.Helper()
	return testkit.Eventually(t, what, wait, ok)
}

// waitProgress waits until check reports done, failing only when its
// progress count has not grown for `wait` (or after 10 × wait in all): a
// bound on stalls, not on how fast a busy machine answers.
func waitProgress(t *testing.T, what string, check func() (done bool, progress int64)) {
	t.Helper()
	start := time.Now()
	last, lastAt := int64(-1), start
	for {
		done, n := check()
		if done {
			return
		}
		now := time.Now()
		if n != last {
			last, lastAt = n, now
		}
		if now.Sub(lastAt) > wait || now.Sub(start) > 10*wait {
			t.Fatalf("%s: not reached; progress %d, last grew %s ago, %s in all", what, n, now.Sub(lastAt).Round(time.Millisecond), now.Sub(start).Round(time.Millisecond))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- the operator event stream ----

type event = testkit.Event

// events records every event of one GET /v1/events subscription on srv.
type events struct {
	*testkit.Events
	srv *server
}

// subscribe opens GET /v1/events on srv as the admin; the subscription
// reconnects with Last-Event-ID should the stream end.
func subscribe(t *testing.T, srv *server) *events {
	t.Helper()
	return &events{Events: testkit.Subscribe(t, srv.Name, srv.URL, adminToken), srv: srv}
}

var (
	transition = testkit.Transition
	liveness   = testkit.Liveness
)

func anyOffline(ev event) bool {
	return ev.Kind == "agent.presence_changed" && ev.Data.State == "offline"
}

// ---- MCP sessions (mcp-go) ----

// session is one mcp-go client session with its GET stream open, in this
// process.
type session struct{ *testkit.Session }

func openSession(t *testing.T, srv *server, a vended) *session {
	t.Helper()
	return &session{testkit.OpenSession(t, srv.URL+"/mcp", a.Credential, "fault", nil)}
}

// openClaimingSession is a session whose client acts like a working agent:
// it claims every todo it is rung for (in the background).
func openClaimingSession(t *testing.T, srv *server, a vended) *session {
	t.Helper()
	return &session{testkit.OpenSession(t, srv.URL+"/mcp", a.Credential, "fault", func(s *testkit.Session, b testkit.Bell) {
		if c := s.Client(); c != nil && b.TodoID() != "" {
			go func() {
				cctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"todo_id": b.TodoID()}}})
			}()
		}
	})}
}

// bellWithin waits up to d for the doorbell of todoID.
func (s *session) bellWithin(d time.Duration, todoID string) (testkit.Bell, bool) {
	return s.Bell(todoID, d)
}

// missing waits up to d in all for the doorbells of ids and returns how
// many did not come.
func (s *session) missing(d time.Duration, ids []string) int {
	deadline := time.Now().Add(d)
	n := 0
	for _, id := range ids {
		if _, ok := s.Bell(id, time.Until(deadline)); !ok {
			n++
		}
	}
	return n
}

// ---- an MCP client in a child process (to freeze and kill) ----

const childEnv = "ROLLCALL_FAULT_CHILD"

// childLeaseEnv, when set (seconds), makes the child a working agent: it
// claims every todo it is rung for with that lease.
const childLeaseEnv = "ROLLCALL_FAULT_CHILD_LEASE"

// childMain is this test binary re-executed as an MCP client: it opens one
// session on $ROLLCALL_FAULT_URL with $ROLLCALL_FAULT_TOKEN, prints "ready"
// and then "doorbell <todo_id>" per channel notification, and with
// $ROLLCALL_FAULT_CHILD_LEASE "claimed <todo_id>" per todo it claimed,
// until killed.
func childMain() int {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	var mu sync.Mutex
	rung := make(chan string, 100)
	c, _, err := testkit.DialMCP(ctx, os.Getenv("ROLLCALL_FAULT_URL"), os.Getenv("ROLLCALL_FAULT_TOKEN"), "fault", func(b testkit.Bell) {
		mu.Lock()
		fmt.Printf("doorbell %s\n", b.TodoID())
		mu.Unlock()
		if b.TodoID() != "" {
			select {
			case rung <- b.TodoID():
			default:
			}
		}
	})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	mu.Lock()
	fmt.Println("ready")
	mu.Unlock()
	lease, _ := strconv.Atoi(os.Getenv(childLeaseEnv))
	for id := range rung {
		if lease <= 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(context.Background(), wait)
		r, err := c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "claim", Arguments: map[string]any{"todo_id": id, "lease_seconds": lease}}})
		cancel()
		if err == nil && !r.IsError {
			mu.Lock()
			fmt.Printf("claimed %s\n", id)
			mu.Unlock()
		}
	}
	return 0
}

// child is an MCP client process.
type child struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	seen    []string // todo ids it printed
	claimed []string // todo ids it claimed (startClaimingChild)
	done    chan struct{}
}

// startClaimingChild is a child that claims every todo it is rung for with
// a lease of lease seconds.
func startClaimingChild(t *testing.T, srv *server, a vended, lease int) *child {
	t.Helper()
	return startChild(t, srv, a, childLeaseEnv+"="+strconv.Itoa(lease))
}

// startChild starts an MCP client process for a on srv; env adds to its
// environment.
func startChild(t *testing.T, srv *server, a vended, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"=mcp", "ROLLCALL_FAULT_URL="+srv.URL+"/mcp", "ROLLCALL_FAULT_TOKEN="+a.Credential), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	readyc := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "ready":
				close(readyc)
			case strings.HasPrefix(line, "doorbell "):
				c.mu.Lock()
				c.seen = append(c.seen, strings.TrimPrefix(line, "doorbell "))
				c.mu.Unlock()
			case strings.HasPrefix(line, "claimed "):
				c.mu.Lock()
				c.claimed = append(c.claimed, strings.TrimPrefix(line, "claimed "))
				c.mu.Unlock()
			}
		}
	}()
	go func() { cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	select {
	case <-readyc:
	case <-c.done:
		t.Fatalf("MCP client process exited: %s", stderr.String())
	case <-time.After(wait):
		t.Fatal("MCP client process not ready")
	}
	return c
}

func (c *child) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to the client: %v", sig, err)
	}
}

// ---- gateway agents ----

// gatewayStats counts what the gateway clients saw.
type gatewayStats struct {
	closes4009 atomic.Int64
	closes     atomic.Int64 // every other close or error (reconnected)
	acks       atomic.Int64
	mu         sync.Mutex
	lastClose  string
}

// unexpected is every close of the connection the agent saw, 4009 or
// another (a close code, a reset, a failed dial), and the last one's text;
// 0 and "" when the connection stayed up for the whole run.
func (st *gatewayStats) unexpected() (int64, string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.closes4009.Load() + st.closes.Load(), st.lastClose
}

// gatewayAgent keeps one gateway connection for a, sending a heartbeat
// (state online, billing mode api: the first one is an audited report)
// every period, until ctx ends; it reconnects after any close, counting
// 4009 closes apart. The end of ctx is not a close.
func gatewayAgent(ctx context.Context, srv *server, a vended, period time.Duration, st *gatewayStats) {
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/gateway"
	for ctx.Err() == nil {
		err := gatewayOnce(ctx, wsURL, a.Credential, period, st)
		if ctx.Err() != nil {
			return
		}
		st.mu.Lock()
		if websocket.CloseStatus(err) == 4009 {
			st.closes4009.Add(1)
		} else {
			st.closes.Add(1)
		}
		st.lastClose = fmt.Sprintf("close status %d: %v", websocket.CloseStatus(err), err)
		st.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func gatewayOnce(ctx context.Context, wsURL, cred string, period time.Duration, st *gatewayStats) error {
	dctx, cancel := context.WithTimeout(ctx, wait)
	c, _, err := websocket.Dial(dctx, wsURL, nil)
	cancel()
	if err != nil {
		return err
	}
	defer c.CloseNow()
	if _, _, err := c.Read(ctx); err != nil { // hello
		return err
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+cred+`"}}`)); err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	readErr := make(chan error, 1)
	go func() { // ready, acks, errors; a close ends the connection
		defer stop()
		for {
			_, b, err := c.Read(rctx)
			if err != nil {
				readErr <- err
				return
			}
			if strings.Contains(string(b), `"heartbeat_ack"`) {
				st.acks.Add(1)
			}
		}
	}()
	for rctx.Err() == nil {
		if err := c.Write(rctx, websocket.MessageText, []byte(`{"op":"heartbeat","d":{"agent":{"state":"online","billing_mode":"api"}}}`)); err != nil {
			break
		}
		select {
		case <-rctx.Done():
		case <-time.After(period):
		}
	}
	select {
	case err := <-readErr:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(wait):
		return errors.New("gateway: write failed and the read did not end")
	}
}
