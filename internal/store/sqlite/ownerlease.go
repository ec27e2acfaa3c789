package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// Owner leases (store.OwnerLeaseStore) on SQLite: every write runs in the
// one BEGIN IMMEDIATE write transaction, so racing callers are serialised
// and the conditional delete of a take-over is won by exactly one.

// RenewOwnerLease implements store.OwnerLeaseStore: an update, else an insert.
func (s *Store) RenewOwnerLease(ctx context.Context, p store.RenewOwnerLeaseParams) (bool, error) {
	held := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		c := s.in(tx)
		res, err := c.ExecContext(ctx, `UPDATE owner_leases SET expires_at = max(expires_at, ?) WHERE instance_id = ?`, micros(p.ExpiresAt), p.Instance)
		if err != nil {
			return mapErr("renew owner lease", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			held = true
			return nil
		}
		_, err = c.ExecContext(ctx, `INSERT INTO owner_leases (instance_id, expires_at) VALUES (?, ?)`, p.Instance, micros(p.ExpiresAt))
		return mapErr("acquire owner lease", err)
	})
	return held, err
}

// ReleaseOwnerLease implements store.OwnerLeaseStore.
func (s *Store) ReleaseOwnerLease(ctx context.Context, instance string, now time.Time) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := s.in(tx).ExecContext(ctx, `UPDATE owner_leases SET expires_at = min(expires_at, ?) WHERE instance_id = ?`, micros(now), instance)
		return mapErr("release owner lease", err)
	})
}

// ExpiredOwnerLeases implements store.OwnerLeaseStore.
func (s *Store) ExpiredOwnerLeases(ctx context.Context, now time.Time, except string) ([]string, error) {
	rows, err := s.read().QueryContext(ctx, `SELECT instance_id FROM owner_leases WHERE expires_at <= ? AND instance_id <> ? ORDER BY instance_id`, micros(now), except)
	if err != nil {
		return nil, mapErr("expired owner leases", err)
	}
	ids, err := scanStrings(rows)
	return ids, mapErr("expired owner leases", err)
}

// TakeOverOwnerLease implements store.OwnerLeaseStore.
func (s *Store) TakeOverOwnerLease(ctx context.Context, p store.TakeOverOwnerLeaseParams) (bool, []string, error) {
	return storeutil.TakeOverOwnerLease(func(f func(*sql.Tx) error) error { return s.write(ctx, f) },
		func(tx *sql.Tx) (bool, error) {
			res, err := s.in(tx).ExecContext(ctx, `DELETE FROM owner_leases WHERE instance_id = ? AND expires_at <= ?`, p.From, micros(p.Now))
			if err != nil {
				return false, mapErr("take over owner lease", err)
			}
			n, _ := res.RowsAffected()
			return n > 0, nil
		},
		func(tx *sql.Tx) ([]string, error) {
			rows, err := s.in(tx).QueryContext(ctx, `UPDATE agent_owners SET instance_id = ? WHERE instance_id = ? RETURNING agent_id`, p.To, p.From)
			if err != nil {
				return nil, mapErr("take over owned agents", err)
			}
			ids, err := scanStrings(rows)
			return ids, mapErr("take over owned agents", err)
		})
}

// SetAgentOwner implements store.OwnerLeaseStore.
func (s *Store) SetAgentOwner(ctx context.Context, p store.SetAgentOwnerParams) (bool, error) {
	wrote := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.in(tx).ExecContext(ctx, `INSERT INTO agent_owners (agent_id, instance_id, heartbeat_at) VALUES (?, ?, ?)
			ON CONFLICT (agent_id) DO UPDATE SET instance_id = excluded.instance_id, heartbeat_at = excluded.heartbeat_at
			WHERE agent_owners.heartbeat_at <= excluded.heartbeat_at`, p.AgentID, p.Instance, micros(p.HeartbeatAt))
		if err != nil {
			return mapErr("set agent owner", err)
		}
		n, _ := res.RowsAffected()
		wrote = n > 0
		return nil
	})
	return wrote, err
}

// AgentOwner implements store.OwnerLeaseStore.
func (s *Store) AgentOwner(ctx context.Context, agentID string) (string, error) {
	var id string
	err := s.read().QueryRowContext(ctx, `SELECT instance_id FROM agent_owners WHERE agent_id = ?`, agentID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, mapErr("agent owner", err)
}

// scanStrings reads rows of one text column (ids) and closes rows.
func scanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	return storeutil.Collect(rows, storeutil.ScanString)
}
