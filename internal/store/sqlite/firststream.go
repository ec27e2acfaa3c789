package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// MarkFirstStream implements store.Store: one conditional UPDATE, so of
// racing callers exactly one sees first = true.
func (s *Store) MarkFirstStream(ctx context.Context, agentID string, now time.Time) (bool, error) {
	var first bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE agents SET first_stream_at = ?2 WHERE id = ?1 AND first_stream_at IS NULL`, agentID, micros(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		first = n == 1
		return err
	})
	return first, mapErr("mark first stream", err)
}
