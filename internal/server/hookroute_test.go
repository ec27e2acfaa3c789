package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHookDeliveryRoute: only POST /v1/hooks/{id}/deliveries is a signed
// route the failed-auth limit leaves to the hook's own limits.
func TestHookDeliveryRoute(t *testing.T) {
	for _, c := range []struct {
		method, path string
		want         bool
	}{
		{"POST", "/v1/hooks/hk_1/deliveries", true},
		{"GET", "/v1/hooks/hk_1/deliveries", false},
		{"POST", "/v1/hooks//deliveries", false},
		{"POST", "/v1/hooks/hk_1/x/deliveries", false},
		{"POST", "/v1/hooks/hk_1", false},
		{"POST", "/v1/agents/a/deliveries", false},
		{"POST", "/x/v1/hooks/hk_1/deliveries", false},
	} {
		if got := hookDelivery(httptest.NewRequest(c.method, c.path, nil)); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.method, c.path, got, c.want)
		}
	}
}

// TestBadSignaturesDoNotLockTheAddress: with a real server, 25 deliveries
// with a bad signature (past the failed-auth limit of 20 per address) are
// each refused by the hook (401, its failed-check bucket allows 60), and a
// wrong bearer token from the same address afterwards is still a plain 401,
// not 429: the deliveries did not count against the address.
func TestBadSignaturesDoNotLockTheAddress(t *testing.T) {
	url, _ := start(t)
	_, hookURL, _ := GitHubHook(t, url, testAdmin)
	path := hookURL[strings.Index(hookURL, "/v1/hooks/"):]
	for i := range 25 {
		r := do(t, "POST", url+path, "", strings.NewReader(`{"zen":"x"}`),
			"X-GitHub-Event", "ping", "X-GitHub-Delivery", fmt.Sprintf("d-%d", i), "X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		if r.StatusCode != 401 {
			t.Fatalf("bad delivery %d: %d, want 401", i+1, r.StatusCode)
		}
	}
	if r := do(t, "GET", url+"/v1/agents", "rcp_wrong-0123456789abcdef", nil); r.StatusCode != 401 {
		t.Fatalf("a wrong bearer token after 25 bad deliveries: %d, want 401 (the deliveries counted against the address)", r.StatusCode)
	}
}

// GitHubHook (exported for the external tests) vends the agent "hooked"
// (queue q) on the server at base with
// token and creates a GitHub hook for it: the hook's id, delivery URL and
// secret (shown once).
func GitHubHook(t *testing.T, base, token string) (id, url, secret string) {
	t.Helper()
	if r := do(t, "POST", base+"/v1/agents", token, strings.NewReader(`{"handle":"hooked","queues":["q"]}`)); r.StatusCode != 201 {
		t.Fatalf("vend: %d", r.StatusCode)
	}
	req, _ := http.NewRequest("POST", base+"/v1/hooks", strings.NewReader(`{"kind":"github","agent":"hooked","queue":"q"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var hook struct {
		Hook struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"hook"`
		Secret string `json:"secret"`
	}
	err = json.NewDecoder(resp.Body).Decode(&hook)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 201 || hook.Hook.ID == "" || hook.Hook.URL == "" || hook.Secret == "" {
		t.Fatalf("create hook: %d %v %+v", resp.StatusCode, err, hook)
	}
	return hook.Hook.ID, hook.Hook.URL, hook.Secret
}
