package pgbus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/bus/pgbus"
	"github.com/rollcall/rollcall/internal/pgtest"
)

const wait = 20 * time.Second

func pgURL(t *testing.T) string { return pgtest.AdminURL(t) }

func recv(t *testing.T, c <-chan string) string {
	t.Helper()
	select {
	case p := <-c:
		return p
	case <-time.After(wait):
		t.Fatal("no signal within the wait bound")
		return ""
	}
}

// Two buses on one database: a signal published on one reaches both.
func TestCrossInstanceDelivery(t *testing.T) {
	ctx := context.Background()
	u := pgURL(t)
	a, err := pgbus.Open(ctx, pgbus.Options{URL: u, Channels: []string{"rc_test_cross"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := pgbus.Open(ctx, pgbus.Options{URL: u, Channels: []string{"rc_test_cross"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ga, gb := make(chan string, 4), make(chan string, 4)
	a.Subscribe("rc_test_cross", func(p string) { ga <- p })
	b.Subscribe("rc_test_cross", func(p string) { gb <- p })
	if err := a.Publish(ctx, "rc_test_cross", "agent-1:in:shift_start"); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, ga); p != "agent-1:in:shift_start" {
		t.Fatalf("publisher got %q", p)
	}
	if p := recv(t, gb); p != "agent-1:in:shift_start" {
		t.Fatalf("other instance got %q", p)
	}
}

// A dropped listener reconnects, runs OnReconnect, and delivers again.
func TestReconnectAfterDrop(t *testing.T) {
	ctx := context.Background()
	u := pgURL(t)
	reconnected := make(chan struct{}, 1)
	b, err := pgbus.Open(ctx, pgbus.Options{URL: u, Channels: []string{"rc_test_drop"}, MinBackoff: 10 * time.Millisecond,
		OnReconnect: func(time.Time) { reconnected <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan string, 4)
	b.Subscribe("rc_test_drop", func(p string) { got <- p })
	if err := b.DropListener(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reconnected:
	case <-time.After(wait):
		t.Fatal("listener did not reconnect")
	}
	if err := b.Publish(ctx, "rc_test_drop", "after"); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, got); p != "after" {
		t.Fatalf("got %q after reconnect", p)
	}
}

// terminate ends one backend of the shared server with
// pg_terminate_backend, as an operator or a failover would.
func terminate(t *testing.T, u string, pid uint32) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// pg_terminate_backend of the listener
// (design: Catch-up after a lost listener): Listening reports the outage (GET
// /readyz is 503 meanwhile); while it lasts this instance's own publications
// still reach its subscribers, exactly once; another instance's are lost
// (at-most-once); the listener comes back on its own, OnReconnect gets the time
// the loss was noticed, and delivery resumes.
func TestListenerTerminated(t *testing.T) {
	ctx := context.Background()
	u := pgURL(t)
	const ch = "rc_test_terminated"
	lost := make(chan time.Time, 1)
	// A wide first backoff keeps the outage open long enough to act in it.
	b, err := pgbus.Open(ctx, pgbus.Options{URL: u, Channels: []string{ch}, MinBackoff: 3 * time.Second, MaxBackoff: 3 * time.Second,
		OnReconnect: func(at time.Time) { lost <- at }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other, err := pgbus.Open(ctx, pgbus.Options{URL: u, Channels: []string{ch}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	got := make(chan string, 16)
	b.Subscribe(ch, func(p string) { got <- p })
	if err := b.Listening(); err != nil {
		t.Fatalf("Listening before the outage: %v", err)
	}
	pid := b.ListenerPID()
	if pid == 0 {
		t.Fatal("no listener pid")
	}
	before := time.Now()
	terminate(t, u, pid)
	deadline := time.Now().Add(wait)
	for b.Listening() == nil {
		if time.Now().After(deadline) {
			t.Fatal("Listening still nil after the listener was terminated")
		}
		time.Sleep(5 * time.Millisecond) // polling an observable state, not timing
	}
	if !errors.Is(b.Listening(), pgbus.ErrNotListening) {
		t.Fatalf("Listening during the outage = %v", b.Listening())
	}
	if err := other.Publish(ctx, ch, "from-other-during"); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, ch, "own-during"); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, got); p != "own-during" {
		t.Fatalf("during the outage got %q, want this instance's own signal", p)
	}
	var at time.Time
	select {
	case at = <-lost:
	case <-time.After(wait):
		t.Fatal("listener did not reconnect")
	}
	if at.Before(before) || time.Since(at) < 0 {
		t.Fatalf("lostAt %v not within the outage (terminated after %v)", at, before)
	}
	if err := b.Listening(); err != nil {
		t.Fatalf("Listening after the reconnect: %v", err)
	}
	if b.ListenerPID() == pid {
		t.Fatal("same listener pid after the reconnect")
	}
	if err := other.Publish(ctx, ch, "after"); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, got); p != "after" {
		t.Fatalf("after the reconnect got %q, want %q (and own-during once)", p, "after")
	}
	if err := b.Publish(ctx, ch, "own-after"); err != nil {
		t.Fatal(err)
	}
	if p := recv(t, got); p != "own-after" {
		t.Fatalf("got %q, want own-after exactly once through the echo", p)
	}
	select {
	case p := <-got:
		t.Fatalf("extra delivery %q", p)
	default:
	}
}

func TestPayloadLimit(t *testing.T) {
	ctx := context.Background()
	b, err := pgbus.Open(ctx, pgbus.Options{URL: pgURL(t), Channels: []string{"rc_test_limit"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	big := make([]byte, pgbus.MaxPayload+1)
	for i := range big {
		big[i] = 'x'
	}
	if err := b.Publish(ctx, "rc_test_limit", string(big)); err == nil {
		t.Fatal("an oversize payload must be refused")
	}
}

var _ bus.Bus = (*pgbus.Bus)(nil)
