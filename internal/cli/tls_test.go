package cli_test

import (
	"crypto/tls"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/httpapi/apitest"
	"github.com/rollcall/rollcall/internal/testkit"
)

// TestCLITrustsAPrivateCA: behind TLS with a certificate of a private CA
// the client commands fail with a hint, and reach the server once the CA
// is given with --ca-cert, ROLLCALL_CA_CERT or SSL_CERT_FILE.
func TestCLITrustsAPrivateCA(t *testing.T) {
	env := apitest.New(t)
	ca := testkit.PrivateCA(t, "127.0.0.1")
	srv := httptest.NewUnstartedServer(env.Server.Config.Handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Cert}}
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROLLCALL_SERVER", srv.URL)
	t.Setenv("ROLLCALL_TOKEN", env.AdminToken)
	t.Setenv("ROLLCALL_CA_CERT", "")
	t.Setenv("SSL_CERT_FILE", "")
	if !strings.HasPrefix(srv.URL, "https://127.0.0.1:") {
		t.Fatalf("server URL %s", srv.URL)
	}

	run("agent", "list").fails(t, 1, "certificate signed by unknown authority").
		fails(t, 1, "pass its certificate with --ca-cert FILE or SSL_CERT_FILE")
	if r := run("agent", "list", "--ca-cert", caFile).ok(t); !strings.HasPrefix(r.stdout, "HANDLE") {
		t.Fatalf("agent list --ca-cert: %q", r.stdout)
	}
	run("agent", "list", "--ca-cert", filepath.Join(dir, "missing.pem")).fails(t, 2, "CA certificates: open ")
	run("agent", "list", "--ca-cert", notPEM).fails(t, 2, "CA certificates: "+notPEM+" holds no PEM certificate")

	t.Setenv("ROLLCALL_CA_CERT", caFile)
	run("agent", "list").ok(t)
	t.Setenv("ROLLCALL_CA_CERT", "")
	t.Setenv("SSL_CERT_FILE", caFile)
	run("agent", "list").ok(t)
}
