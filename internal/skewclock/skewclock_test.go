package skewclock

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestShiftsWallTimeOnly(t *testing.T) {
	base := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	c := New(base, 20*time.Second)
	if got := c.Now().Sub(base.Now()); got != 20*time.Second {
		t.Fatalf("offset %s, want 20s", got)
	}
	fired := make(chan struct{})
	c.AfterFunc(time.Second, func() { close(fired) })
	base.Advance(time.Second)
	<-fired // timers run on the base clock's durations
	if New(base, 0) != clockwork.Clock(base) {
		t.Fatal("a zero offset must return the base clock")
	}
}

func TestFromEnv(t *testing.T) {
	env := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == EnvVar }
	}
	for v, want := range map[string]time.Duration{"": 0, "20s": 20 * time.Second, "-20s": -20 * time.Second} {
		got, err := FromEnv(env(v))
		if err != nil || got != want {
			t.Fatalf("%q: %s, %v; want %s", v, got, err, want)
		}
	}
	if _, err := FromEnv(env("20")); err == nil {
		t.Fatal("a bare number must be refused")
	}
}
