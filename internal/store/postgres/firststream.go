package postgres

import (
	"context"
	"time"

	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// MarkFirstStream implements store.Store: one conditional UPDATE, so of
// racing callers (on any instance) exactly one sees first = true.
func (s *Store) MarkFirstStream(ctx context.Context, agentID string, now time.Time) (bool, error) {
	n, err := s.q.MarkFirstStream(ctx, dbsqlc.MarkFirstStreamParams{ID: agentID, Now: micro(now)})
	if err != nil {
		return false, mapErr("mark first stream", err)
	}
	return n == 1, nil
}
