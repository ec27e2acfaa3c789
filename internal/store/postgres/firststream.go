package postgres

import (
	"context"
	"time"
)

// MarkFirstStream implements store.Store: one conditional UPDATE, so of
// racing callers (on any instance) exactly one sees first = true.
func (s *Store) MarkFirstStream(ctx context.Context, agentID string, now time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE agents SET first_stream_at = $2 WHERE id = $1 AND first_stream_at IS NULL`, agentID, micro(now))
	if err != nil {
		return false, mapErr("mark first stream", err)
	}
	return tag.RowsAffected() == 1, nil
}
