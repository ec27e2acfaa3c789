package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/testkit"
)

// TestE2ECLIPrivateCAThroughNginx runs the real `rollcall` CLI against an
// instance behind the shipped TLS nginx config whose certificate a private
// CA signed: without the CA the command fails with the x509 error and the
// hint; with --ca-cert, ROLLCALL_CA_CERT or SSL_CERT_FILE naming the CA's
// PEM it reaches the server (design: CLI grammar).
func TestE2ECLIPrivateCAThroughNginx(t *testing.T) {
	nginxBinary(t)
	dir := t.TempDir()
	ca := testkit.PrivateCA(t, "rollcall.example.com", "127.0.0.1")
	caFile, certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for f, b := range map[string][]byte{caFile: ca.PEM, certFile: ca.CertPEM, keyFile: ca.KeyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsAddr, plainAddr := freePort(t), freePort(t)
	a := startServer(t, bootstrapEnv, "--store", "sqlite:"+filepath.Join(dir, "r.db"),
		"--public_url", "https://rollcall.example.com", "--trusted_proxies", "127.0.0.1/32")
	conf := tlsNginxConfig(t, certFile, keyFile, tlsAddr, plainAddr, a)
	probe := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	startNginxProbe(t, conf, probe, "https://"+tlsAddr+"/healthz")
	url := "https://" + tlsAddr

	// rollcall runs the CLI with the admin token against nginx's TLS port,
	// neither CA variable set unless given.
	rollcall := func(env []string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		cmd := exec.CommandContext(ctx, binPath, args...)
		cmd.Env = append(append(os.Environ(), "ROLLCALL_SERVER="+url, "ROLLCALL_TOKEN="+adminToken,
			"ROLLCALL_CA_CERT=", "SSL_CERT_FILE="), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := rollcall(nil, "agent", "list")
	if err == nil {
		t.Fatalf("agent list trusted a private CA it was not given:\n%s", out)
	}
	for _, want := range []string{"cannot reach the server at " + url, "x509: certificate signed by unknown authority", "pass its certificate with --ca-cert FILE or SSL_CERT_FILE"} {
		if !strings.Contains(out, want) {
			t.Errorf("agent list without the CA: output lacks %q:\n%s", want, out)
		}
	}

	// With --ca-cert it vends an agent through nginx; every other way of
	// naming the CA then lists it.
	if out, err := rollcall(nil, "agent", "vend", "--handle", "behind-tls", "--queue", "q", "--ca-cert", caFile); err != nil {
		t.Fatalf("agent vend --ca-cert: %v\n%s", err, out)
	}
	for name, env := range map[string][]string{
		"--ca-cert":        nil,
		"ROLLCALL_CA_CERT": {"ROLLCALL_CA_CERT=" + caFile},
		"SSL_CERT_FILE":    {"SSL_CERT_FILE=" + caFile},
	} {
		args := []string{"agent", "list"}
		if env == nil {
			args = append(args, "--ca-cert", caFile)
		}
		out, err := rollcall(env, args...)
		if err != nil {
			t.Errorf("agent list with %s: %v\n%s", name, err, out)
		} else if !strings.HasPrefix(out, "HANDLE") || !strings.Contains(out, "behind-tls") {
			t.Errorf("agent list with %s does not list the agent:\n%s", name, out)
		}
	}
}
