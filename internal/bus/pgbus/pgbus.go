// Package pgbus is the PostgreSQL adapter of the bus port (DESIGN.md §4):
// signals travel as NOTIFY on the store's database, and every instance
// LISTENs on one dedicated connection. A dropped listener connection is
// re-established with capped exponential backoff; after each reconnect the
// OnReconnect hook runs, because signals sent while it was down are lost
// (delivery is at-most-once; the evaluator's next pass is the net).
package pgbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rollcall/rollcall/internal/bus"
)

// MaxPayload is PostgreSQL's NOTIFY payload limit in bytes (minus one).
const MaxPayload = 7999

// Options configures a Bus.
type Options struct {
	// URL is the PostgreSQL connection URL.
	URL string
	// Channels to LISTEN on; default bus.Channels.
	Channels []string
	Log      *slog.Logger
	// OnReconnect runs (on its own goroutine) after the listener connection
	// was re-established following a drop.
	OnReconnect func()
	// MinBackoff and MaxBackoff bound the reconnect delay (default 100 ms, 10 s).
	MinBackoff, MaxBackoff time.Duration
}

// Bus publishes with pg_notify over a small pool and delivers on one
// listening connection.
type Bus struct {
	o    Options
	pool *pgxpool.Pool

	mu   sync.RWMutex
	next int
	subs map[string]map[int]bus.Handler

	cancel context.CancelFunc
	done   chan struct{}

	connMu sync.Mutex
	conn   *pgx.Conn // the listener, for tests that drop it
}

// Open connects the publisher pool and the listener, LISTENs on every
// channel and starts delivering. Errors: the database is unreachable.
func Open(ctx context.Context, o Options) (*Bus, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if len(o.Channels) == 0 {
		o.Channels = bus.Channels
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("pgbus: %w", err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgbus: %w", err)
	}
	b := &Bus{o: o, pool: pool, subs: map[string]map[int]bus.Handler{}, done: make(chan struct{})}
	conn, err := b.listen(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	lctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go b.loop(lctx, conn)
	return b, nil
}

func (b *Bus) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, b.o.URL)
	if err != nil {
		return nil, fmt.Errorf("pgbus: listener: %w", err)
	}
	for _, ch := range b.o.Channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("pgbus: LISTEN %s: %w", ch, err)
		}
	}
	b.connMu.Lock()
	b.conn = conn
	b.connMu.Unlock()
	return conn, nil
}

func (b *Bus) loop(ctx context.Context, conn *pgx.Conn) {
	defer close(b.done)
	for {
		err := b.receive(ctx, conn)
		conn.Close(context.Background())
		if ctx.Err() != nil {
			return
		}
		b.o.Log.Warn("bus listener lost; reconnecting", "err", err)
		delay := b.o.MinBackoff
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			c, err := b.listen(ctx)
			if err == nil {
				conn = c
				break
			}
			b.o.Log.Warn("bus listener reconnect failed", "err", err, "retry_in", delay)
			delay = min(delay*2, b.o.MaxBackoff)
		}
		b.o.Log.Info("bus listener reconnected")
		if b.o.OnReconnect != nil {
			go b.o.OnReconnect()
		}
	}
}

func (b *Bus) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		b.mu.RLock()
		hs := make([]bus.Handler, 0, len(b.subs[n.Channel]))
		for _, h := range b.subs[n.Channel] {
			hs = append(hs, h)
		}
		b.mu.RUnlock()
		for _, h := range hs {
			h(n.Payload)
		}
	}
}

// Publish sends payload on channel to every instance (this one included)
// with pg_notify. Errors: payload over MaxPayload bytes, database errors.
func (b *Bus) Publish(ctx context.Context, channel, payload string) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("pgbus: payload of %d bytes exceeds %d", len(payload), MaxPayload)
	}
	_, err := b.pool.Exec(ctx, "SELECT pg_notify($1, $2)", channel, payload)
	return err
}

// Subscribe registers fn for channel. Channel must be one of Options.Channels.
func (b *Bus) Subscribe(channel string, fn bus.Handler) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	id := b.next
	if b.subs[channel] == nil {
		b.subs[channel] = map[int]bus.Handler{}
	}
	b.subs[channel][id] = fn
	return func() {
		b.mu.Lock()
		delete(b.subs[channel], id)
		b.mu.Unlock()
	}
}

// DropListener closes the listener connection as a network failure would;
// the bus reconnects with backoff. For failure tests.
func (b *Bus) DropListener() error {
	b.connMu.Lock()
	c := b.conn
	b.connMu.Unlock()
	if c == nil {
		return errors.New("pgbus: no listener")
	}
	return c.PgConn().Conn().Close()
}

// Close stops delivery and closes the connections.
func (b *Bus) Close() error {
	if b.cancel != nil {
		b.cancel()
		<-b.done
	}
	b.pool.Close()
	return nil
}
