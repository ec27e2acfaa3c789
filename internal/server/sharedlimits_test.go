package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/intake"
	"github.com/rollcall/rollcall/internal/intake/intaketest"
	"github.com/rollcall/rollcall/internal/pgtest"
	"github.com/rollcall/rollcall/internal/server"
)

// TestLimitsSharedByInstances (design: Limits shared by instances): two
// servers on one PostgreSQL database spend one budget.
//   - Failed authentications: 10 wrong tokens to each instance from one
//     address are 401 (20 = auth.max_failures together); the next one is
//     429 on either instance, and the admin's own token is still served.
//   - Bad signatures of one hook: 30 to each instance are 401 (60 = the
//     hook's failed-check limit together); the next is 429 on either, and
//     a correctly signed delivery right after is taken.
//
// Both run with hooks.secret_key, so the hook's secret is stored sealed
// and each instance opens it.
func TestLimitsSharedByInstances(t *testing.T) {
	db := pgtest.FreshDatabase(t)
	key := "ROLLCALL_HOOKS_SECRET_KEY=shared-limits-test-key-0123456789abcdef"
	a := startInstance(t, db, key)
	b := startInstance(t, db, key)
	both := []*instance{a, b}

	status := func(method, url, token string, body []byte, hdr http.Header) int {
		t.Helper()
		req, err := http.NewRequest(method, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	wrong := "rcp_wrong-shared-limit-0123456789abcdef"
	for i := range 20 {
		in := both[i%2]
		if s := status("GET", in.base+"/v1/agents", wrong, nil, nil); s != 401 {
			t.Fatalf("wrong token %d on instance %d: %d, want 401", i+1, i%2, s)
		}
	}
	for i, in := range both {
		if s := status("GET", in.base+"/v1/agents", wrong, nil, nil); s != 429 {
			t.Fatalf("wrong token 21+ on instance %d: %d, want 429 (the budget is shared)", i, s)
		}
	}
	if s := status("GET", b.base+"/v1/agents", a.token, nil, nil); s != 200 {
		t.Fatalf("the admin's token from the limited address: %d, want 200", s)
	}
	// The shared table holds the address and a digest of the credential
	// prefix, never characters of the token: 21 each, the 20 and a's
	// refusal (a last saw 19 and asked); b knew the key spent and made no
	// statement.
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(t.Context(), `SELECT key, count FROM rate_windows ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var k string
		var n int
		err := r.Scan(&k, &n)
		return fmt.Sprintf("%s=%d", k, n), err
	})
	if err != nil || len(keys) != 2 || !strings.HasPrefix(keys[0], "cred#") || !strings.HasSuffix(keys[0], "=21") || !strings.HasSuffix(keys[1], "=21") || strings.Contains(strings.Join(keys, " "), "wrong") {
		t.Fatalf("rate_windows = %v, %v; want the address and a credential digest, 21 each", keys, err)
	}

	// A hook created on a, delivered to on both.
	hookID, _, secret := server.GitHubHook(t, a.base, a.token)
	stored, err := a.srv.Store.GetHook(t.Context(), hookID)
	if _, sealed := intake.IsSealed(stored.Secret); err != nil || !sealed || strings.Contains(stored.Secret, secret) {
		t.Fatalf("the stored secret %q (%v) is not sealed", stored.Secret, err)
	}
	path := "/v1/hooks/" + hookID + "/deliveries"
	forged := func(in *instance, i int) int {
		h, body := intaketest.GitHub(t, "pull_request.opened")
		h.Set("X-GitHub-Delivery", fmt.Sprintf("forged-%d", i))
		h.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("0", 64))
		return intaketest.Post(t, in.base+path, h, body)
	}
	for i := range 60 {
		if s := forged(both[i%2], i); s != 401 {
			t.Fatalf("bad signature %d on instance %d: %d, want 401", i+1, i%2, s)
		}
	}
	for i, in := range both {
		if s := forged(in, 100+i); s != 429 {
			t.Fatalf("bad signature 61+ on instance %d: %d, want 429 (the hook's budget is shared)", i, s)
		}
	}
	for i, in := range both {
		h, body := intaketest.GitHub(t, "pull_request.opened")
		h.Set("X-GitHub-Delivery", fmt.Sprintf("signed-%d", i))
		intaketest.SignGitHub(h, secret, body)
		if s := intaketest.Post(t, in.base+path, h, body); s != 201 {
			t.Fatalf("a signed delivery on instance %d after the flood: %d, want 201", i, s)
		}
	}
}
