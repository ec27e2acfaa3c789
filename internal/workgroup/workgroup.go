// Package workgroup runs background goroutines that their owner waits for
// when it closes, so none outlives what it uses (a store, a connection).
package workgroup

import "sync"

// Group is a set of running goroutines. The zero value is ready to use;
// it is safe for concurrent use.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f on its own goroutine and reports true, unless the group is
// closed: then f is not run and Go reports false.
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// Wait waits for the goroutines running now, and for those they start, to
// return; it does not refuse new work. A test calls it after the event
// that started the work.
func (g *Group) Wait() { g.wg.Wait() }

// Close refuses new work and waits for what is running.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
