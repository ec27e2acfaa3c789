package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// MarkFirstStream implements store.Store: one conditional UPDATE, so of
// racing callers exactly one sees first = true.
func (s *Store) MarkFirstStream(ctx context.Context, agentID string, now time.Time) (bool, error) {
	var first bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		n, err := s.txq(tx).MarkFirstStream(ctx, dbsqlc.MarkFirstStreamParams{ID: agentID, Now: micros(now)})
		first = n == 1
		return err
	})
	return first, mapErr("mark first stream", err)
}
