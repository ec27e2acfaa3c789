package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/postgres/internal/dbsqlc"
)

// Intake (design: Hooks): hooks and their deliveries over the generated
// queries (sql/queries.sql).

// hookFrom turns a row into a hook, every time in UTC.
func hookFrom(r dbsqlc.Hook) (domain.Hook, error) {
	f, err := storeutil.DecodeFilter(r.Filter)
	if err != nil {
		return domain.Hook{}, err
	}
	return domain.Hook{ID: r.ID, OwnerID: r.OwnerID, AgentID: r.AgentID, Kind: r.Kind, Queue: r.Queue, Filter: f,
		TitleTemplate: r.TitleTemplate, KindLabel: r.KindLabel, Secret: r.Secret,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}, nil
}

func deliveryFrom(r dbsqlc.HookDelivery) domain.HookDelivery {
	return domain.HookDelivery{ID: r.ID, HookID: r.HookID, Key: r.Key, Event: r.Event, Action: r.Action,
		Outcome: r.Outcome, Reason: r.Reason, TodoID: r.TodoID, ReceivedAt: r.ReceivedAt.UTC()}
}

// CreateHook implements store.HookStore.
func (s *Store) CreateHook(ctx context.Context, p store.CreateHookParams) error {
	h := p.Hook
	return s.tx(ctx, func(tx pgx.Tx) error {
		err := dbsqlc.New(tx).InsertHook(ctx, dbsqlc.InsertHookParams{ID: h.ID, OwnerID: h.OwnerID, AgentID: h.AgentID,
			Kind: h.Kind, Queue: h.Queue, Filter: storeutil.EncodeFilter(h.Filter), TitleTemplate: h.TitleTemplate,
			KindLabel: h.KindLabel, Secret: h.Secret, CreatedAt: micro(h.CreatedAt), UpdatedAt: micro(h.UpdatedAt)})
		if err != nil {
			return mapErr("create hook", err)
		}
		_, err = appendAudit(ctx, tx, h.CreatedAt, p.Audit)
		return err
	})
}

// GetHook implements store.HookStore.
func (s *Store) GetHook(ctx context.Context, id string) (domain.Hook, error) {
	r, err := s.q.GetHook(ctx, id)
	h, err := storeutil.OneErr(r, err, hookFrom)
	return h, mapErr("get hook", err)
}

// ListHooks implements store.HookStore: oldest first.
func (s *Store) ListHooks(ctx context.Context, p store.ListHooksParams) ([]domain.Hook, error) {
	rows, err := s.q.ListHooks(ctx, dbsqlc.ListHooksParams{OwnerID: p.OwnerID, AgentID: p.AgentID})
	out, err := storeutil.AllErr(rows, err, hookFrom)
	return out, mapErr("list hooks", err)
}

