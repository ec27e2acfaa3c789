package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/intake/intaketest"
)

// TestE2EGitHubDeliveryRingsTheAgent is the end-to-end flow (design: Hooks) on the
// real binary: a hook made with the CLI, a signed GitHub pull_request
// delivery (the recorded body and header set) posted to the running server
// rings the agent's MCP session (official TypeScript SDK client) with a
// doorbell whose source is github; a redelivery of the same
// X-GitHub-Delivery rings nothing (a later pushed todo is the next and only
// other doorbell), and a delivery with a bad signature is refused.
func TestE2EGitHubDeliveryRingsTheAgent(t *testing.T) {
	srv := startSQLite(t)
	v := vend(t, srv, "e2e-reviewer", []string{"reviews"}, allVerbs)
	var hook struct {
		Hook struct {
			ID string `json:"id"`
		} `json:"hook"`
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	out := cli(t, srv, "hook", "add", "--kind", "github", "--agent", "e2e-reviewer", "--queue", "reviews", "--repo", "acme-corp/widgets", "--json")
	if err := json.Unmarshal([]byte(out), &hook); err != nil || hook.URL != srv.URL+"/v1/hooks/"+hook.Hook.ID+"/deliveries" || hook.Secret == "" {
		t.Fatalf("hook add output: %v\n%s", err, out)
	}

	c, _ := startTSClient(t, v.MCPURL, v.Credential)

	h, body := intaketest.GitHub(t, "pull_request.review_requested")
	post := func(h http.Header) (int, []byte) {
		req, err := http.NewRequest("POST", hook.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, b := post(h); code != http.StatusUnauthorized || bytes.Contains(b, []byte("retry budget")) {
		t.Fatalf("unsigned delivery = %d %s", code, b)
	}
	intaketest.SignGitHub(h, hook.Secret, body)
	code, b := post(h)
	var res struct {
		Outcome string `json:"outcome"`
		TodoID  string `json:"todo_id"`
	}
	if err := json.Unmarshal(b, &res); code != http.StatusCreated || err != nil || res.Outcome != "created" || res.TodoID == "" {
		t.Fatalf("signed delivery = %d %s", code, b)
	}
	n := c.next("notification")
	if n.Method != "notifications/claude/channel" || n.Params.Meta["todo_id"] != res.TodoID || n.Params.Meta["source"] != "github" ||
		n.Params.Meta["kind"] != "pull_request" || n.Params.Meta["queue"] != "reviews" {
		t.Fatalf("doorbell = %+v, want todo_id %s source github", n.Params, res.TodoID)
	}

	// GitHub's "Redeliver" sends the same X-GitHub-Delivery again.
	code, b = post(h)
	if err := json.Unmarshal(b, &res); code != http.StatusOK || err != nil || res.Outcome != "duplicate" {
		t.Fatalf("redelivery = %d %s", code, b)
	}
	fence := pushTodo(t, srv, "e2e-reviewer", "reviews", "fence after the redelivery")
	if n := c.next("notification"); n.Params.Meta["todo_id"] != fence {
		t.Fatalf("the next doorbell after the redelivery is %+v, want the fence %s", n.Params, fence)
	}
	c.close()
	if got := c.channelNotifications(); len(got) != 2 {
		t.Fatalf("client received %d channel notifications, want the delivery's and the fence's: %+v", len(got), got)
	}
	var todos struct {
		Items []struct {
			Source    string `json:"source"`
			CreatedBy string `json:"created_by"`
		} `json:"items"`
	}
	if restGet(t, srv, "/v1/agents/e2e-reviewer/todos", &todos); len(todos.Items) != 2 || todos.Items[0].Source != "github" || todos.Items[0].CreatedBy != "hook:"+hook.Hook.ID {
		t.Fatalf("todos %+v", todos.Items)
	}
}

// TestE2EHandOff: an agent vended with a handoff grant (CLI --handoff) sees
// hand_off in tools/list, hands a todo to the granted agent over MCP
// (TypeScript SDK), and that agent's session rings with it; the target,
// without grants, does not list hand_off; a pair outside the grant is
// invalid_argument.
func TestE2EHandOff(t *testing.T) {
	srv := startSQLite(t)
	reviewer := vend(t, srv, "e2e-reviewer", []string{"reviews", "triage"}, allVerbs)
	var planner vendResult
	out := cli(t, srv, "agent", "vend", "--handle", "e2e-planner", "--queue", "plans", "--verb", "list_todos", "--handoff", "e2e-reviewer/reviews", "--json")
	if err := json.Unmarshal([]byte(out), &planner); err != nil {
		t.Fatalf("vend --handoff: %v\n%s", err, out)
	}
	rc, rready := startTSClient(t, reviewer.MCPURL, reviewer.Credential)
	if slices.Contains(rready.Tools, "hand_off") {
		t.Fatalf("reviewer (no grants) lists hand_off: %v", rready.Tools)
	}
	pc, pready := startTSClient(t, planner.MCPURL, planner.Credential)
	if !slices.Contains(pready.Tools, "hand_off") {
		t.Fatalf("planner tools/list %v lacks hand_off", pready.Tools)
	}
	bad := pc.call("hand_off", map[string]any{"to": "e2e-reviewer", "queue": "triage", "title": "not granted"})
	if !strings.Contains(string(bad), `"isError":true`) || !strings.Contains(string(bad), "invalid_argument") || !strings.Contains(string(bad), "/queue") {
		t.Fatalf("hand_off outside the grant: %s", bad)
	}
	res := pc.call("hand_off", map[string]any{"to": "e2e-reviewer", "queue": "reviews", "title": "Review the plan", "payload": map[string]any{"plan": 1}})
	var got struct {
		StructuredContent struct {
			Todo struct {
				ID        string `json:"id"`
				CreatedBy string `json:"created_by"`
			} `json:"todo"`
			Created bool `json:"created"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(res, &got); err != nil || !got.StructuredContent.Created || got.StructuredContent.Todo.CreatedBy != "agent:"+planner.Agent.ID {
		t.Fatalf("hand_off result: %v %s", err, res)
	}
	n := rc.next("notification")
	if n.Params.Meta["todo_id"] != got.StructuredContent.Todo.ID || n.Params.Meta["source"] != "handoff" || n.Params.Meta["queue"] != "reviews" {
		t.Fatalf("reviewer doorbell %+v, want the handed-off todo", n.Params)
	}
	pc.close()
	rc.close()
	if got := rc.channelNotifications(); len(got) != 1 {
		t.Fatalf("reviewer got %d doorbells, want 1", len(got))
	}
}
