// Package pgbus is the PostgreSQL adapter of the bus port
// (design: Bus delivery): signals travel as NOTIFY on the store's database, and
// every instance LISTENs on one dedicated connection. A dropped listener
// connection is re-established with capped exponential backoff (100 ms to 1 s);
// after each reconnect the OnReconnect hook runs with the time the connection
// was lost, because signals sent while it was down are lost (delivery is
// at-most-once; the hook catches up, design: Catch-up after a lost listener).
// While the listener is down, Listening reports it (GET /readyz answers 503)
// and signals this instance publishes are delivered to its own subscribers
// directly, since their NOTIFY echo will not come.
package pgbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rollcall/rollcall/internal/bus"
	"github.com/rollcall/rollcall/internal/groupcommit"
)

// MaxPayload is PostgreSQL's NOTIFY payload limit in bytes (minus one).
const MaxPayload = 7999

// maxChannel is PostgreSQL's identifier limit in bytes (NAMEDATALEN - 1).
const maxChannel = 63

// Options configures a Bus.
type Options struct {
	// URL is the PostgreSQL connection URL.
	URL string
	// Channels to LISTEN on; default bus.Channels.
	Channels []string
	Log      *slog.Logger
	// OnReconnect runs (on its own goroutine) after the listener connection
	// was re-established following a drop, with the time the drop was
	// noticed: signals sent from shortly before it until the new LISTENs
	// were lost.
	OnReconnect func(lostAt time.Time)
	// MinBackoff and MaxBackoff bound the reconnect delay (default 100 ms, 1 s).
	MinBackoff, MaxBackoff time.Duration
	// PingInterval is how long the listener may be silent before it is
	// checked with a ping, so a connection that died without an error
	// (network partition) is noticed (default 5 s).
	PingInterval time.Duration
}

// Bus publishes with pg_notify over a small pool and delivers on one
// listening connection.
type Bus struct {
	o    Options
	pool *pgxpool.Pool

	notices groupcommit.Committer[notice, struct{}] // Publish's group commit (notifyBatch)
	posted  sync.WaitGroup                          // Enqueued notices not sent yet (Close waits for them)

	mu   sync.RWMutex
	next int
	subs map[string]map[int]bus.Handler

	cancel context.CancelFunc
	done   chan struct{}

	connMu sync.Mutex
	conn   *pgx.Conn // the listener, for tests that drop it

	listening atomic.Bool // the listener connection is up and LISTENing
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
		o.MaxBackoff = time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 5 * time.Second
	}
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		return nil, fmt.Errorf("pgbus: %w", err)
	}
	cfg.MaxConns, cfg.MinConns = 4, 0 // the store's pool_* settings are for the store's pool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgbus: %w", err)
	}
	b := &Bus{o: o, pool: pool, subs: map[string]map[int]bus.Handler{}, done: make(chan struct{})}
	b.notices.Run = b.notifyBatch
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
	// Parsed as a pool's URL: pgxpool takes out its pool_* settings
	// (pool_max_conns, …), which a single connection would send to the
	// server as unknown runtime parameters and be refused.
	pcfg, err := pgxpool.ParseConfig(b.o.URL)
	if err != nil {
		return nil, fmt.Errorf("pgbus: listener: %w", err)
	}
	cfg := pcfg.ConnConfig
	if _, set := cfg.RuntimeParams["application_name"]; !set {
		cfg.RuntimeParams["application_name"] = "rollcall bus listener"
	}
	// The listener's wait is bounded by PingInterval: interrupt it with a
	// read deadline (the connection stays usable), not a cancel request.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgbus: listener: %w", err)
	}
	for _, ch := range b.o.Channels {
		if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			conn.Close(ctx)
			return nil, fmt.Errorf("pgbus: LISTEN %s: %w", ch, err)
		}
	}
	b.connMu.Lock()
	b.conn = conn
	b.connMu.Unlock()
	b.listening.Store(true)
	return conn, nil
}

func (b *Bus) loop(ctx context.Context, conn *pgx.Conn) {
	defer close(b.done)
	for {
		err := b.receive(ctx, conn)
		b.listening.Store(false)
		lostAt := time.Now()
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
		b.o.Log.Info("bus listener reconnected", "down_for", time.Since(lostAt).Round(time.Millisecond))
		if b.o.OnReconnect != nil {
			go b.o.OnReconnect(lostAt)
		}
	}
}

func (b *Bus) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, b.o.PingInterval)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) || conn.IsClosed() {
				return err
			}
			// Silent for PingInterval: make sure the connection is alive.
			pctx, pcancel := context.WithTimeout(ctx, b.o.PingInterval)
			err = conn.Ping(pctx)
			pcancel()
			if err != nil {
				return fmt.Errorf("pgbus: listener ping: %w", err)
			}
			continue
		}
		b.dispatch(n.Channel, n.Payload)
	}
}

