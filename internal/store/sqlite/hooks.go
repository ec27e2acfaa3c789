package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
)

// Intake (DESIGN.md §3.9): hooks and their deliveries.

const hookCols = `id, owner_id, agent_id, kind, queue, filter, title_template, kind_label, secret, created_at, updated_at`

func scanHook(sc scanner) (domain.Hook, error) {
	var h domain.Hook
	var filter string
	var created, updated int64
	if err := sc.Scan(&h.ID, &h.OwnerID, &h.AgentID, &h.Kind, &h.Queue, &filter, &h.TitleTemplate,
		&h.KindLabel, &h.Secret, &created, &updated); err != nil {
		return domain.Hook{}, err
	}
	f, err := storeutil.DecodeFilter(filter)
	if err != nil {
		return domain.Hook{}, err
	}
	h.Filter, h.CreatedAt, h.UpdatedAt = f, fromMicros(created), fromMicros(updated)
	return h, nil
}

// CreateHook implements store.HookStore.
func (s *Store) CreateHook(ctx context.Context, p store.CreateHookParams) error {
	h := p.Hook
	return s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO hooks (`+hookCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			h.ID, h.OwnerID, h.AgentID, h.Kind, h.Queue, storeutil.EncodeFilter(h.Filter), h.TitleTemplate,
			h.KindLabel, h.Secret, micros(h.CreatedAt), micros(h.UpdatedAt))
		if err != nil {
			return mapErr("create hook", err)
		}
		_, err = s.appendAudit(ctx, tx, h.CreatedAt, p.Audit)
		return err
	})
}

// GetHook implements store.HookStore.
func (s *Store) GetHook(ctx context.Context, id string) (domain.Hook, error) {
	h, err := scanHook(s.readRow(ctx, `SELECT `+hookCols+` FROM hooks WHERE id = ?`, id))
	if err != nil {
		return domain.Hook{}, mapErr("get hook", err)
	}
	return h, nil
}

// ListHooks implements store.HookStore: oldest first.
func (s *Store) ListHooks(ctx context.Context, p store.ListHooksParams) ([]domain.Hook, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+hookCols+` FROM hooks
		WHERE (?1 = '' OR owner_id = ?1) AND (?2 = '' OR agent_id = ?2) ORDER BY created_at, id`, p.OwnerID, p.AgentID)
	if err != nil {
		return nil, mapErr("list hooks", err)
	}
	defer rows.Close()
	out := []domain.Hook{}
	for rows.Next() {
		h, err := scanHook(rows)
		if err != nil {
			return nil, mapErr("list hooks", err)
		}
		out = append(out, h)
	}
	return out, mapErr("list hooks", rows.Err())
}

// RotateHookSecret implements store.HookStore.
func (s *Store) RotateHookSecret(ctx context.Context, p store.RotateHookSecretParams) (domain.Hook, error) {
	var h domain.Hook
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		h, err = scanHook(tx.QueryRowContext(ctx, `UPDATE hooks SET secret = ?2, updated_at = ?3 WHERE id = ?1 RETURNING `+hookCols,
			p.ID, p.Secret, micros(p.Now)))
		if err != nil {
			return mapErr("rotate hook secret", err)
		}
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return h, err
}

// DeleteHook implements store.HookStore.
func (s *Store) DeleteHook(ctx context.Context, p store.DeleteHookParams) error {
	return s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM hooks WHERE id = ?`, p.ID)
		if err != nil {
			return mapErr("delete hook", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("delete hook: %w", domain.ErrNotFound)
		}
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
}

const deliveryCols = `id, hook_id, key, event, action, outcome, reason, todo_id, received_at`

func scanDelivery(sc scanner) (domain.HookDelivery, error) {
	var d domain.HookDelivery
	var at int64
	if err := sc.Scan(&d.ID, &d.HookID, &d.Key, &d.Event, &d.Action, &d.Outcome, &d.Reason, &d.TodoID, &at); err != nil {
		return domain.HookDelivery{}, err
	}
	d.ReceivedAt = fromMicros(at)
	return d, nil
}

// RecordDelivery implements store.HookStore in one write transaction: the
// single writer serialises racing redeliveries, so the key check and the
// insert cannot interleave.
func (s *Store) RecordDelivery(ctx context.Context, p store.RecordDeliveryParams) (store.RecordDeliveryResult, error) {
	var res store.RecordDeliveryResult
	err := s.write(ctx, func(tx *sql.Tx) error {
		d := p.Delivery
		if d.Key != "" {
			prev, err := scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM hook_deliveries
				WHERE hook_id = ? AND key = ?`, d.HookID, d.Key))
			if err == nil {
				res = store.RecordDeliveryResult{Delivery: prev, Duplicate: true}
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return mapErr("record delivery", err)
			}
		}
		if p.Todo != nil {
			t, created, err := s.createTodoTx(ctx, tx, *p.Todo)
			if err != nil {
				return err
			}
			res.Todo, res.Created = t, created
			d.TodoID = t.ID
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO hook_deliveries (`+deliveryCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, d.HookID, d.Key, d.Event, d.Action, d.Outcome, d.Reason, d.TodoID, micros(d.ReceivedAt))
		if err != nil {
			return mapErr("record delivery", err)
		}
		res.Delivery = d
		return nil
	})
	if err != nil {
		return store.RecordDeliveryResult{}, err
	}
	return res, nil
}

// ListDeliveries implements store.HookStore: newest first.
func (s *Store) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) ([]domain.HookDelivery, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+deliveryCols+` FROM hook_deliveries
		WHERE hook_id = ? ORDER BY received_at DESC, id DESC LIMIT ?`, p.HookID, limit)
	if err != nil {
		return nil, mapErr("list deliveries", err)
	}
	defer rows.Close()
	out := []domain.HookDelivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, mapErr("list deliveries", err)
		}
		out = append(out, d)
	}
	return out, mapErr("list deliveries", rows.Err())
}
