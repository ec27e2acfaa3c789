// Package intaketest serves the recorded GitHub deliveries in
// internal/intake/testdata/github (bodies in GitHub's documented payload
// shapes, compact JSON as GitHub sends it, with the header set GitHub
// sends) and signs them, for tests of every layer (intake, app, httpapi,
// e2e).
package intaketest

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Dir returns the directory of the recorded deliveries.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "github")
}

// GitHub returns the recorded delivery name (e.g. "pull_request.opened"):
// its headers (unsigned) and body.
func GitHub(t testing.TB, name string) (http.Header, []byte) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(Dir(), name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(Dir(), name+".headers"))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if ok {
			h.Add(k, v)
		}
	}
	return h, body
}

// Names lists the recorded deliveries.
func Names(t testing.TB) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(Dir(), "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range m {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".json"))
	}
	return out
}

// SignGitHub sets X-Hub-Signature-256 and the legacy X-Hub-Signature on h
// for body under secret, as GitHub does.
func SignGitHub(h http.Header, secret string, body []byte) {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	m1 := hmac.New(sha1.New, []byte(secret))
	m1.Write(body)
	h.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(m1.Sum(nil)))
}

// Post sends a delivery (h, body) to url and returns the answer's status;
// the answer's body is read and dropped.
func Post(t testing.TB, url string, h http.Header, body []byte) int {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// DeliverGitHub sends the recorded delivery name (see GitHub), signed with
// secret, to url and returns the answer's status.
func DeliverGitHub(t testing.TB, url, secret, name string) int {
	t.Helper()
	h, body := GitHub(t, name)
	SignGitHub(h, secret, body)
	return Post(t, url, h, body)
}
