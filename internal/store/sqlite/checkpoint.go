package sqlite

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpoints off the commit path (design: SQLite checkpoints): the write
// connection does not checkpoint on its own (wal_autocheckpoint is 0); a
// goroutine of the store runs a PASSIVE checkpoint on a connection of its
// own once checkpointCommits commits have gone into the WAL since the last
// one, and every checkpointEvery for any remainder. A PASSIVE checkpoint
// neither waits for nor blocks the writer and readers, and the writer
// starts the WAL over at its first transaction after one that copied every
// frame. Under writes without a pause a background checkpoint always
// overlaps a write, which then adds frames past it, so the WAL is never
// started over and would grow without bound: when a checkpoint finds more
// than walFramesHigh frames in it, the writer checkpoints itself, right
// after its next commit (with no writer running, that checkpoint copies every frame,
// and the commit after it starts the WAL over).
const (
	// checkpointCommits bounds the WAL at about what SQLite's default
	// autocheckpoint (1 000 pages) lets it reach: a push commit writes a
	// handful of pages.
	checkpointCommits = 128
	checkpointEvery   = time.Second
	// walFramesHigh is where the writer takes a checkpoint on itself: 16
	// MiB of 4 KiB pages.
	walFramesHigh = 4096
	// walLimitBytes is journal_size_limit: a WAL file that grew past it is
	// cut back to it when the writer starts it over.
	walLimitBytes = walFramesHigh * 4096
)

// checkpointer owns the checkpoint connection and its goroutine.
type checkpointer struct {
	db      *sql.DB
	commits atomic.Int64  // commits since the last checkpoint
	due     chan struct{} // checkpointCommits reached
	stop    chan struct{}
	done    sync.WaitGroup
	inline  atomic.Bool // the WAL outgrew high: the writer checkpoints next
	// dueAfter and high are checkpointCommits and walFramesHigh (set at
	// start; tests set smaller ones before the first commit).
	dueAfter int64
	high     int
	runs     atomic.Int64 // background checkpoints run (tests)
}

// start opens the checkpoint connection on uri and starts the goroutine.
func (c *checkpointer) start(uri string) error {
	db, err := sql.Open("sqlite", uri)
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1) // one checkpoint at a time, on a connection kept open
	db.SetMaxIdleConns(1)
	db.SetConnMaxIdleTime(0)
	c.db, c.due, c.stop = db, make(chan struct{}, 1), make(chan struct{})
	c.dueAfter, c.high = checkpointCommits, walFramesHigh
	c.done.Add(1)
	go c.run()
	return nil
}

// committed counts a commit of the write connection.
func (c *checkpointer) committed() {
	if c.db == nil {
		return // :memory: has no WAL
	}
	if c.commits.Add(1) == c.dueAfter {
		select {
		case c.due <- struct{}{}:
		default:
		}
	}
}

func (c *checkpointer) run() {
	defer c.done.Done()
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-c.due:
		case <-t.C:
		}
		if c.commits.Swap(0) == 0 || c.inline.Load() {
			continue // nothing new, or the writer's own checkpoint is due
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		frames, _, err := checkpoint(ctx, c.db)
		if err != nil {
			slog.Warn("sqlite checkpoint failed; the next one takes what is left", "err", err)
		} else if frames > c.high {
			c.inline.Store(true)
		}
		cancel()
		c.runs.Add(1)
	}
}

// checkpoint runs a PASSIVE checkpoint on db and returns the frames in
// the WAL and those it left uncopied (all of them when another checkpoint
// was running).
func checkpoint(ctx context.Context, db *sql.DB) (frames, left int, err error) {
	var busy, copied int
	err = db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &frames, &copied)
	if busy != 0 {
		return frames, frames, err
	}
	return frames, frames - copied, err
}

// afterCommit runs on the write connection after a commit: the writer's
// own checkpoint when the background ones fell behind, again after each
// commit until one copies every frame (a reader still on old frames can
// keep some), so that the writer starts the WAL over.
func (c *checkpointer) afterCommit(ctx context.Context, w *sql.DB) {
	if !c.inline.Load() {
		return
	}
	_, left, err := checkpoint(ctx, w)
	if err != nil {
		slog.Warn("sqlite checkpoint on the write connection failed", "err", err)
	}
	if err == nil && left == 0 {
		c.inline.Store(false)
	}
}

// close stops the goroutine and closes the connection; the last
// checkpoint is SQLite's own, when the write connection closes.
func (c *checkpointer) close() error {
	if c.db == nil {
		return nil
	}
	close(c.stop)
	c.done.Wait()
	return c.db.Close()
}
