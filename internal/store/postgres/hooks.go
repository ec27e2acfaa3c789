package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// Intake (DESIGN.md §3.9): hooks and their deliveries.

const hookCols = `id, owner_id, agent_id, kind, queue, filter, title_template, kind_label, secret, created_at, updated_at`

func scanHook(row pgx.Row) (domain.Hook, error) {
	var h domain.Hook
	var filter string
	if err := row.Scan(&h.ID, &h.OwnerID, &h.AgentID, &h.Kind, &h.Queue, &filter, &h.TitleTemplate,
		&h.KindLabel, &h.Secret, &h.CreatedAt, &h.UpdatedAt); err != nil {
		return domain.Hook{}, err
	}
	f, err := storeutil.DecodeFilter(filter)
	if err != nil {
		return domain.Hook{}, err
	}
	h.Filter, h.CreatedAt, h.UpdatedAt = f, h.CreatedAt.UTC(), h.UpdatedAt.UTC()
	return h, nil
}

// CreateHook implements store.HookStore.
func (s *Store) CreateHook(ctx context.Context, p store.CreateHookParams) error {
	h := p.Hook
	return s.tx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO hooks (`+hookCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
			h.ID, h.OwnerID, h.AgentID, h.Kind, h.Queue, storeutil.EncodeFilter(h.Filter), h.TitleTemplate,
			h.KindLabel, h.Secret, micro(h.CreatedAt), micro(h.UpdatedAt))
		if err != nil {
			return mapErr("create hook", err)
		}
		_, err = appendAudit(ctx, tx, h.CreatedAt, p.Audit)
		return err
	})
}

// GetHook implements store.HookStore.
func (s *Store) GetHook(ctx context.Context, id string) (domain.Hook, error) {
	h, err := scanHook(s.pool.QueryRow(ctx, `SELECT `+hookCols+` FROM hooks WHERE id = $1`, id))
	if err != nil {
		return domain.Hook{}, mapErr("get hook", err)
	}
	return h, nil
}

// ListHooks implements store.HookStore: oldest first.
func (s *Store) ListHooks(ctx context.Context, p store.ListHooksParams) ([]domain.Hook, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+hookCols+` FROM hooks
		WHERE ($1 = '' OR owner_id = $1) AND ($2 = '' OR agent_id = $2) ORDER BY created_at, id`, p.OwnerID, p.AgentID)
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
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var err error
		h, err = scanHook(tx.QueryRow(ctx, `UPDATE hooks SET secret = $2, updated_at = $3 WHERE id = $1 RETURNING `+hookCols,
			p.ID, p.Secret, micro(p.Now)))
		if err != nil {
			return mapErr("rotate hook secret", err)
		}
		_, err = appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
	return h, err
}

// DeleteHook implements store.HookStore.
func (s *Store) DeleteHook(ctx context.Context, p store.DeleteHookParams) error {
	return s.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM hooks WHERE id = $1`, p.ID)
		if err != nil {
			return mapErr("delete hook", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("delete hook: %w", domain.ErrNotFound)
		}
		_, err = appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
}

const deliveryCols = `id, hook_id, key, event, action, outcome, reason, todo_id, received_at`

func scanDelivery(row pgx.Row) (domain.HookDelivery, error) {
	var d domain.HookDelivery
	if err := row.Scan(&d.ID, &d.HookID, &d.Key, &d.Event, &d.Action, &d.Outcome, &d.Reason, &d.TodoID, &d.ReceivedAt); err != nil {
		return domain.HookDelivery{}, err
	}
	d.ReceivedAt = d.ReceivedAt.UTC()
	return d, nil
}

// RecordDelivery implements store.HookStore in one transaction. The
// delivery row is inserted first: ON CONFLICT on (hook_id, key) makes a
// racing redelivery wait for the first one and then find its row, so only
// one of them creates a todo.
func (s *Store) RecordDelivery(ctx context.Context, p store.RecordDeliveryParams) (store.RecordDeliveryResult, error) {
	var res store.RecordDeliveryResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		d := p.Delivery
		var id string
		err := tx.QueryRow(ctx, `INSERT INTO hook_deliveries (`+deliveryCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, '', $8)
			ON CONFLICT (hook_id, key) WHERE key <> '' DO NOTHING RETURNING id`,
			d.ID, d.HookID, d.Key, d.Event, d.Action, d.Outcome, d.Reason, micro(d.ReceivedAt)).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			prev, err := scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryCols+` FROM hook_deliveries
				WHERE hook_id = $1 AND key = $2`, d.HookID, d.Key))
			if err != nil {
				return mapErr("record delivery", err)
			}
			res = store.RecordDeliveryResult{Delivery: prev, Duplicate: true}
			return nil
		}
		if err != nil {
			return mapErr("record delivery", err)
		}
		if p.Todo != nil {
			t, created, err := createTodoQ(ctx, dbsqlc.New(tx), *p.Todo)
			if err != nil {
				return err
			}
			res.Todo, res.Created = t, created
			d.TodoID = t.ID
			if _, err := tx.Exec(ctx, `UPDATE hook_deliveries SET todo_id = $2 WHERE id = $1`, d.ID, d.TodoID); err != nil {
				return mapErr("record delivery", err)
			}
		}
		d.ReceivedAt = storeutil.Micro(d.ReceivedAt)
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
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryCols+` FROM hook_deliveries
		WHERE hook_id = $1 ORDER BY received_at DESC, id DESC LIMIT $2`, p.HookID, limit)
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
