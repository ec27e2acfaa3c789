package e2e

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/testkit"
)

// TestE2EFrozenTypeScriptClientLosesItsDoorbellsByPing (design: Session
// liveness by ping): two TypeScript SDK clients of one agent, both
// answering the server's pings; one is stopped with SIGSTOP. Every doorbell
// pushed afterwards reaches the running one — those rung on the stopped one
// are handed over once a ping goes unanswered (ping_interval 1 s +
// ping_timeout 5 s: the first pushes come before the stall), long before
// doorbell.failover_after (10 min here) — and the stopped one answers
// again after SIGCONT.
func TestE2EFrozenTypeScriptClientLosesItsDoorbellsByPing(t *testing.T) {
	srv := startSQLite(t, "--log.level", "debug", "--mcp.ping_interval", "1s", "--mcp.ping_timeout", "5s",
		"--doorbell.failover_after", "10m")
	v := vend(t, srv, "e2e-ping", []string{"reviews"}, allVerbs)
	live, liveReady := startTSClient(t, v.MCPURL, v.Credential)
	frozen, frozenReady := startTSClient(t, v.MCPURL, v.Credential)
	for _, id := range []string{liveReady.Session, frozenReady.Session} {
		testkit.Eventually(t, "session "+id+" answers a ping", wait, func() bool {
			return strings.Contains(srv.Output(), `msg="mcp session answered its first ping: it is judged by pings from now on" session=`+id)
		})
	}
	if err := frozen.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { frozen.cmd.Process.Signal(syscall.SIGCONT) })
	stopped := time.Now()

	var todos []string
	for i := range 4 {
		todos = append(todos, pushTodo(t, srv, "e2e-ping", "reviews", "review "+string(rune('a'+i))))
	}
	testkit.Eventually(t, "every doorbell on the running client", wait, func() bool {
		var got []string
		for _, n := range live.channelNotifications() {
			got = append(got, n.Params.Meta["todo_id"])
		}
		return !slices.ContainsFunc(todos, func(id string) bool { return !slices.Contains(got, id) })
	})
	t.Logf("all %d doorbells on the running client %v after SIGSTOP", len(todos), time.Since(stopped).Round(time.Millisecond))
	out := srv.Output()
	if !strings.Contains(out, `msg="mcp session stalled: its client left a ping unanswered; its unread doorbells go to another session" session=`+frozenReady.Session) {
		t.Fatal("the server did not log the stopped session as stalled")
	}
	if !strings.Contains(out, "from="+frozenReady.Session) {
		t.Fatal("no doorbell was rung on the stopped client and handed on; the test proves nothing")
	}

	if err := frozen.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the resumed client answers pings again", wait, func() bool {
		return strings.Contains(srv.Output(), `msg="mcp session answers pings again" session=`+frozenReady.Session)
	})
}
