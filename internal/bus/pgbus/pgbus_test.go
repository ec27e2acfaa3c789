package pgbus_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/bus/pgbus"
)

const wait = 20 * time.Second

func pgURL(t *testing.T) string {
	u := os.Getenv("ROLLCALL_TEST_POSTGRES")
	if u == "" {
		if os.Getenv("ROLLCALL_REQUIRE_POSTGRES") == "1" {
			t.Fatal("ROLLCALL_REQUIRE_POSTGRES=1 but ROLLCALL_TEST_POSTGRES is not set")
		}
		t.Skip("ROLLCALL_TEST_POSTGRES not set")
	}
	return u
}

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
		OnReconnect: func() { reconnected <- struct{}{} }})
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
