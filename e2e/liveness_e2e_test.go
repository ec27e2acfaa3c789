package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	_ "modernc.org/sqlite"

	"github.com/rollcall/rollcall/internal/pgtest"
)

// The start rule (design: Start rule), end to end with the real binary: after a kill -9 and a
// restart on the same store, agents that keep heartbeating (over REST and
// over the gateway) are never reported offline, and an agent that stopped
// goes offline after the timeout, once (no ghosts); agents that stop later
// go offline after the timeout too. The timings are shortened by
// configuration (interval 1 s, timeout 5 s, persist interval 1 s); the
// restart must take less than timeout + persist interval, or the start rule
// rightly finds every stored heartbeat too old.

const e2eTimeout = 5 * time.Second

var livenessArgs = []string{
	"--sync.heartbeat_interval", "1s", "--agent.presence_timeout", "5s",
	"--agent.heartbeat_persist_interval", "1s", "--shutdown.total_timeout", "5s",
}

func TestE2ELivenessKillRestartSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollcall.db")
	livenessKillRestart(t, "sqlite:"+path, func() (*sql.DB, error) {
		return sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	})
}

func TestE2ELivenessKillRestartPostgres(t *testing.T) {
	u := pgtest.FreshDatabase(t)
	livenessKillRestart(t, u, func() (*sql.DB, error) { return sql.Open("pgx", u) })
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func livenessKillRestart(t *testing.T, storeURL string, openDB func() (*sql.DB, error)) {
	addr := freePort(t)
	args := append([]string{"--store", storeURL, "--listen", addr}, livenessArgs...)
	env := []string{"ROLLCALL_BOOTSTRAP_TOKEN=" + adminToken}
	srv := startServer(t, env, args...)
	agents := map[string]string{} // handle → credential
	for _, h := range []string{"alive-rest", "alive-ws", "quitter"} {
		agents[h] = vend(t, srv, h, []string{"build"}, allVerbs).Credential
	}
	base := srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quitCtx, quit := context.WithCancel(ctx)
	aliveCtx, stopAlive := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { restHeartbeats(aliveCtx, base, "alive-rest", agents["alive-rest"]) })
	wg.Go(func() { gatewayHeartbeats(aliveCtx, base, agents["alive-ws"]) })
	wg.Go(func() { restHeartbeats(quitCtx, base, "quitter", agents["quitter"]) })
	defer wg.Wait()
	defer cancel()

	// Wait until the flush loop stored all three online, then stop the
	// quitter and kill the server without any shutdown.
	db, err := openDB()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	waitFor(t, "all three stored online", func() bool {
		st := storedStates(t, db)
		return st["alive-rest"] == "online" && st["alive-ws"] == "online" && st["quitter"] == "online"
	})
	quit()
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-srv.done

	srv2 := startServer(t, env, args...)
	restarted := time.Now()
	events := subscribeEvents(t, srv2.URL)
	// The quitter goes offline after the timeout (or at once, if the restart
	// took longer than timeout + persist interval); the others stay online.
	waitFor(t, "quitter offline after the restart", func() bool { return agentState(t, srv2, "quitter") == "offline" })
	for time.Since(restarted) < e2eTimeout+2*time.Second { // past the start grace (start + timeout)
		for _, h := range []string{"alive-rest", "alive-ws"} {
			if st := agentState(t, srv2, h); st == "offline" {
				t.Fatalf("%s reported %s after the restart although it kept heartbeating", h, st)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := srv2.Output()
	for _, h := range []string{"alive-rest", "alive-ws"} {
		if offlineLogged(out, h) > 0 {
			t.Errorf("the restarted server reported %s offline:\n%s", h, out)
		}
		if n := events.offline(h); n > 0 {
			t.Errorf("event stream: %s offline %d times", h, n)
		}
	}
	if n := offlineLogged(out, "quitter"); n != 1 {
		t.Errorf("quitter reported offline %d times, want once", n)
	}
	if st := storedStates(t, db); st["alive-rest"] != "online" || st["alive-ws"] != "online" {
		t.Errorf("stored states after the restart: %v", st)
	}

	// The survivors stop: each goes offline after the timeout, once.
	stopAlive()
	waitFor(t, "both offline after they stopped", func() bool {
		return events.offline("alive-rest") == 1 && events.offline("alive-ws") == 1
	})
	waitFor(t, "the offline state stored", func() bool {
		st := storedStates(t, db)
		return st["alive-rest"] == "offline" && st["alive-ws"] == "offline" && st["quitter"] == "offline"
	})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, wait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func storedStates(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query(`SELECT handle, state FROM agents`)
	if err != nil {
		return map[string]string{} // the server may be migrating or locked; retry
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var h, s string
		if rows.Scan(&h, &s) == nil {
			out[h] = s
		}
	}
	return out
}

func agentState(t *testing.T, srv *server, handle string) string {
	t.Helper()
	var st struct {
		State string `json:"state"`
	}
	if code := restGet(t, srv, "/v1/agents/"+handle+"/status", &st); code != 200 {
		t.Fatalf("status of %s: %d", handle, code)
	}
	return st.State
}

var offlineLineRE = regexp.MustCompile(`msg="agent liveness changed" agent=(\S+) agent_id=\S+ state=offline`)

func offlineLogged(out, handle string) int {
	n := 0
	for _, m := range offlineLineRE.FindAllStringSubmatch(out, -1) {
		if m[1] == handle {
			n++
		}
	}
	return n
}

// restHeartbeats sends a heartbeat every 300 ms until ctx ends, through
// restarts (errors are retried).
func restHeartbeats(ctx context.Context, base, handle, cred string) {
	c := &http.Client{Timeout: 2 * time.Second}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/agents/"+handle+"/heartbeat", strings.NewReader(`{"state":"online","billing_mode":"api"}`))
		req.Header.Set("Authorization", "Bearer "+cred)
		req.Header.Set("Content-Type", "application/json")
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// gatewayHeartbeats keeps a gateway connection with heartbeats every 300 ms,
// reconnecting after any close (4013 at shutdown, a dead server).
func gatewayHeartbeats(ctx context.Context, base, cred string) {
	wsURL := "ws" + strings.TrimPrefix(base, "http") + "/v1/gateway"
	for ctx.Err() == nil {
		func() {
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			c, _, err := websocket.Dial(dctx, wsURL, nil)
			cancel()
			if err != nil {
				return
			}
			defer c.CloseNow()
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			if _, _, err := c.Read(rctx); err != nil { // hello
				return
			}
			if c.Write(rctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+cred+`"}}`)) != nil {
				return
			}
			go func() { // drain ready, acks and errors; a close ends the loop below
				defer stop()
				for {
					if _, _, err := c.Read(rctx); err != nil {
						return
					}
				}
			}()
			for rctx.Err() == nil {
				if c.Write(rctx, websocket.MessageText, []byte(`{"op":"heartbeat","d":{"agent":{"state":"online"}}}`)) != nil {
					return
				}
				select {
				case <-rctx.Done():
				case <-time.After(300 * time.Millisecond):
				}
			}
		}()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// eventLog is an SSE subscription of the admin that counts offline events
// per agent.
type eventLog struct {
	mu      sync.Mutex
	offline map[string]int
	lines   []string
}

func (l *eventLog) offlineOf(h string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.offline[h]
}

func subscribeEvents(t *testing.T, base string) *eventLogView {
	t.Helper()
	l := &eventLog{offline: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/events: %v %v", err, resp)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			l.mu.Lock()
			l.lines = append(l.lines, line)
			if m := regexp.MustCompile(`"agent":"([^"]+)","state":"offline"`).FindStringSubmatch(line); m != nil {
				l.offline[m[1]]++
			}
			l.mu.Unlock()
		}
	}()
	return &eventLogView{l}
}

type eventLogView struct{ l *eventLog }

func (v *eventLogView) offline(h string) int { return v.l.offlineOf(h) }

var livenessLineRE = regexp.MustCompile(`msg="agent liveness changed" agent=(\S+) agent_id=\S+ state=(\S+)`)

// changesLogged counts the liveness changes an instance published for handle.
func changesLogged(out, handle, state string) int {
	n := 0
	for _, m := range livenessLineRE.FindAllStringSubmatch(out, -1) {
		if m[1] == handle && m[2] == state {
			n++
		}
	}
	return n
}

// TestE2ELivenessHandoverPostgres: two instances on one PostgreSQL database
// (the LISTEN/NOTIFY bus between them). An agent's heartbeats move from A to
// B: A never reports it offline although its own last heartbeat gets older
// than the timeout, B does not announce it online again, and when the agent
// stops exactly one instance reports it offline, once (design: Deadline ownership).
func TestE2ELivenessHandoverPostgres(t *testing.T) {
	a, b := startPair(t, livenessArgs...)
	cred := vend(t, a, "mover", []string{"build"}, allVerbs).Credential
	events := subscribeEvents(t, b.URL)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	onA, stopA := context.WithCancel(ctx)
	wg.Go(func() { restHeartbeats(onA, a.URL, "mover", cred) })
	waitFor(t, "online on A", func() bool { return agentState(t, a, "mover") == "online" })
	time.Sleep(2 * time.Second)
	stopA() // the load balancer moves the agent to B
	movedAt := time.Now()
	onB, stopB := context.WithCancel(ctx)
	wg.Go(func() { restHeartbeats(onB, b.URL, "mover", cred) })
	for time.Since(movedAt) < 2*e2eTimeout { // well past A's own deadline
		if st := agentState(t, a, "mover"); st == "offline" {
			t.Fatalf("A reports the agent %s while it heartbeats on B", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopB()
	waitFor(t, "offline after the agent stopped", func() bool { return events.offline("mover") >= 1 })
	time.Sleep(e2eTimeout) // room for a duplicate to show up
	outA, outB := a.Output(), b.Output()
	if n := changesLogged(outA, "mover", "offline") + changesLogged(outB, "mover", "offline"); n != 1 {
		t.Errorf("offline reported %d times across the instances, want once\nA:\n%s\nB:\n%s", n, outA, outB)
	}
	if n := changesLogged(outA, "mover", "online") + changesLogged(outB, "mover", "online"); n != 1 {
		t.Errorf("online reported %d times across the instances, want once", n)
	}
	if n := events.offline("mover"); n != 1 {
		t.Errorf("event stream: offline %d times, want once", n)
	}
	for _, srv := range []*server{a, b} {
		if st := agentState(t, srv, "mover"); st != "offline" {
			t.Errorf("%s reports %s after the agent stopped", srv.URL, st)
		}
	}
}
