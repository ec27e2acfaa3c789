package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckpointsOffTheCommitPath (design: SQLite checkpoints): the write
// connection does not checkpoint by itself, the store's checkpointer does
// once checkpointCommits commits went into the WAL, and under commits
// without a pause (where a background checkpoint never catches up) the WAL
// stays bounded: the writer checkpoints itself once it outgrows
// walFramesHigh.
func TestCheckpointsOffTheCommitPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollcall.db")
	s := openT(t, path)
	// Small thresholds, so that the race detector's slow SQLite gets there
	// quickly; set before the first commit.
	const dueAfter, high = 16, 128
	s.ckpt.dueAfter, s.ckpt.high = dueAfter, high
	var auto int
	if err := s.w.QueryRowContext(t.Context(), `PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("writer wal_autocheckpoint = %d, %v; want 0", auto, err)
	}
	if err := s.write(t.Context(), func(tx *sql.Tx) error {
		_, err := tx.Exec(`CREATE TABLE scratch (x BLOB)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// insert commits one row of n random bytes.
	insert := func(n int) {
		t.Helper()
		if err := s.write(t.Context(), func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO scratch VALUES (randomblob(?))`, n)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	waitRuns := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for s.ckpt.runs.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d checkpoints after 30 s, want %d", s.ckpt.runs.Load(), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for range dueAfter {
		insert(100)
	}
	waitRuns(1)
	// Commits without a pause, of 8 pages each: eight times high
	// frames in all. The WAL, started over by the writer, stays bounded.
	most := int64(0)
	for i := range high {
		insert(8 * 4096)
		if i%4 == 0 {
			fi, err := os.Stat(path + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			most = max(most, fi.Size())
		}
	}
	if limit := int64(4 * high * (4096 + 24)); most > limit {
		t.Fatalf("the WAL file reached %d bytes over %d commits without a pause, want at most %d", most, high, limit)
	}
}