// RotateHookSecret implements store.HookStore.
func (s *Store) RotateHookSecret(ctx context.Context, p store.RotateHookSecretParams) (domain.Hook, error) {
	var h domain.Hook
	err := s.tx(ctx, func(tx pgx.Tx) error {
		r, err := dbsqlc.New(tx).RotateHookSecret(ctx, dbsqlc.RotateHookSecretParams{ID: p.ID, Secret: p.Secret, Now: micro(p.Now)})
		if err != nil {
			return mapErr("rotate hook secret", err)
		}
		if h, err = hookFrom(r); err != nil {
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
		n, err := dbsqlc.New(tx).DeleteHook(ctx, p.ID)
		if err != nil {
			return mapErr("delete hook", err)
		}
		if n == 0 {
			return fmt.Errorf("delete hook: %w", domain.ErrNotFound)
		}
		_, err = appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
}

// RecordDelivery implements store.HookStore in one transaction. The
// delivery row is inserted first: ON CONFLICT on (hook_id, key) makes a
// racing redelivery wait for the first one and then find its row, so only
// one of them creates a todo.
func (s *Store) RecordDelivery(ctx context.Context, p store.RecordDeliveryParams) (store.RecordDeliveryResult, error) {
	var res store.RecordDeliveryResult
	err := s.tx(ctx, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		d := p.Delivery
		_, err := q.InsertDelivery(ctx, dbsqlc.InsertDeliveryParams{ID: d.ID, HookID: d.HookID, Key: d.Key,
			Event: d.Event, Action: d.Action, Outcome: d.Outcome, Reason: d.Reason, ReceivedAt: micro(d.ReceivedAt)})
		if errors.Is(err, pgx.ErrNoRows) {
			prev, err := q.DeliveryByKey(ctx, dbsqlc.DeliveryByKeyParams{HookID: d.HookID, Key: d.Key})
			if err != nil {
				return mapErr("record delivery", err)
			}
			res = store.RecordDeliveryResult{Delivery: deliveryFrom(prev), Duplicate: true}
			return nil
		}
		if err != nil {
			return mapErr("record delivery", err)
		}
		if p.Todo != nil {
			t, created, err := createTodoQ(ctx, q, *p.Todo)
			if err != nil {
				return err
			}
			res.Todo, res.Created = t, created
			d.TodoID = t.ID
			if err := q.SetDeliveryTodo(ctx, dbsqlc.SetDeliveryTodoParams{ID: d.ID, TodoID: d.TodoID}); err != nil {
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

// ListDeliveries implements store.HookStore: newest first, Limit <= 0
// means 20.
func (s *Store) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) ([]domain.HookDelivery, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.q.ListDeliveries(ctx, dbsqlc.ListDeliveriesParams{HookID: p.HookID, Limit: int32(min(limit, 1<<31-1))})
	return storeutil.All(rows, mapErr("list deliveries", err), deliveryFrom)
}

// PruneDeliveries implements store.HookStore: each batch is one statement
// in its own implicit transaction.
func (s *Store) PruneDeliveries(ctx context.Context, p store.PruneDeliveriesParams) (int64, error) {
	return storeutil.Batches(ctx, p.Batch, store.DefaultPruneBatch, func(lim int) (int64, error) {
		n, err := s.q.PruneDeliveries(ctx, dbsqlc.PruneDeliveriesParams{Before: micro(p.Before), Lim: int32(min(lim, 1<<31-1))})
		return n, mapErr("prune deliveries", err)
	})
}

// CountFailures implements store.FailureCounter with one upsert
// (design: Limits shared by instances).
func (s *Store) CountFailures(ctx context.Context, p store.CountFailuresParams) ([]store.FailureWindow, error) {
	rows, err := s.q.CountFailures(ctx, dbsqlc.CountFailuresParams{Now: micro(p.Now), Keys: p.Keys, Expired: micro(p.Now.Add(-p.Window))})
	if err != nil {
		return nil, mapErr("count failures", err)
	}
	by := make(map[string]dbsqlc.RateWindow, len(rows))
	for _, r := range rows {
		by[r.Key] = r
	}
	out := make([]store.FailureWindow, len(p.Keys))
	for i, k := range p.Keys {
		r := by[k]
		out[i] = store.FailureWindow{Key: k, Start: r.WindowStart.UTC(), Count: int(r.Count)}
	}
	return out, nil
}

// PruneRateWindows implements store.FailureCounter.
func (s *Store) PruneRateWindows(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.q.PruneRateWindows(ctx, micro(before))
	return n, mapErr("prune rate windows", err)
}

// ResealHookSecret implements store.HookStore.
func (s *Store) ResealHookSecret(ctx context.Context, p store.ResealHookSecretParams) (bool, error) {
	n, err := s.q.ResealHookSecret(ctx, dbsqlc.ResealHookSecretParams{ID: p.ID, Old: p.Old, Secret: p.New})
	return n == 1, mapErr("reseal hook secret", err)
}
