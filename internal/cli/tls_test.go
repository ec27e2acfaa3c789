package cli_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/httpapi/apitest"
)

// TestCLITrustsAPrivateCA: behind TLS with a certificate of a private CA
// the client commands fail with a hint, and reach the server once the CA
// is given with --ca-cert, ROLLCALL_CA_CERT or SSL_CERT_FILE.
func TestCLITrustsAPrivateCA(t *testing.T) {
	env := apitest.New(t)
	caPEM, cert := testCA(t)
	srv := httptest.NewUnstartedServer(env.Server.Config.Handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	defer srv.Close()
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
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

// testCA makes a CA and a certificate it signs for 127.0.0.1; it returns
// the CA's PEM and the server's key pair.
func testCA(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Rollcall test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
