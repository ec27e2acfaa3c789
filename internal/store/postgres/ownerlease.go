package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// Owner leases (store.OwnerLeaseStore) on PostgreSQL: a take-over is one
// READ COMMITTED transaction that starts with the conditional DELETE of the
// expired lease row: a racing caller blocks on the row lock, finds the row
// gone once the winner commits, and moves nothing.

// RenewOwnerLease implements store.OwnerLeaseStore. The upsert reports
// through xmax whether the row existed (0 = inserted).
func (s *Store) RenewOwnerLease(ctx context.Context, p store.RenewOwnerLeaseParams) (bool, error) {
	var inserted bool
	err := s.pool.QueryRow(ctx, `INSERT INTO owner_leases (instance_id, expires_at) VALUES ($1, $2)
		ON CONFLICT (instance_id) DO UPDATE SET expires_at = GREATEST(owner_leases.expires_at, excluded.expires_at)
		RETURNING xmax = 0`, p.Instance, micro(p.ExpiresAt)).Scan(&inserted)
	if err != nil {
		return false, mapErr("renew owner lease", err)
	}
	return !inserted, nil
}

// ReleaseOwnerLease implements store.OwnerLeaseStore.
func (s *Store) ReleaseOwnerLease(ctx context.Context, instance string, now time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE owner_leases SET expires_at = LEAST(expires_at, $2) WHERE instance_id = $1`, instance, micro(now))
	return mapErr("release owner lease", err)
}

// ExpiredOwnerLeases implements store.OwnerLeaseStore.
func (s *Store) ExpiredOwnerLeases(ctx context.Context, now time.Time, except string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT instance_id FROM owner_leases WHERE expires_at <= $1 AND instance_id <> $2 ORDER BY instance_id`, micro(now), except)
	if err != nil {
		return nil, mapErr("expired owner leases", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return ids, mapErr("expired owner leases", err)
}

// TakeOverOwnerLease implements store.OwnerLeaseStore.
func (s *Store) TakeOverOwnerLease(ctx context.Context, p store.TakeOverOwnerLeaseParams) (bool, []string, error) {
	return storeutil.TakeOverOwnerLease(func(f func(pgx.Tx) error) error { return s.tx(ctx, f) },
		func(tx pgx.Tx) (bool, error) {
			tag, err := tx.Exec(ctx, `DELETE FROM owner_leases WHERE instance_id = $1 AND expires_at <= $2`, p.From, micro(p.Now))
			return tag.RowsAffected() > 0, mapErr("take over owner lease", err)
		},
		func(tx pgx.Tx) ([]string, error) {
			rows, err := tx.Query(ctx, `UPDATE agent_owners SET instance_id = $1 WHERE instance_id = $2 RETURNING agent_id`, p.To, p.From)
			if err != nil {
				return nil, mapErr("take over owned agents", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			return ids, mapErr("take over owned agents", err)
		})
}

// SetAgentOwner implements store.OwnerLeaseStore.
func (s *Store) SetAgentOwner(ctx context.Context, p store.SetAgentOwnerParams) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO agent_owners (agent_id, instance_id, heartbeat_at) VALUES ($1, $2, $3)
		ON CONFLICT (agent_id) DO UPDATE SET instance_id = excluded.instance_id, heartbeat_at = excluded.heartbeat_at
		WHERE agent_owners.heartbeat_at <= excluded.heartbeat_at`, p.AgentID, p.Instance, micro(p.HeartbeatAt))
	if err != nil {
		return false, mapErr("set agent owner", err)
	}
	return tag.RowsAffected() > 0, nil
}

// AgentOwner implements store.OwnerLeaseStore.
func (s *Store) AgentOwner(ctx context.Context, agentID string) (string, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT instance_id FROM agent_owners WHERE agent_id = $1`, agentID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return id, mapErr("agent owner", err)
}
