package storetest

import (
	"sync"
	"testing"
	"time"
)

var firstStreamTests = []contractTest{
	{"Agents/MarkFirstStream", testMarkFirstStream},
}

// MarkFirstStream is true exactly once per agent, also when racing.
func testMarkFirstStream(t *testing.T, in Instance) {
	s, ctx := in.Store, t.Context()
	a := vend(t, s, newAgent("alpha", ownerID, "q1"))
	b := vend(t, s, newAgent("bravo", ownerID, "q1"))
	first, err := s.MarkFirstStream(ctx, a.ID, at(time.Second))
	must(t, "MarkFirstStream", err)
	if !first {
		t.Fatal("the first stream of alpha is not first")
	}
	again, err := s.MarkFirstStream(ctx, a.ID, at(2*time.Second))
	must(t, "MarkFirstStream again", err)
	if again {
		t.Fatal("the second stream of alpha is first too")
	}
	unknown, err := s.MarkFirstStream(ctx, "00000000-0000-7000-8000-000000000000", at(time.Second))
	must(t, "MarkFirstStream unknown", err)
	if unknown {
		t.Fatal("an unknown agent has a first stream")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for range 8 {
		wg.Go(func() {
			f, err := s.MarkFirstStream(ctx, b.ID, at(3*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			if f {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firsts != 1 {
		t.Fatalf("%d racing callers saw bravo's first stream, want 1", firsts)
	}
}
