package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// raiseNoFile lifts this process's soft RLIMIT_NOFILE to its hard limit and
// returns the new limit. Set explicitly (not only by the Go runtime), it is
// inherited by the servers the harness starts.
func raiseNoFile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}

// openFDs counts the open file descriptors of pid (sockets included).
func openFDs(pid int) (int, error) {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es), err
}

// waitFDs waits until pid holds at least want descriptors, polling every
// 100 ms for at most limit: a connection counts as held once the server has
// accepted it.
func waitFDs(ctx context.Context, pid, want int, limit time.Duration) error {
	n := 0
	return poll(ctx, limit, 100*time.Millisecond, func() (done bool, err error) {
		n, err = openFDs(pid)
		return n >= want, err
	}, func() error { return fmt.Errorf("server holds %d descriptors after %s, want %d", n, limit, want) })
}

// poll calls check every period until it is done or fails, ctx ends, or
// limit passes: then the error is timeout's.
func poll(ctx context.Context, limit, period time.Duration, check func() (bool, error), timeout func() error) error {
	deadline := time.Now().Add(limit)
	for {
		if done, err := check(); done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return timeout()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(period):
		}
	}
}

// settle gives a server time to finish attaching streams before RSS is read
// (a measurement pause, not a wait for correctness).
func settle(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// stopGrace is how long a started peer or Rollcall process may take to
// exit after an interrupt before it is killed (harness.Proc.Stop).
const stopGrace = 20 * time.Second

// waitHTTP polls url until it answers below 500 (up to limit).
func waitHTTP(ctx context.Context, url string, limit time.Duration) error {
	var err error
	return poll(ctx, limit, 50*time.Millisecond, func() (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		var resp *http.Response
		if resp, err = http.DefaultClient.Do(req); err != nil {
			return false, nil // not up yet
		}
		resp.Body.Close()
		return resp.StatusCode < 500, nil
	}, func() error { return fmt.Errorf("%s not answering within %s: %v", url, limit, err) })
}

// clientPool hands out HTTP clients whose connections leave from distinct
// loopback source addresses (127.0.0.2, 127.0.0.3, …), so tens of thousands
// of connections to one server port do not exhaust one address's ephemeral
// ports.
type clientPool struct {
	clients []*http.Client
}

func newClientPool(sources int) *clientPool {
	p := &clientPool{}
	for i := range sources {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}
		d := &net.Dialer{LocalAddr: local, Timeout: 10 * time.Second, KeepAlive: -1}
		tr := &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}
		p.clients = append(p.clients, &http.Client{Transport: tr})
	}
	return p
}

// get returns the client for connection i.
func (p *clientPool) get(i int) *http.Client { return p.clients[i%len(p.clients)] }

func (p *clientPool) close() {
	for _, c := range p.clients {
		c.CloseIdleConnections()
	}
}
