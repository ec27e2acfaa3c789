package fault

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/testkit"
)

// reapEvery is app.ReapInterval: how often each instance returns expired
// leases, so a lease comes back at most this long after it ended.
const reapEvery = time.Second

// stampSlack bounds how far a time a server stamped may be from the
// database's clock read around the request (design: Database clock).
const stampSlack = time.Second

// (h) Leases on the database's clock: instance B's wall clock is 25 s
// ahead of (or behind) A's (ROLLCALL_TEST_CLOCK_OFFSET, test-only). B
// stamps created_at and lease_expires_at on the database's clock; a lease
// claimed on A is not reaped early by B and completes on A and on B near
// its end; a lease claimed on B comes back (claimable on A) once its length
// has passed on the database's clock, never before it, not 25 s later
// (design: Database clock). Before, B stamped and compared with its own
// wall clock: a 40 s lease claimed on A was reaped by B (25 s ahead) within
// 20 s.
func TestFaultLeaseClockOffset(t *testing.T) { eachOffset(t, leaseClockOffset, "25s", "-25s") }

func leaseClockOffset(t *testing.T, off string) {
	const lease = 8 * time.Second // more than one reaper pass of B
	c := sharedCluster(t)
	a, b, db := startPair(t, c, []string{"ROLLCALL_TEST_CLOCK_OFFSET=" + off})
	tdb := c.openDatabase(t, db)
	ag := vend(t, a, "leaser")
	sA := openSession(t, a, ag)
	sB := openSession(t, b, ag)

	// The precondition: B stamps times on the database's clock.
	stampedOnDBClock(t, c, b, ag.Handle)
	held := pushTodo(t, c, a, ag.Handle, "held on A")
	heldB := pushTodo(t, c, b, ag.Handle, "held on A, completed on B")
	short := pushTodo(t, c, b, ag.Handle, "short lease on B")

	claimedAt := dbNow(t, c)
	claimChecked(t, c, tdb, sA, held, lease)
	claimChecked(t, c, tdb, sA, heldB, lease)
	shortEnd := claimChecked(t, c, tdb, sB, short, lease) // the precondition again: B's lease end

	// Until 2 s before the leases taken on A end, every lease is held
	// (B's reaper ran at least once meanwhile), then both complete.
	for dbNow(t, c).Before(claimedAt.Add(lease - 2*time.Second)) {
		for _, id := range []string{held, heldB, short} {
			if st, _ := todoState(t, tdb, id); st != "claimed" {
				t.Fatalf("todo %s is %s %s after its %s lease was claimed (B's clock %s): reaped early", id, st, dbNow(t, c).Sub(claimedAt).Round(time.Millisecond), lease, off)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := callTool(t, sA, "complete", map[string]any{"todo_id": held}); r.IsError {
		t.Fatalf("complete on A %s into a %s lease claimed on A: %s", dbNow(t, c).Sub(claimedAt).Round(time.Millisecond), lease, text(r))
	}
	if r := callTool(t, sB, "complete", map[string]any{"todo_id": heldB}); r.IsError {
		t.Fatalf("complete on B (clock %s) %s into a %s lease claimed on A: %s", off, dbNow(t, c).Sub(claimedAt).Round(time.Millisecond), lease, text(r))
	}

	// The lease taken on B: held until its end, back within one reaper
	// pass after it, on the database's clock.
	var backAt time.Time
	for {
		st, now := todoState(t, tdb, short)
		if st != "claimed" {
			if now.Before(shortEnd.Add(-stampSlack / 2)) {
				t.Fatalf("the %s lease taken on B (clock %s) came back %s before its end", lease, off, shortEnd.Sub(now).Round(time.Millisecond))
			}
			backAt = now
			break
		}
		if now.After(shortEnd.Add(reapEvery + 3*time.Second)) {
			t.Fatalf("the %s lease taken on B (clock %s) is still held %s after its end (reaper every %s)", lease, off, now.Sub(shortEnd).Round(time.Millisecond), reapEvery)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("B at %s: the %s lease taken on B came back %s after it was claimed (%s after its end)", off, lease,
		backAt.Sub(claimedAt).Round(100*time.Millisecond), backAt.Sub(shortEnd).Round(100*time.Millisecond))
	if r := callTool(t, sA, "claim", map[string]any{"todo_id": short, "lease_seconds": 60}); r.IsError {
		t.Fatalf("claim on A of the todo back from B's lease: %s", text(r))
	}
}

// openDatabase connects to database db of c as the superuser, closed at
// cleanup.
func (c *cluster) openDatabase(t *testing.T, db string) *sql.DB {
	t.Helper()
	d, err := sql.Open("pgx", c.URL("postgres", db))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// dbNow reads the database's clock (clock_timestamp(), not the
// transaction's start).
func dbNow(t *testing.T, c *cluster) time.Time {
	t.Helper()
	var now time.Time
	if err := c.db.QueryRow(`SELECT clock_timestamp()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// todoState reads the todo's state and the database's clock.
func todoState(t *testing.T, db *sql.DB, id string) (string, time.Time) {
	t.Helper()
	var st string
	var now time.Time
	if err := db.QueryRow(`SELECT state, clock_timestamp() FROM todos WHERE id = $1`, id).Scan(&st, &now); err != nil {
		t.Fatal(err)
	}
	return st, now
}

// within fails the test unless got is within stampSlack of the database's
// clock [lo, hi] read around the request that stamped it.
func within(t *testing.T, what string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo.Add(-stampSlack)) || got.After(hi.Add(stampSlack)) {
		t.Fatalf("%s = %s, the database's clock read %s … %s around the request (off by more than %s)", what,
			got.UTC().Format(time.RFC3339Nano), lo.UTC().Format(time.RFC3339Nano), hi.UTC().Format(time.RFC3339Nano), stampSlack)
	}
}

// pushTodo pushes a todo to agent's queue "q" over REST on srv and checks
// its created_at, stamped by srv, against the database's clock.
func pushTodo(t *testing.T, c *cluster, srv *server, agent, title string) string {
	t.Helper()
	var td struct {
		ID        string    `json:"id"`
		CreatedAt time.Time `json:"created_at"`
	}
	lo := dbNow(t, c)
	if code := do(srv, adminToken, "POST", "/v1/agents/"+agent+"/todos", map[string]string{"queue": "q", "title": title}, &td); code != 201 || td.ID == "" {
		t.Fatalf("push %q to %s via %s: HTTP %d", title, agent, srv.Name, code)
	}
	within(t, fmt.Sprintf("created_at of a todo %s pushed", srv.Name), td.CreatedAt, lo, dbNow(t, c))
	return td.ID
}

// stampedOnDBClock checks that srv stamps times on the database's clock:
// the created_at of a todo it pushes is within a second of the database's
// clock around the push, whatever srv's wall clock says (design: Database
// clock).
func stampedOnDBClock(t *testing.T, c *cluster, srv *server, agent string) {
	t.Helper()
	pushTodo(t, c, srv, agent, "stamped by "+srv.Name)
}

// claimChecked claims todoID through s with lease and checks the
// lease_expires_at the server returned and stored: the database's clock at
// the claim + lease, within a second. It returns the stored lease end.
func claimChecked(t *testing.T, c *cluster, db *sql.DB, s *session, todoID string, lease time.Duration) time.Time {
	t.Helper()
	lo := dbNow(t, c)
	r := callTool(t, s, "claim", map[string]any{"todo_id": todoID, "lease_seconds": int64(lease / time.Second)})
	hi := dbNow(t, c)
	if r.IsError {
		t.Fatalf("claim %s: %s", todoID, text(r))
	}
	var td struct {
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
	}
	if err := json.Unmarshal([]byte(text(r)), &td); err != nil || td.LeaseExpiresAt.IsZero() {
		t.Fatalf("claim %s answered %s (%v), want the todo with lease_expires_at", todoID, text(r), err)
	}
	within(t, "lease_expires_at − lease of a claim", td.LeaseExpiresAt.Add(-lease), lo, hi)
	var stored time.Time
	if err := db.QueryRow(`SELECT lease_expires_at FROM todos WHERE id = $1`, todoID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !stored.Equal(td.LeaseExpiresAt) {
		t.Fatalf("claim %s: stored lease_expires_at %s, answered %s", todoID, stored, td.LeaseExpiresAt)
	}
	return stored
}

// callTool calls an MCP tool on s (a tool error is in the result).
func callTool(t *testing.T, s *session, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testkit.Wait)
	defer cancel()
	r, err := s.Client().CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// text is the text content of a tool result.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
