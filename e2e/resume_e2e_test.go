package e2e

import (
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections to a target. cut closes every open
// connection and holds new ones until resume: a network cut the client
// notices, and a reconnect that arrives exactly when the test lets it.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	gate  chan struct{} // closed while connections may pass
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, gate: make(chan struct{})}
	close(p.gate)
	t.Cleanup(func() {
		ln.Close()
		p.resume()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cutProxy) serve(c net.Conn) {
	p.mu.Lock()
	gate := p.gate
	p.conns = append(p.conns, c)
	p.mu.Unlock()
	<-gate
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// TestE2ETypeScriptClientResumesItsStream: the official TypeScript SDK (as
// Claude Code uses it) sees the SSE event ids of its GET stream, and after
// a network cut reconnects with Last-Event-ID. The todo rung while it was
// away reaches it exactly once, and the reconnect digest does not tell it
// again (design: Stream resumption, Connect and reconnect digests).
func TestE2ETypeScriptClientResumesItsStream(t *testing.T) {
	srv := startSQLite(t)
	v := vend(t, srv, "e2e-resume", []string{"reviews"}, allVerbs)
	u, err := url.Parse(v.MCPURL)
	if err != nil {
		t.Fatal(err)
	}
	px := startCutProxy(t, u.Host)
	u.Host = px.ln.Addr().String()
	c, _ := startTSClient(t, u.String(), v.Credential)

	a := pushTodo(t, srv, "e2e-resume", "reviews", "before the cut")
	if n := c.next("notification"); n.Params.Meta["todo_id"] != a {
		t.Fatalf("first doorbell %+v, want todo %s", n.Params, a)
	}
	px.cut() // the client's GET stream breaks; its reconnect waits at the proxy
	b := pushTodo(t, srv, "e2e-resume", "reviews", "while the stream was cut")
	px.resume()
	if n := c.next("notification"); n.Params.Meta["todo_id"] != b {
		t.Fatalf("after the reconnect: %+v, want the doorbell of %s", n.Params, b)
	}
	f := pushTodo(t, srv, "e2e-resume", "reviews", "fence")
	if n := c.next("notification"); n.Params.Meta["todo_id"] != f {
		t.Fatalf("after the fence: %+v, want the doorbell of %s (no digest in between)", n.Params, f)
	}
	var ids []string
	for _, n := range c.channelNotifications() {
		ids = append(ids, n.Params.Meta["todo_id"]+"/"+n.Params.Meta["kind"])
	}
	if want := a + "/review," + b + "/review," + f + "/review"; strings.Join(ids, ",") != want {
		t.Fatalf("notifications %v, want each todo once and no digest: %s", ids, want)
	}
	if !strings.Contains(srv.Output(), "mcp stream resumed") {
		t.Fatalf("the server saw no resume with Last-Event-ID:\n%s", srv.Output())
	}
	c.close()
}
