package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/rollcall/rollcall/internal/testkit"
)

// TestE2EBatchedWorkers: workers on two `rollcall serve` processes on one
// PostgreSQL database drain one agent's queue with claim_next n and
// complete with next (design: Claiming in batches, Complete and claim the
// next): every todo is claimed once and done once.
func TestE2EBatchedWorkers(t *testing.T) {
	a, b := startPair(t)
	agent := vend(t, a, "batcher", []string{"q"}, testkit.WorkVerbs)
	const todos = 60
	for i := range todos {
		pushVia(t, a, "batcher", "q", fmt.Sprintf("job %d", i))
	}
	var sessions []*goSession
	for _, srv := range []*server{a, b, a, b} {
		sessions = append(sessions, openGoSession(t, srv.URL+"/mcp", agent.Credential))
	}
	type todo struct {
		ID string `json:"id"`
	}
	call := func(s *goSession, name string, args map[string]any, out any) error {
		ctx, cancel := context.WithTimeout(t.Context(), wait)
		defer cancel()
		r, err := s.Client().CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
		if err != nil {
			return err
		}
		text := ""
		for _, c := range r.Content {
			if tc, ok := c.(mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if r.IsError {
			return fmt.Errorf("%s: tool error %s", name, text)
		}
		return json.NewDecoder(strings.NewReader(text)).Decode(out)
	}
	var mu sync.Mutex
	claimed := map[string]int{}
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var batch struct{ Todos []todo }
			if errs[i] = call(s, "claim_next", map[string]any{"n": 3}, &batch); errs[i] != nil {
				return
			}
			held := batch.Todos
			for len(held) > 0 {
				mu.Lock()
				for _, td := range held {
					claimed[td.ID]++
				}
				mu.Unlock()
				for _, td := range held[1:] {
					var done todo
					if errs[i] = call(s, "complete", map[string]any{"todo_id": td.ID}, &done); errs[i] != nil {
						return
					}
				}
				var fin struct{ Next []todo }
				if errs[i] = call(s, "complete", map[string]any{"todo_id": held[0].ID, "next": map[string]any{"n": 2}}, &fin); errs[i] != nil {
					return
				}
				held = fin.Next
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	if len(claimed) != todos {
		t.Errorf("%d distinct todos claimed, want %d", len(claimed), todos)
	}
	for id, n := range claimed {
		if n != 1 {
			t.Errorf("todo %s claimed %d times", id, n)
		}
	}
	var page struct {
		Items []struct{ State string } `json:"items"`
	}
	if code := restGet(t, b, "/v1/agents/batcher/todos?state=done&limit=100", &page); code != 200 || len(page.Items) != todos {
		t.Fatalf("GET done todos = %d, %d todos; want %d", code, len(page.Items), todos)
	}
}
