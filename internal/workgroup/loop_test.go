package workgroup

import (
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// next returns the next event, failing the test after a generous wait.
func next(t *testing.T, events <-chan string) string {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(30 * time.Second):
		t.Fatal("no event within 30s")
		return ""
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("loop did not return within 30s of done closing")
	}
}

func TestEveryRunsOncePerTickUntilDone(t *testing.T) {
	clock := clockwork.NewFakeClock()
	start := clock.Now()
	tick := clock.NewTicker(time.Second)
	defer tick.Stop()
	events := make(chan string, 10)
	done, returned := make(chan struct{}), make(chan struct{})
	n := 0
	go func() {
		defer close(returned)
		Every(done, tick.Chan(), func() {
			n++
			events <- fmt.Sprintf("pass %d at %s", n, clock.Since(start))
		})
	}()
	for i := 1; i <= 3; i++ {
		clock.Advance(time.Second)
		if got, want := next(t, events), fmt.Sprintf("pass %d at %ds", i, i); got != want {
			t.Fatalf("event %d = %q, want %q", i, got, want)
		}
	}
	close(done)
	waitClosed(t, returned)
	if len(events) != 0 {
		t.Fatalf("extra passes: %d", len(events))
	}
	if n != 3 {
		t.Fatalf("passes = %d, want 3", n)
	}
}

// recordingTimer reports each Reset, after making it, on events.
type recordingTimer struct {
	clockwork.Timer
	clock  clockwork.Clock
	start  time.Time
	events chan<- string
}

func (r *recordingTimer) Reset(d time.Duration) bool {
	ok := r.Timer.Reset(d)
	r.events <- fmt.Sprintf("reset %s at %s", d, r.clock.Since(r.start))
	return ok
}

func TestAfterResetsOnlyOnceThePassEnded(t *testing.T) {
	clock := clockwork.NewFakeClock()
	start := clock.Now()
	events := make(chan string, 10)
	timer := &recordingTimer{Timer: clock.NewTimer(10 * time.Second), clock: clock, start: start, events: events}
	defer timer.Stop()
	done, returned := make(chan struct{}), make(chan struct{})
	n := 0
	go func() {
		defer close(returned)
		After(done, timer, 10*time.Second, func() {
			n++
			events <- fmt.Sprintf("pass %d at %s", n, clock.Since(start))
			if n == 1 {
				clock.Advance(7 * time.Second) // a long pass
			}
		})
	}()
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			if got := next(t, events); got != w {
				t.Fatalf("event = %q, want %q", got, w)
			}
		}
	}
	clock.Advance(10 * time.Second)
	expect("pass 1 at 10s", "reset 10s at 17s")
	// A ticker would fire at 20s; the reset timer fires 10s after the pass ended.
	clock.Advance(9 * time.Second)
	clock.Advance(time.Second)
	expect("pass 2 at 27s", "reset 10s at 27s")
	close(done)
	waitClosed(t, returned)
	if len(events) != 0 {
		t.Fatalf("extra events: %d", len(events))
	}
}
