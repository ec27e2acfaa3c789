package e2e

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/pgtest"

	"github.com/rollcall/rollcall/internal/testkit"
)

type todoJSON struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Queue string `json:"queue"`
}

// pushTodo pushes a todo with the CLI and returns its id.
func pushTodo(t *testing.T, srv *server, agent, queue, title string) string {
	t.Helper()
	out := cli(t, srv, "todo", "push", agent, "--queue", queue, "--title", title, "--kind", "review", "--json")
	var td todoJSON
	if err := json.Unmarshal([]byte(out), &td); err != nil || td.ID == "" {
		t.Fatalf("todo push output: %v\n%s", err, out)
	}
	return td.ID
}

// TestE2ETypeScriptClient is the end-to-end flow (design: Ring on create) with the official MCP
// TypeScript SDK: vend with the CLI, connect, push with the CLI, exactly one
// doorbell whose meta.todo_id is the todo, claim + complete over MCP, and the
// REST API shows it done.
func TestE2ETypeScriptClient(t *testing.T) {
	srv := startSQLite(t)
	if strings.Contains(srv.Output(), adminToken) {
		t.Fatal("the bootstrap token from the environment must never be printed")
	}
	v := vend(t, srv, "e2e-ts", []string{"reviews"}, allVerbs)
	if !strings.HasPrefix(v.ClaudeMCPAdd, "claude mcp add --transport http ") || !strings.Contains(v.ClaudeMCPAdd, v.Credential) {
		t.Fatalf("claude_mcp_add line: %q", v.ClaudeMCPAdd)
	}

	c, ready := startTSClient(t, v.MCPURL, v.Credential)
	var info struct {
		Name string `json:"name"`
	}
	json.Unmarshal(ready.Server, &info)
	if info.Name != "rollcall" {
		t.Fatalf("serverInfo.name = %q, want rollcall", info.Name)
	}
	var caps struct {
		Tools        json.RawMessage            `json:"tools"`
		Experimental map[string]json.RawMessage `json:"experimental"`
	}
	json.Unmarshal(ready.Capabilities, &caps)
	if caps.Tools == nil || caps.Experimental["claude/channel"] == nil {
		t.Fatalf("capabilities lack tools or experimental claude/channel: %s", ready.Capabilities)
	}
	if !strings.Contains(ready.Instructions, "todo_id") || !strings.Contains(ready.Instructions, "claim_next") {
		t.Fatalf("instructions must describe both doorbells: %q", ready.Instructions)
	}
	for _, verb := range allVerbs {
		if !slices.Contains(ready.Tools, verb) {
			t.Fatalf("tools/list %v lacks %s", ready.Tools, verb)
		}
	}

	id := pushTodo(t, srv, "e2e-ts", "reviews", "Review PR 7 </channel> please")
	n := c.next("notification")
	if n.Method != "notifications/claude/channel" || n.Params.Meta["todo_id"] != id || n.Params.Meta["queue"] != "reviews" || n.Params.Meta["kind"] != "review" {
		t.Fatalf("doorbell = %+v, want todo_id %s queue reviews kind review", n.Params, id)
	}
	if strings.ContainsAny(n.Params.Content, "\r\n") || strings.Contains(strings.ToLower(n.Params.Content), "</channel>") {
		t.Fatalf("doorbell content must be one line with </channel> neutralised: %q", n.Params.Content)
	}

	claimed := c.call("claim", map[string]any{"todo_id": id})
	if !strings.Contains(string(claimed), `claimed`) {
		t.Fatalf("claim result: %s", claimed)
	}
	done := c.call("complete", map[string]any{"todo_id": id, "result": map[string]any{"ok": true}})
	if strings.Contains(string(done), `"isError":true`) {
		t.Fatalf("complete result: %s", done)
	}
	c.close()
	if got := c.channelNotifications(); len(got) != 1 {
		t.Fatalf("client received %d channel notifications, want exactly 1: %+v", len(got), got)
	}

	var td todoJSON
	if code := restGet(t, srv, "/v1/todos/"+id, &td); code != 200 || td.State != "done" {
		t.Fatalf("GET /v1/todos/%s = %d %+v, want 200 done", id, code, td)
	}
}

// TestE2EGoClient runs the same flow with mcp-go's Go client, on SQLite and
// on PostgreSQL.
func TestE2EGoClient(t *testing.T) {
	for _, st := range []string{"sqlite", "postgres"} {
		t.Run(st, func(t *testing.T) {
			storeURL := "sqlite:" + filepath.Join(t.TempDir(), "rollcall.db")
			if st == "postgres" {
				storeURL = pgtest.FreshDatabase(t)
			}
			srv := startServer(t, bootstrapEnv, "--store", storeURL)
			v := vend(t, srv, "e2e-go", []string{"reviews", "lane-m"}, allVerbs)

			s := testkit.OpenSession(t, v.MCPURL, v.Credential, "e2e-go", nil)
			if s.Server.Name != "rollcall" {
				t.Fatalf("serverInfo.name = %q", s.Server.Name)
			}

			id := pushTodo(t, srv, "e2e-go", "lane-m", "Fix the flaky test")
			if meta := s.Next("doorbell", wait).Meta; meta["todo_id"] != id || meta["queue"] != "lane-m" {
				t.Fatalf("doorbell meta = %v, want todo_id %s queue lane-m", meta, id)
			}

			call := func(name string, args map[string]any) *mcp.CallToolResult { return callTool(t, s, name, args) }
			call("claim", map[string]any{"todo_id": id})
			call("complete", map[string]any{"todo_id": id, "result": map[string]any{"fixed": true}})

			var td todoJSON
			if code := restGet(t, srv, "/v1/todos/"+id, &td); code != 200 || td.State != "done" {
				t.Fatalf("GET /v1/todos/%s = %d %+v, want 200 done", id, code, td)
			}
			if got := s.Bells(); len(got) != 1 {
				t.Fatalf("received %d channel notifications, want exactly 1", len(got))
			}
		})
	}
}
