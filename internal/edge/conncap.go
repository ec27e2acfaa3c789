package edge

import (
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Listener wraps ln so that one client address (IPv6: its /64) holds at most
// Options.MaxConnsPerClient connections at once: a client that opens
// connections and stalls on them (headers only, a body that never comes)
// can use up its own share of the process's file descriptors, not everyone's.
// A connection over the cap is answered 429 rate_limited with Connection:
// close and closed at once, before any request is read. Peers inside
// TrustedProxies are not capped (they carry many clients; cap at the proxy,
// e.g. nginx limit_conn). With a negative MaxConnsPerClient, ln is returned
// as it is.
func (e *Edge) Listener(ln net.Listener) net.Listener {
	if e.opts.MaxConnsPerClient < 0 {
		return ln
	}
	return &capListener{Listener: ln, e: e, max: e.opts.MaxConnsPerClient, open: map[string]int{}}
}

type capListener struct {
	net.Listener
	e   *Edge
	max int

	mu   sync.Mutex
	open map[string]int // limiter key of the client address → open connections

	lastLog atomic.Int64 // unix ns of the last refusal logged (one a second at most)
}

// Accept returns the next connection within its client's cap; connections
// over the cap are refused on their own goroutine and never returned.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		peer := addrOf(c.RemoteAddr().String())
		if !peer.IsValid() || l.e.trusted(peer) {
			return c, nil
		}
		key := ipKey(peer.String())
		l.mu.Lock()
		n := l.open[key]
		if n >= l.max {
			l.mu.Unlock()
			go l.refuse(c, peer.String())
			continue
		}
		l.open[key] = n + 1
		l.mu.Unlock()
		return &capConn{Conn: c, l: l, key: key}, nil
	}
}

func (l *capListener) release(key string) {
	l.mu.Lock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
	l.mu.Unlock()
}

// refuseBody is the answer on a connection over the cap.
var refuseBody = `{"type":"urn:rollcall:problem:rate_limited","title":"Rate limited","status":429,` +
	`"detail":"too many open connections from this client address; close some and retry","code":"rate_limited"}` + "\n"

// refuse answers a connection over the cap and closes it. Like net/http it
// half-closes first and reads (and drops) what the client sent, so the
// close does not reset the connection before the client read the answer;
// all of it is bounded by one deadline, so a client cannot hold the
// goroutine.
func (l *capListener) refuse(c net.Conn, client string) {
	defer c.Close()
	now := time.Now()
	if last := l.lastLog.Load(); now.UnixNano()-last >= int64(time.Second) && l.lastLog.CompareAndSwap(last, now.UnixNano()) {
		l.e.log.Info("connection refused", "client", client, "reason", "too_many_connections", "limit", l.max)
	}
	_ = c.SetDeadline(now.Add(time.Second))
	_, _ = c.Write([]byte("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\n" +
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(refuseBody)) + "\r\n\r\n" + refuseBody))
	if cw, ok := c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}
}

// capConn gives its place back when closed (once, however often Close is
// called: net/http and a hijacker may both close it).
type capConn struct {
	net.Conn
	l    *capListener
	key  string
	once sync.Once
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.key) })
	return err
}

// CloseWrite half-closes a TCP connection (net/http uses it before closing
// a connection whose answer said Connection: close).
func (c *capConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
