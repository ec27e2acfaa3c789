package workgroup

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Every runs f once for each value received from tick, on the calling
// goroutine, until done is closed; then it returns (a pass under way
// finishes first). When done and tick are both ready either may be taken,
// as with any select. The caller owns the ticker behind tick and stops it.
func Every(done <-chan struct{}, tick <-chan time.Time, f func()) {
	for {
		select {
		case <-done:
			return
		case <-tick:
		}
		f()
	}
}

// After runs f each time t fires, on the calling goroutine, until done is
// closed. After each pass it resets t to d, so the next pass starts at
// least d after this one ended however long it ran (unlike a ticker). t
// must be running when After is called; the caller owns t and stops it.
func After(done <-chan struct{}, t clockwork.Timer, d time.Duration, f func()) {
	Rearm(done, t, func() time.Duration { f(); return d })
}

// Rearm runs f each time t fires, on the calling goroutine, until done is
// closed. After each pass it resets t to the delay f returned, so the next
// pass starts that long after this one ended. t must be running when
// Rearm is called; the caller owns t and stops it.
func Rearm(done <-chan struct{}, t clockwork.Timer, f func() time.Duration) {
	for {
		select {
		case <-done:
			return
		case <-t.Chan():
		}
		t.Reset(f())
	}
}
