package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/rollcall/rollcall/internal/testkit"
)

// nginxBinary finds Debian's nginx (often in /usr/sbin, outside a user's
// PATH). Without it the test skips, unless ROLLCALL_REQUIRE_NGINX=1 (.ci/run
// installs nginx-light and sets it).
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if os.Getenv("ROLLCALL_REQUIRE_NGINX") == "1" {
		t.Fatal("ROLLCALL_REQUIRE_NGINX=1 but nginx is not installed (apt-get install nginx-light)")
	}
	t.Skip("nginx is not installed")
	return ""
}

// nginxConfig turns the shipped deploy/nginx/rollcall.conf into the test's:
// every "# tls-begin" … "# tls-end" part becomes a plain-HTTP loopback
// listen (the redirect server disappears), the example upstream addresses
// become the two instances. Everything else is the shipped file verbatim.
func nginxConfig(t *testing.T, port string, upstreams [2]string) string {
	t.Helper()
	shipped, err := os.ReadFile("../deploy/nginx/rollcall.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(shipped)
	blocks := regexp.MustCompile(`(?s)# tls-begin\n.*?# tls-end\n`)
	if n := len(blocks.FindAllString(conf, -1)); n != 2 {
		t.Fatalf("the shipped config has %d tls-begin/tls-end parts, want 2 (listen and redirect)", n)
	}
	first := true
	conf = blocks.ReplaceAllStringFunc(conf, func(string) string {
		if first {
			first = false
			return "listen 127.0.0.1:" + port + ";\n"
		}
		return ""
	})
	// The redirect server is now an empty server block listening on the
	// default port: drop it.
	conf = regexp.MustCompile(`(?s)\nserver \{\n    listen 80;.*?\n\}\n`).ReplaceAllString(conf, "\n")
	conf = regexp.MustCompile(`(?m)^\s*server\s*\{\s*\n\s*\}\s*$`).ReplaceAllString(conf, "")
	for i, ex := range []string{"127.0.0.1:7070", "127.0.0.1:7071"} {
		if !strings.Contains(conf, ex) {
			t.Fatalf("the shipped config lacks the example upstream %s", ex)
		}
		conf = strings.ReplaceAll(conf, ex, upstreams[i])
	}
	// Port 443 as a word: an instance's random port may contain the digits.
	if strings.Contains(conf, "listen 80") || regexp.MustCompile(`\b443\b`).MatchString(conf) || strings.Contains(conf, "ssl_") {
		t.Fatalf("TLS part left in the test config:\n%s", conf)
	}
	return conf
}

// startNginx runs nginx in the foreground (daemon off) with its prefix,
// configuration, pid, logs and temp paths under a temp dir, serving conf on
// 127.0.0.1:port; it is stopped at cleanup.
func startNginx(t *testing.T, conf string, port string) {
	t.Helper()
	startNginxProbe(t, conf, http.DefaultClient, "http://127.0.0.1:"+port+"/healthz")
}

// startNginxProbe is startNginx with the readiness probe given: nginx is up
// once probe answers 200 through client.
func startNginxProbe(t *testing.T, conf string, client *http.Client, probe string) {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755) // workers may run as nobody
	if err := os.WriteFile(filepath.Join(dir, "rollcall.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	main := fmt.Sprintf(`%sdaemon off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log info;
events { worker_connections 256; }
http {
    access_log %[2]s/access.log;
    client_body_temp_path %[2]s/client_body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include %[2]s/rollcall.conf;
}
`, user, dir)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	var mu sync.Mutex
	var out strings.Builder
	cmd.Stdout = testkit.WriterFunc(func(p []byte) { mu.Lock(); out.Write(p); mu.Unlock() })
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // SIGINT: fast shutdown
		select {
		case <-done:
		case <-time.After(wait):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			errlog, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			access, _ := os.ReadFile(filepath.Join(dir, "access.log"))
			mu.Lock()
			t.Logf("nginx output:\n%s\nerror.log:\n%s\naccess.log:\n%s\nrollcall.conf:\n%s", out.String(), errlog, access, conf)
			mu.Unlock()
		}
	})
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-done:
			mu.Lock()
			t.Fatalf("nginx exited: %s", out.String())
		default:
		}
		resp, err := client.Get(probe)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not proxy /healthz within %s: %v", wait, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2ENginx (design: Trusted proxies): the shipped nginx config (TLS part swapped
// for plain HTTP on loopback) in front of two instances on one PostgreSQL
// database. The official TypeScript MCP client connects through nginx —
// initialize, tools/list, its GET stream and tool calls all reach the
// instance that holds its session — and receives the doorbell of a todo
// pushed through the other instance. REST through nginx sees the client's
// address, not nginx's.
func TestE2ENginx(t *testing.T) {
	nginxBinary(t)
	addr := freePort(t)
	port := addr[strings.LastIndex(addr, ":")+1:]
	front := "http://" + addr
	a, b := startPair(t, "--public_url", front, "--trusted_proxies", "127.0.0.1/32,::1/128")
	hostport := func(s *server) string { return strings.TrimPrefix(s.URL, "http://") }
	startNginx(t, nginxConfig(t, port, [2]string{hostport(a), hostport(b)}), port)

	v := vend(t, a, "via-nginx", []string{"reviews"}, allVerbs)
	if v.MCPURL != front+"/mcp" {
		t.Fatalf("mcp_url %q, want the public URL %s/mcp", v.MCPURL, front)
	}
	c, ready := startTSClient(t, v.MCPURL, v.Credential)
	if ready.Session == "" {
		t.Fatal("no session id")
	}
	// Which instance holds the session? Its log says so.
	var holder, other *server
	deadline := time.Now().Add(wait)
	for holder == nil {
		for _, s := range []*server{a, b} {
			if strings.Contains(s.Output(), "session="+ready.Session) {
				holder = s
			}
		}
		if holder == nil && time.Now().After(deadline) {
			t.Fatalf("neither instance logged session %s", ready.Session)
		}
		time.Sleep(20 * time.Millisecond)
	}
	other = a
	if holder == a {
		other = b
	}

	id := pushVia(t, other, "via-nginx", "reviews", "Review PR 9 through the proxy")
	n := c.next("notification")
	if n.Params.Meta["todo_id"] != id {
		t.Fatalf("doorbell %+v, want todo_id %s", n.Params, id)
	}
	claimed := c.call("claim", map[string]any{"todo_id": id})
	if !strings.Contains(string(claimed), "claimed") {
		t.Fatalf("claim through nginx: %s", claimed)
	}
	c.close()

	// REST through nginx: the instances believe nginx's X-Forwarded-For
	// (the test runs on loopback, itself inside trusted_proxies, so the
	// address this request names is the client the instance logs).
	req, _ := http.NewRequest("GET", front+"/v1/todos/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var td todoJSON
	json.NewDecoder(resp.Body).Decode(&td)
	resp.Body.Close()
	if resp.StatusCode != 200 || td.State != "claimed" {
		t.Fatalf("GET todo through nginx: %d %+v", resp.StatusCode, td)
	}
	for deadline := time.Now().Add(wait); !strings.Contains(a.Output()+b.Output(), "client=203.0.113.7"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no request logged with the forwarded client address")
		}
	}

	// The gateway through nginx: the WebSocket upgrade passes, identify works.
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://127.0.0.1:"+port+"/v1/gateway", nil)
	if err != nil {
		t.Fatalf("gateway through nginx: %v", err)
	}
	defer ws.CloseNow()
	if _, hello, err := ws.Read(ctx); err != nil || !strings.Contains(string(hello), `"hello"`) {
		t.Fatalf("gateway hello through nginx: %s %v", hello, err)
	}
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"op":"identify","d":{"token":"`+v.Credential+`"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, ready, err := ws.Read(ctx); err != nil || !strings.Contains(string(ready), `"ready"`) {
		t.Fatalf("gateway identify through nginx: %s %v", ready, err)
	}
}

// TestE2ENginxTLS runs the shipped config with its TLS part intact — only
// the certificate paths (a self-signed certificate made here) and the
// listen addresses (loopback, free ports) replaced — and reaches an
// instance over HTTPS: the instance believes nginx's X-Forwarded-Proto, so
// the console's cookies are Secure.
func TestE2ENginxTLS(t *testing.T) {
	nginxBinary(t)
	dir := t.TempDir()
	ca := testkit.PrivateCA(t, "rollcall.example.com")
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, ca.CertPEM, 0o644)
	os.WriteFile(keyFile, ca.KeyPEM, 0o600)
	tlsAddr, plainAddr := freePort(t), freePort(t)
	a := startServer(t, bootstrapEnv, "--store", "sqlite:"+filepath.Join(dir, "r.db"),
		"--public_url", "https://rollcall.example.com", "--trusted_proxies", "127.0.0.1/32")
	conf := tlsNginxConfig(t, certFile, keyFile, tlsAddr, plainAddr, a)
	client := &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "rollcall.example.com"}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	startNginxProbe(t, conf, client, "https://"+tlsAddr+"/healthz")

	// Plain HTTP redirects to https.
	resp, err := client.Get("http://" + plainAddr + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || !strings.HasPrefix(resp.Header.Get("Location"), "https://") {
		t.Fatalf("plain HTTP: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Over TLS, Host rollcall.example.com (public_url) passes and the
	// console's cookie is Secure.
	req, _ := http.NewRequest("GET", "https://"+tlsAddr+"/console/signin", nil)
	req.Host = "rollcall.example.com"
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("console over TLS: %d, HSTS %q", resp.StatusCode, resp.Header.Get("Strict-Transport-Security"))
	}
	var secure bool
	for _, c := range resp.Cookies() {
		secure = secure || (c.Name == "rollcall_signin" && c.Secure)
	}
	if !secure {
		t.Fatalf("the sign-in cookie over TLS is not Secure: %v", resp.Header.Values("Set-Cookie"))
	}
}

// tlsNginxConfig is the shipped nginx config with its TLS part intact:
// only the certificate paths and the listen addresses (loopback) are
// replaced, and both upstreams point at srv.
func tlsNginxConfig(t *testing.T, certFile, keyFile, tlsAddr, plainAddr string, srv *server) string {
	t.Helper()
	shipped, err := os.ReadFile("../deploy/nginx/rollcall.conf")
	if err != nil {
		t.Fatal(err)
	}
	conf := string(shipped)
	for old, repl := range map[string]string{
		"/etc/letsencrypt/live/rollcall.example.com/fullchain.pem": certFile,
		"/etc/letsencrypt/live/rollcall.example.com/privkey.pem":   keyFile,
		"listen 443 ssl http2;":                                    "listen " + tlsAddr + " ssl http2;",
		"listen [::]:443 ssl http2;\n":                             "",
		"listen 80;":                                               "listen " + plainAddr + ";",
		"listen [::]:80;\n":                                        "",
		"127.0.0.1:7070":                                           strings.TrimPrefix(srv.URL, "http://"),
		"127.0.0.1:7071":                                           strings.TrimPrefix(srv.URL, "http://"),
	} {
		if !strings.Contains(conf, old) {
			t.Fatalf("the shipped config lacks %q", old)
		}
		conf = strings.ReplaceAll(conf, old, repl)
	}
	return conf
}
