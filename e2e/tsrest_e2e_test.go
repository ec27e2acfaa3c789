package e2e

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// TestE2ETypeScriptRESTClient runs the tests of the public TypeScript REST
// client (clients/typescript, generated from api/openapi.yaml) against the
// real binary on SQLite with the bootstrapped admin token: vend, push and
// list todos, paging, and RFC 9457 problems read through the generated
// types. Like the MCP TypeScript SDK tests it fails, never skips, when node
// or the client's node_modules are missing (scripts/test.sh runs npm ci).
func TestE2ETypeScriptRESTClient(t *testing.T) {
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatal("npm is required for the TypeScript REST client test")
	}
	const dir = "../clients/typescript"
	if _, err := os.Stat(dir + "/node_modules/tsx"); err != nil {
		t.Fatal("run `npm ci` in clients/typescript first (scripts/test.sh does)")
	}
	srv := startSQLite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "test", "--silent")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ROLLCALL_URL="+srv.URL, "ROLLCALL_TOKEN="+adminToken)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test in clients/typescript: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
