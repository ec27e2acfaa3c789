package pgbus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/groupcommit"
	"github.com/rollcall/rollcall/internal/pgtest"
)

// collect subscribes to channel and returns what arrives, in order.
func collect(b *Bus, channel string) (got func(n int, wait time.Duration) []string) {
	var mu sync.Mutex
	var ps []string
	more := make(chan struct{}, 1)
	b.Subscribe(channel, func(p string) {
		mu.Lock()
		ps = append(ps, p)
		mu.Unlock()
		select {
		case more <- struct{}{}:
		default:
		}
	})
	return func(n int, wait time.Duration) []string {
		deadline := time.After(wait)
		for {
			mu.Lock()
			if len(ps) >= n {
				out := append([]string(nil), ps...)
				mu.Unlock()
				return out
			}
			mu.Unlock()
			select {
			case <-more:
			case <-deadline:
				mu.Lock()
				defer mu.Unlock()
				return append([]string(nil), ps...)
			}
		}
	}
}

// openPair opens two buses on the test database, both listening on ch:
// a publisher and another instance. They close when the test ends.
func openPair(t *testing.T, ch string) (a, b *Bus) {
	t.Helper()
	u := pgtest.AdminURL(t)
	for _, x := range []**Bus{&a, &b} {
		bus, err := Open(context.Background(), Options{URL: u, Channels: []string{ch}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bus.Close() })
		*x = bus
	}
	return a, b
}

// One batch is one statement whose notifications arrive in the batch's
// order, on the other instance too; an item whose caller gave up is not
// sent.
func TestNotifyBatchKeepsArrivalOrder(t *testing.T) {
	ctx := context.Background()
	const ch = "rc_test_batch_order"
	a, b := openPair(t, ch)
	got := collect(b, ch)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	var batch []*groupcommit.Item[notice, struct{}]
	var want []string
	for i := range 60 {
		c := ctx
		if i == 7 {
			c = gone
		} else {
			want = append(want, fmt.Sprintf("n%02d", i))
		}
		batch = append(batch, &groupcommit.Item[notice, struct{}]{Ctx: c, In: notice{ch, fmt.Sprintf("n%02d", i)}})
	}
	a.notifyBatch(ctx, batch)
	for i, it := range batch {
		if (i == 7) != (it.Err != nil) {
			t.Fatalf("item %d: err %v", i, it.Err)
		}
	}
	ps := got(len(want), 20*time.Second)
	if fmt.Sprint(ps) != fmt.Sprint(want) {
		t.Fatalf("delivered %v\nwant      %v", ps, want)
	}
}

// Concurrent publishes are sent together (some batch holds more than
// one), and each publisher's signals arrive in the order it sent them.
func TestConcurrentPublishesAreBatched(t *testing.T) {
	ctx := context.Background()
	const ch = "rc_test_batched"
	a, b := openPair(t, ch)
	var mu sync.Mutex
	largest := 0
	a.notices.Observe(func(n int) {
		mu.Lock()
		largest = max(largest, n)
		mu.Unlock()
	})
	got := collect(b, ch)
	const publishers, each = 100, 5
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, publishers*each)
	for g := range publishers {
		wg.Go(func() {
			<-start
			for i := range each {
				if err := a.Publish(ctx, ch, fmt.Sprintf("%d:%d", g, i)); err != nil {
					errs <- err
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ps := got(publishers*each, 20*time.Second)
	if len(ps) != publishers*each {
		t.Fatalf("%d of %d signals arrived", len(ps), publishers*each)
	}
	next := map[int]int{}
	for _, p := range ps {
		var g, i int
		if _, err := fmt.Sscanf(p, "%d:%d", &g, &i); err != nil {
			t.Fatal(err)
		}
		if i != next[g] {
			t.Fatalf("publisher %d: signal %d arrived when %d was due", g, i, next[g])
		}
		next[g]++
	}
	mu.Lock()
	defer mu.Unlock()
	if largest < 2 {
		t.Fatalf("100 concurrent publishers never shared a batch (largest %d)", largest)
	}
}

// A channel PostgreSQL would refuse is refused before it can fail the
// publishes batched with it.
func TestPublishRefusesABadChannel(t *testing.T) {
	ctx := context.Background()
	a, err := Open(ctx, Options{URL: pgtest.AdminURL(t), Channels: []string{"rc_test_badch"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, ch := range []string{"", string(make([]byte, 64))} {
		if err := a.Publish(ctx, ch, "x"); err == nil {
			t.Fatalf("channel of %d bytes accepted", len(ch))
		}
	}
	if err := a.Publish(ctx, "rc_test_badch", "x"); err != nil {
		t.Fatal(err)
	}
}

// The store's URL may carry pgxpool settings (pool_max_conns,
// pool_min_conns): the bus's own pool and its listener connect with it.
func TestOpenWithPoolSettingsInTheURL(t *testing.T) {
	ctx := context.Background()
	u := pgtest.AdminURL(t)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	const ch = "rc_test_poolurl"
	a, err := Open(ctx, Options{URL: u + sep + "pool_max_conns=30&pool_min_conns=8", Channels: []string{ch}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	got := collect(a, ch)
	if err := a.Publish(ctx, ch, "x"); err != nil {
		t.Fatal(err)
	}
	if ps := got(1, 20*time.Second); len(ps) != 1 || ps[0] != "x" {
		t.Fatalf("delivered %v", ps)
	}
}

// Enqueue returns before its signal is sent; posts and publishes arrive on
// the other instance in the order they were made; a bad channel goes to
// failed at once; Close sends what is still queued.
func TestEnqueueKeepsOrderAndIsSentByClose(t *testing.T) {
	ctx := context.Background()
	const ch = "rc_test_post"
	u := pgtest.AdminURL(t)
	a, err := Open(ctx, Options{URL: u, Channels: []string{ch}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, Options{URL: u, Channels: []string{ch}})
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	defer b.Close()
	got := collect(b, ch)
	var want []string
	failed := make(chan error, 100)
	for i := range 40 {
		p := fmt.Sprintf("s%02d", i)
		want = append(want, p)
		if i%5 == 4 {
			if err := a.Publish(ctx, ch, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		a.Enqueue(ch, p, func(err error) { failed <- err })
	}
	a.Enqueue("", "x", func(err error) { failed <- err })
	select {
	case err := <-failed:
		if err == nil || !strings.Contains(err.Error(), "channel name") {
			t.Fatalf("the empty channel failed with %v", err)
		}
	default:
		t.Fatal("a post on an empty channel was not refused at once")
	}
	for i := range 10 { // queued when Close is called
		p := fmt.Sprintf("t%02d", i)
		want = append(want, p)
		a.Enqueue(ch, p, func(err error) { failed <- err })
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	ps := got(len(want), 20*time.Second)
	if fmt.Sprint(ps) != fmt.Sprint(want) {
		t.Fatalf("delivered %v\nwant      %v", ps, want)
	}
	select {
	case err := <-failed:
		t.Fatalf("a post failed: %v", err)
	default:
	}
}
