package e2e

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	_ "modernc.org/sqlite"

	"github.com/rollcall/rollcall/internal/pgtest"

	"github.com/rollcall/rollcall/internal/testkit"
	"github.com/rollcall/rollcall/internal/testkit/harness"
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

// freePort is a free loopback address (harness.FreePort).
func freePort(t *testing.T) string {
	t.Helper()
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

func livenessKillRestart(t *testing.T, storeURL string, openDB func() (*sql.DB, error)) {
	addr := freePort(t)
	args := append([]string{"--store", storeURL, "--listen", addr}, livenessArgs...)
	srv := startServer(t, bootstrapEnv, args...)
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
	srv.Kill(t)

	srv2 := startServer(t, bootstrapEnv, args...)
	restarted := time.Now()
	events := subscribeOffline(t, srv2)
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
	out, offline := srv2.Output(), srv2.ChangesLogged("offline")
	for _, h := range []string{"alive-rest", "alive-ws"} {
		if offline[h] > 0 {
			t.Errorf("the restarted server reported %s offline:\n%s", h, out)
		}
		if n := events.offline(h); n > 0 {
			t.Errorf("event stream: %s offline %d times", h, n)
		}
	}
	if n := offline["quitter"]; n != 1 {
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

// offlineEvents counts the offline events per agent of an admin's
// subscription to GET /v1/events.
type offlineEvents struct{ *testkit.Events }

func subscribeOffline(t *testing.T, srv *server) offlineEvents {
	t.Helper()
	return offlineEvents{testkit.Subscribe(t, srv.URL, srv.URL, adminToken)}
}

func (e offlineEvents) offline(h string) int { return e.Count(testkit.Liveness(h, "offline")) }

// TestE2ELivenessHandoverPostgres: two instances on one PostgreSQL database
// (the LISTEN/NOTIFY bus between them). An agent's heartbeats move from A to
// B: A never reports it offline although its own last heartbeat gets older
// than the timeout, B does not announce it online again, and when the agent
// stops exactly one instance reports it offline, once (design: Deadline ownership).
func TestE2ELivenessHandoverPostgres(t *testing.T) {
	a, b := startPair(t, livenessArgs...)
	cred := vend(t, a, "mover", []string{"build"}, allVerbs).Credential
	events := subscribeOffline(t, b)
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
	if n := a.ChangesLogged("offline")["mover"] + b.ChangesLogged("offline")["mover"]; n != 1 {
		t.Errorf("offline reported %d times across the instances, want once\nA:\n%s\nB:\n%s", n, outA, outB)
	}
	if n := a.ChangesLogged("online")["mover"] + b.ChangesLogged("online")["mover"]; n != 1 {
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
