package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
)

// Every caller gets its own result; writes queued behind a commit in
// flight are written together, at most MaxBatch at a time.
func TestConcurrentCallersShareBatches(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	first := true
	var g Committer[int, int]
	g.Run = func(_ context.Context, batch []*Item[int, int]) {
		mu.Lock()
		sizes = append(sizes, len(batch))
		wait := first
		first = false
		mu.Unlock()
		if wait {
			<-release // hold the first commit while the others queue
		}
		for _, it := range batch {
			it.Out = it.In * 2
		}
	}
	ctx := context.Background()
	const callers = 150
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		close(started)
		if out, err := g.Do(ctx, -1); err != nil || out != -2 {
			t.Errorf("first caller: %d, %v", out, err)
		}
	})
	<-started
	for {
		mu.Lock()
		n := len(sizes)
		mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	for i := range callers {
		wg.Go(func() {
			if out, err := g.Do(ctx, i); err != nil || out != 2*i {
				t.Errorf("caller %d: %d, %v", i, out, err)
			}
		})
	}
	for { // every caller queued behind the held commit
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == callers {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, n := range sizes[1:] {
		if n > MaxBatch {
			t.Fatalf("a batch of %d", n)
		}
		total += n
	}
	if total != callers || len(sizes) != 1+(callers+MaxBatch-1)/MaxBatch {
		t.Fatalf("batches %v for %d queued callers", sizes, callers)
	}
}

// A caller that gives up while queued gets its context's error and its
// write is never run.
func TestCallerGivingUpWhileQueuedIsNotWritten(t *testing.T) {
	release := make(chan struct{})
	inRun := make(chan struct{})
	var mu sync.Mutex
	var written []int
	var g Committer[int, struct{}]
	g.Run = func(_ context.Context, batch []*Item[int, struct{}]) {
		if batch[0].In == 0 {
			close(inRun)
			<-release
		}
		mu.Lock()
		for _, it := range batch {
			written = append(written, it.In)
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = g.Do(context.Background(), 0) })
	<-inRun
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := g.Do(ctx, 1); errc <- err }()
	for {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("gave up: %v", err)
	}
	close(release)
	wg.Wait()
	if _, err := g.Do(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(written) != 2 || written[0] != 0 || written[1] != 2 {
		t.Fatalf("written %v, want [0 2]", written)
	}
}

// Submit returns before its write is committed, keeps arrival order with
// Do's callers, and calls back with each item's own result.
func TestSubmitKeepsOrderAndCallsBack(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var written []int
	var g Committer[int, int]
	g.Run = func(_ context.Context, batch []*Item[int, int]) {
		if batch[0].In == 0 {
			<-release // hold the first commit: what follows queues
		}
		mu.Lock()
		defer mu.Unlock()
		for _, it := range batch {
			written = append(written, it.In)
			if it.In == 3 {
				it.Err = errors.New("refused")
				continue
			}
			it.Out = it.In * 10
		}
	}
	ctx := context.Background()
	results := make(chan [3]int, 10)
	post := func(i int) {
		g.Submit(ctx, i, func(out int, err error) {
			failed := 0
			if err != nil {
				failed = 1
			}
			results <- [3]int{i, out, failed}
		})
	}
	post(0) // returns at once although its commit is held
	for i := 1; i <= 4; i++ {
		post(i)
	}
	done := make(chan struct{})
	go func() { // a Do caller queued behind the posts
		defer close(done)
		if out, err := g.Do(ctx, 5); err != nil || out != 50 {
			t.Errorf("Do after the posts: %d, %v", out, err)
		}
	}()
	close(release)
	<-done
	got := map[int][3]int{}
	for range 5 {
		r := <-results
		got[r[0]] = r
	}
	for i := range 5 {
		want := [3]int{i, i * 10, 0}
		if i == 3 {
			want = [3]int{3, 0, 1}
		}
		if got[i] != want {
			t.Errorf("post %d called back with %v, want %v", i, got[i], want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, v := range written {
		if v != i {
			t.Fatalf("written in the order %v, want 0…5", written)
		}
	}
}
