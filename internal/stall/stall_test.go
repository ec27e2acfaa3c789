package stall

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// TestGapIsAStall: a gap of at least the threshold between two checks is a
// stall; a wait that spanned it runs its full length again from its end; a
// shorter gap is none; the nil detector extends nothing.
func TestGapIsAStall(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	d := New(clock, time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	clock.Advance(200 * time.Millisecond)
	if got := d.Check(); got != 0 {
		t.Fatalf("a 200 ms gap recorded %s", got)
	}
	clock.Advance(5 * time.Second) // SIGSTOP
	if got := d.Check(); got != 5*time.Second {
		t.Fatalf("the 5 s gap recorded %s", got)
	}
	end := t0.Add(5200 * time.Millisecond)
	if got := d.Extend(t0, 3*time.Second); !got.Equal(end.Add(3 * time.Second)) {
		t.Errorf("a 3 s wait from before the stall ends %s, want its full length after the stall (%s)", got, end.Add(3*time.Second))
	}
	if got := d.Extend(end, 3*time.Second); !got.Equal(end.Add(3 * time.Second)) {
		t.Errorf("a wait begun after the stall ends %s, want %s", got, end.Add(3*time.Second))
	}
	var none *Detector
	if got := none.Extend(t0, time.Second); !got.Equal(t0.Add(time.Second)) || none.Check() != 0 || New(clock, 0, nil) != nil {
		t.Error("the nil detector extends or records")
	}
}