// dispatch calls the handlers of channel with payload.
func (b *Bus) dispatch(channel, payload string) {
	b.mu.RLock()
	hs := make([]bus.Handler, 0, len(b.subs[channel]))
	for _, h := range b.subs[channel] {
		hs = append(hs, h)
	}
	b.mu.RUnlock()
	for _, h := range hs {
		h(payload)
	}
}

// ErrNotListening is Listening's error while the listener is down.
var ErrNotListening = errors.New("pgbus: the bus listener is down; reconnecting")

// Listening returns nil while the listener connection is up and LISTENing,
// ErrNotListening while it is down or reconnecting (GET /readyz answers
// 503; design: Readiness).
func (b *Bus) Listening() error {
	if b.listening.Load() {
		return nil
	}
	return ErrNotListening
}

// ListenerPID is the PostgreSQL backend process id of the listener
// connection (0 while there is none), for operators and for tests that
// pg_terminate_backend it.
func (b *Bus) ListenerPID() uint32 {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	if b.conn == nil || !b.listening.Load() {
		return 0
	}
	return b.conn.PgConn().PID()
}

// Publish sends payload on channel to every instance (this one included)
// with pg_notify. Publishes that arrive while another is being sent are
// sent together in one statement, one transaction (design: Bus delivery):
// a NOTIFY commits like any write, and PostgreSQL serialises the commits
// of notifying transactions, so one each would cap the signal rate at one
// commit each. While this instance's listener is down the NOTIFY echo
// cannot reach it, so after a successful pg_notify the payload is also
// delivered to this instance's subscribers directly, on the caller's
// goroutine. Errors: an empty channel or one over 63 bytes, a payload over
// MaxPayload bytes, database errors (then nothing was delivered anywhere).
func (b *Bus) Publish(ctx context.Context, channel, payload string) error {
	if err := checkNotice(channel, payload); err != nil {
		return err
	}
	if _, err := b.notices.Do(ctx, notice{channel, payload}); err != nil {
		return err
	}
	if !b.listening.Load() {
		b.dispatch(channel, payload)
	}
	return nil
}

// Enqueue implements bus.Queuer: payload is queued for the group commit of
// Publish (in order with it) and Enqueue returns at once. Once sent it is
// delivered here too if the listener is down, as with Publish; an error
// goes to failed. Close sends what is queued before it closes.
func (b *Bus) Enqueue(channel, payload string, failed func(error)) {
	if err := checkNotice(channel, payload); err != nil {
		if failed != nil {
			failed(err)
		}
		return
	}
	b.posted.Add(1)
	// A post not sent within postTimeout is dropped (lossy by design): a
	// database that does not answer must not pile posts up or hold Close.
	ctx, cancel := context.WithTimeout(context.Background(), postTimeout)
	b.notices.Submit(ctx, notice{channel, payload}, func(_ struct{}, err error) {
		defer b.posted.Done()
		cancel()
		if err != nil {
			if failed != nil {
				failed(err)
			}
			return
		}
		if !b.listening.Load() {
			b.dispatch(channel, payload)
		}
	})
}

// postTimeout bounds how long an enqueued notice may wait to be sent.
const postTimeout = 10 * time.Second

// checkNotice refuses what PostgreSQL would refuse in a batch: a payload
// over MaxPayload, an empty or over-long channel name.
func checkNotice(channel, payload string) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("pgbus: payload of %d bytes exceeds %d", len(payload), MaxPayload)
	}
	if channel == "" || len(channel) > maxChannel {
		return fmt.Errorf("pgbus: channel name %q must be 1 to %d bytes", channel, maxChannel)
	}
	return nil
}

// notice is one Publish: a payload for a channel.
type notice struct{ channel, payload string }

// notifyBatch sends a batch of Publish calls in one statement, in arrival
// order (the ORDER BY is applied before pg_notify runs: PostgreSQL
// evaluates volatile output columns after the sort). Within one
// transaction PostgreSQL delivers a repeated (channel, payload) once;
// every signal is idempotent, so a repeat in one batch is one signal.
func (b *Bus) notifyBatch(ctx context.Context, batch []*groupcommit.Item[notice, struct{}]) {
	batch = slices.DeleteFunc(slices.Clone(batch), (*groupcommit.Item[notice, struct{}]).Skip)
	if len(batch) == 0 {
		return
	}
	channels, payloads := make([]string, len(batch)), make([]string, len(batch))
	for i, it := range batch {
		channels[i], payloads[i] = it.In.channel, it.In.payload
	}
	_, err := b.pool.Exec(ctx, `SELECT pg_notify(c, p) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS n(c, p, i) ORDER BY i`, channels, payloads)
	for _, it := range batch {
		it.Err = err
	}
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
	b.posted.Wait() // the publisher pool is still open: queued Posts go out
	if b.cancel != nil {
		b.cancel()
		<-b.done
	}
	b.pool.Close()
	return nil
}
