package doorbell

import "time"

// dedup is a set of keys that expire ttl after they were added, with O(1)
// amortised cost per add and remove whatever its size: keys are kept in a
// FIFO in insertion order next to a map, and each add first drops the
// expired keys at the FIFO's head (no sweep of the whole set on the hot
// path). Not safe for concurrent use (Engine.mu guards it).
type dedup struct {
	ttl  time.Duration
	at   map[string]time.Time // key → added at
	fifo []dedupEntry         // insertion order; fifo[head:] are live or stale
	head int
}

type dedupEntry struct {
	key string
	at  time.Time
}

func newDedup(ttl time.Duration) dedup { return dedup{ttl: ttl, at: map[string]time.Time{}} }

// add records key at now unless it was added less than ttl ago; it reports
// whether it was added. Keys older than ttl at now are dropped first.
func (d *dedup) add(key string, now time.Time) bool {
	d.expire(now)
	if at, ok := d.at[key]; ok && now.Sub(at) < d.ttl {
		return false
	}
	d.at[key] = now
	d.fifo = append(d.fifo, dedupEntry{key: key, at: now})
	return true
}

// remove forgets key (its FIFO entry is skipped when it reaches the head).
func (d *dedup) remove(key string) { delete(d.at, key) }

// len is the number of keys held (expired ones included until the next add).
func (d *dedup) len() int { return len(d.at) }

func (d *dedup) expire(now time.Time) {
	for d.head < len(d.fifo) {
		e := d.fifo[d.head]
		if now.Sub(e.at) < d.ttl {
			break
		}
		if at, ok := d.at[e.key]; ok && at.Equal(e.at) {
			delete(d.at, e.key)
		}
		d.fifo[d.head] = dedupEntry{}
		d.head++
	}
	// Compact once the dead prefix is at least half of the slice: each entry
	// is moved O(1) times on average.
	if d.head > 1024 && d.head*2 >= len(d.fifo) {
		n := copy(d.fifo, d.fifo[d.head:])
		clear(d.fifo[n:])
		d.fifo = d.fifo[:n]
		d.head = 0
	}
}
