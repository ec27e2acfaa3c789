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

// timerLoop runs a loop under test on a recordingTimer, first due in 10 s
// on a fake clock; pass reports each pass (its number and the time since
// the start) before the timer's resets on events.
type timerLoop struct {
	clock          *clockwork.FakeClock
	events         chan string
	done, returned chan struct{}
}

func startTimerLoop(t *testing.T, loop func(done <-chan struct{}, timer clockwork.Timer, clock *clockwork.FakeClock, pass func() int)) *timerLoop {
	clock := clockwork.NewFakeClock()
	start := clock.Now()
	l := &timerLoop{clock: clock, events: make(chan string, 10), done: make(chan struct{}), returned: make(chan struct{})}
	timer := &recordingTimer{Timer: clock.NewTimer(10 * time.Second), clock: clock, start: start, events: l.events}
	t.Cleanup(func() { timer.Stop() })
	n := 0
	pass := func() int {
		n++
		l.events <- fmt.Sprintf("pass %d at %s", n, clock.Since(start))
		return n
	}
	go func() {
		defer close(l.returned)
		loop(l.done, timer, clock, pass)
	}()
	return l
}

// expect reads the next events, failing the test unless they are want.
func (l *timerLoop) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if got := next(t, l.events); got != w {
			t.Fatalf("event = %q, want %q", got, w)
		}
	}
}

// stop closes done and checks the loop returns with no event left.
func (l *timerLoop) stop(t *testing.T) {
	t.Helper()
	close(l.done)
	waitClosed(t, l.returned)
	if len(l.events) != 0 {
		t.Fatalf("extra events: %d", len(l.events))
	}
}

func TestAfterResetsOnlyOnceThePassEnded(t *testing.T) {
	l := startTimerLoop(t, func(done <-chan struct{}, timer clockwork.Timer, clock *clockwork.FakeClock, pass func() int) {
		After(done, timer, 10*time.Second, func() {
			if pass() == 1 {
				clock.Advance(7 * time.Second) // a long pass
			}
		})
	})
	l.clock.Advance(10 * time.Second)
	l.expect(t, "pass 1 at 10s", "reset 10s at 17s")
	// A ticker would fire at 20s; the reset timer fires 10s after the pass ended.
	l.clock.Advance(9 * time.Second)
	l.clock.Advance(time.Second)
	l.expect(t, "pass 2 at 27s", "reset 10s at 27s")
	l.stop(t)
}

// TestRearmResetsToTheDelayThePassReturned: each reset takes the delay
// the pass returned, 0 included (the next pass is due at once).
func TestRearmResetsToTheDelayThePassReturned(t *testing.T) {
	delays := []time.Duration{3 * time.Second, 0, time.Hour}
	l := startTimerLoop(t, func(done <-chan struct{}, timer clockwork.Timer, _ *clockwork.FakeClock, pass func() int) {
		Rearm(done, timer, func() time.Duration { return delays[pass()-1] })
	})
	l.clock.Advance(10 * time.Second)
	l.expect(t, "pass 1 at 10s", "reset 3s at 10s")
	l.clock.Advance(3 * time.Second)
	l.expect(t, "pass 2 at 13s", "reset 0s at 13s", "pass 3 at 13s", "reset 1h0m0s at 13s")
	l.stop(t)
}
