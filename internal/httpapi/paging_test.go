package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/app"
	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/httpapi/apitest"
)

type pageJSON struct {
	Items []struct {
		ID string `json:"id"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
}

func getPage(t *testing.T, e *apitest.Env, path string) (pageJSON, int, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.AdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p pageJSON
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return p, resp.StatusCode, len(b)
}

// Paging (design: Paging): todos with 63 KiB payloads (200 here, to keep the test
// short under the race detector; 500 page the same way). One
// request asking for 500 gets a page of at most 4 MiB and a cursor;
// following the cursors yields every todo exactly once, in order.
func TestTodoPagesBoundedByBytes(t *testing.T) {
	e := apitest.New(t)
	ctx := t.Context()
	admin, err := e.Service.AuthenticatePerson(ctx, e.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Service.Vend(ctx, admin, app.VendInput{Handle: "big", Queues: []string{"q"}}); err != nil {
		t.Fatal(err)
	}
	payload := json.RawMessage(`{"blob":"` + strings.Repeat("x", 63<<10) + `"}`)
	var want []string
	const n = 200
	for i := range n {
		td, _, err := e.Service.PushTodo(ctx, admin, "big", app.PushInput{Queue: "q", Title: fmt.Sprintf("t%d", i), Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, td.ID)
	}
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	first, code, size := getPage(t, e, "/v1/agents/big/todos?limit=500")
	runtime.ReadMemStats(&ms1)
	if code != 200 || size > app.MaxPageBytes+1024 || first.NextCursor == "" || len(first.Items) == 0 || len(first.Items) >= n {
		t.Fatalf("first page: %d, %d bytes, %d items, cursor %q", code, size, len(first.Items), first.NextCursor)
	}
	t.Logf("limit=500 with 63 KiB payloads: %d items, %d bytes, %.1f MB allocated by the process during the request", len(first.Items), size, float64(ms1.TotalAlloc-ms0.TotalAlloc)/1e6)
	var got []string
	p := first
	for range 100 {
		for _, it := range p.Items {
			got = append(got, it.ID)
		}
		if p.NextCursor == "" {
			break
		}
		p, code, _ = getPage(t, e, "/v1/agents/big/todos?limit=500&cursor="+p.NextCursor)
		if code != 200 {
			t.Fatalf("next page: %d", code)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged %d todos, want the %d in order", len(got), n)
	}
	// Small todos: count bounds the page.
	p, _, _ = getPage(t, e, "/v1/agents/big/todos?limit=2")
	if len(p.Items) != 2 || p.NextCursor == "" {
		t.Fatalf("limit 2: %+v", p)
	}
	// A cursor of another list, or garbage, is a 400 naming the parameter.
	for _, c := range []string{"nonsense", p.NextCursor + "x"} {
		if _, code, _ := getPage(t, e, "/v1/audit?cursor="+c); code != 400 {
			t.Fatalf("audit with cursor %q: %d", c, code)
		}
	}
	if _, code, _ := getPage(t, e, "/v1/agents?cursor="+p.NextCursor); code != 400 {
		t.Fatalf("agents with a todo cursor: %d", code)
	}
}

// Agents and audit entries page with cursors too.
func TestAgentAndAuditPages(t *testing.T) {
	e := apitest.New(t)
	ctx := t.Context()
	admin, _ := e.Service.AuthenticatePerson(ctx, e.AdminToken)
	for i := range 5 {
		if _, err := e.Service.Vend(ctx, admin, app.VendInput{Handle: fmt.Sprintf("a%d", i), Queues: []string{"q"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{"/v1/agents?limit=2", "/v1/audit?limit=2"} {
		var n int
		p, code, _ := getPage(t, e, path)
		for range 10 {
			if code != 200 {
				t.Fatalf("%s: %d", path, code)
			}
			n += len(p.Items)
			if p.NextCursor == "" {
				break
			}
			p, code, _ = getPage(t, e, path+"&cursor="+p.NextCursor)
		}
		if n != 5 {
			t.Fatalf("%s: %d items over all pages, want 5", path, n)
		}
	}
}

// Persons, tokens and hooks page with cursors like the other lists, in
// creation order, each item once; a cursor of another list is a 400.
func TestPersonTokenAndHookPages(t *testing.T) {
	e := apitest.New(t)
	ctx := t.Context()
	admin, _ := e.Service.AuthenticatePerson(ctx, e.AdminToken)
	if _, err := e.Service.Vend(ctx, admin, app.VendInput{Handle: "hooked", Queues: []string{"q"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 { // + the admin and its bootstrap token = 5 each
		if _, err := e.Service.CreatePerson(ctx, admin, app.PersonInput{Name: fmt.Sprintf("p%d", i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Service.CreateToken(ctx, admin, app.TokenInput{Name: fmt.Sprintf("t%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if _, err := e.Service.CreateHook(ctx, admin, app.HookInput{Kind: "github", Agent: "hooked", Queue: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	var last string
	for _, path := range []string{"/v1/persons?limit=2", "/v1/tokens?limit=2", "/v1/hooks?limit=2"} {
		seen := map[string]bool{}
		p, code, _ := getPage(t, e, path)
		for range 10 {
			if code != 200 {
				t.Fatalf("%s: %d", path, code)
			}
			if len(p.Items) > 2 {
				t.Fatalf("%s: %d items on a page of limit 2", path, len(p.Items))
			}
			for _, it := range p.Items {
				if it.ID == "" || seen[it.ID] {
					t.Fatalf("%s: item id %q empty or seen twice", path, it.ID)
				}
				seen[it.ID] = true
			}
			if p.NextCursor == "" {
				break
			}
			last = p.NextCursor
			p, code, _ = getPage(t, e, path+"&cursor="+p.NextCursor)
		}
		if len(seen) != 5 {
			t.Fatalf("%s: %d items over all pages, want 5", path, len(seen))
		}
	}
	if _, code, _ := getPage(t, e, "/v1/persons?cursor="+last); code != 400 {
		t.Fatalf("persons with a hook cursor: %d, want 400", code)
	}
}

// Vend and update bodies are bounded: 101 queues, 21 billing modes.
func TestVendBounds(t *testing.T) {
	e := apitest.New(t)
	ctx := t.Context()
	admin, _ := e.Service.AuthenticatePerson(ctx, e.AdminToken)
	queues := make([]string, domain.MaxQueues+1)
	for i := range queues {
		queues[i] = fmt.Sprintf("q%d", i)
	}
	if _, err := e.Service.Vend(ctx, admin, app.VendInput{Handle: "many", Queues: queues}); domain.CodeOf(err) != domain.CodeInvalidArgument || !strings.Contains(err.Error(), "at most 100 queues") {
		t.Fatalf("101 queues: %v", err)
	}
	if _, err := e.Service.Vend(ctx, admin, app.VendInput{Handle: "hundred", Queues: queues[:100]}); err != nil {
		t.Fatalf("100 queues: %v", err)
	}
	modes := queues[:domain.MaxBillingModes+1]
	if _, err := e.Service.UpdateAgent(ctx, admin, "hundred", app.UpdateInput{BillingModes: &modes}); domain.CodeOf(err) != domain.CodeInvalidArgument {
		t.Fatalf("21 billing modes: %v", err)
	}
}
