package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/store"
	"github.com/rollcall/rollcall/internal/store/internal/storeutil"
	"github.com/rollcall/rollcall/internal/store/sqlite/internal/dbsqlc"
)

// Intake (design: Hooks): hooks and their deliveries over the generated
// queries (sql/queries.sql).

func hookFrom(r dbsqlc.Hook) (domain.Hook, error) {
	f, err := storeutil.DecodeFilter(r.Filter)
	if err != nil {
		return domain.Hook{}, err
	}
	return domain.Hook{ID: r.ID, OwnerID: r.OwnerID, AgentID: r.AgentID, Kind: r.Kind, Queue: r.Queue, Filter: f,
		TitleTemplate: r.TitleTemplate, KindLabel: r.KindLabel, Secret: r.Secret,
		CreatedAt: fromMicros(r.CreatedAt), UpdatedAt: fromMicros(r.UpdatedAt)}, nil
}

func deliveryFrom(r dbsqlc.HookDelivery) domain.HookDelivery {
	return domain.HookDelivery{ID: r.ID, HookID: r.HookID, Key: r.Key, Event: r.Event, Action: r.Action,
		Outcome: r.Outcome, Reason: r.Reason, TodoID: r.TodoID, ReceivedAt: fromMicros(r.ReceivedAt)}
}

// CreateHook implements store.HookStore.
func (s *Store) CreateHook(ctx context.Context, p store.CreateHookParams) error {
	h := p.Hook
	return s.write(ctx, func(tx *sql.Tx) error {
		err := s.txq(tx).InsertHook(ctx, dbsqlc.InsertHookParams{ID: h.ID, OwnerID: h.OwnerID, AgentID: h.AgentID,
			Kind: h.Kind, Queue: h.Queue, Filter: storeutil.EncodeFilter(h.Filter), TitleTemplate: h.TitleTemplate,
			KindLabel: h.KindLabel, Secret: h.Secret, CreatedAt: micros(h.CreatedAt), UpdatedAt: micros(h.UpdatedAt)})
		if err != nil {
			return mapErr("create hook", err)
		}
		_, err = s.appendAudit(ctx, tx, h.CreatedAt, p.Audit)
		return err
	})
}

// GetHook implements store.HookStore.
func (s *Store) GetHook(ctx context.Context, id string) (domain.Hook, error) {
	r, err := s.rq.GetHook(ctx, id)
	h, err := storeutil.OneErr(r, err, hookFrom)
	return h, mapErr("get hook", err)
}

// ListHooks implements store.HookStore: oldest first.
func (s *Store) ListHooks(ctx context.Context, p store.ListHooksParams) ([]domain.Hook, error) {
	rows, err := s.rq.ListHooks(ctx, dbsqlc.ListHooksParams{OwnerID: p.OwnerID, AgentID: p.AgentID})
	out, err := storeutil.AllErr(rows, err, hookFrom)
	return out, mapErr("list hooks", err)
}

// RotateHookSecret implements store.HookStore.
func (s *Store) RotateHookSecret(ctx context.Context, p store.RotateHookSecretParams) (domain.Hook, error) {
	var h domain.Hook
	err := s.write(ctx, func(tx *sql.Tx) error {
		r, err := s.txq(tx).RotateHookSecret(ctx, dbsqlc.RotateHookSecretParams{ID: p.ID, Secret: p.Secret, Now: micros(p.Now)})
		if err != nil {
			return mapErr("rotate hook secret", err)
		}
		if h, err = hookFrom(r); err != nil {
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
		n, err := s.txq(tx).DeleteHook(ctx, p.ID)
		if err != nil {
			return mapErr("delete hook", err)
		}
		if n == 0 {
			return fmt.Errorf("delete hook: %w", domain.ErrNotFound)
		}
		_, err = s.appendAudit(ctx, tx, p.Now, p.Audit)
		return err
	})
}

// RecordDelivery implements store.HookStore in one write transaction: the
// single writer serialises racing redeliveries, so the key check and the
// insert cannot interleave.
func (s *Store) RecordDelivery(ctx context.Context, p store.RecordDeliveryParams) (store.RecordDeliveryResult, error) {
	var res store.RecordDeliveryResult
	err := s.write(ctx, func(tx *sql.Tx) error {
		q := s.txq(tx)
		d := p.Delivery
		if d.Key != "" {
			prev, err := q.DeliveryByKey(ctx, dbsqlc.DeliveryByKeyParams{HookID: d.HookID, Key: d.Key})
			if err == nil {
				res = store.RecordDeliveryResult{Delivery: deliveryFrom(prev), Duplicate: true}
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
		err := q.InsertDelivery(ctx, dbsqlc.InsertDeliveryParams{ID: d.ID, HookID: d.HookID, Key: d.Key, Event: d.Event,
			Action: d.Action, Outcome: d.Outcome, Reason: d.Reason, TodoID: d.TodoID, ReceivedAt: micros(d.ReceivedAt)})
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

// ListDeliveries implements store.HookStore: newest first, Limit <= 0
// means 20.
func (s *Store) ListDeliveries(ctx context.Context, p store.ListDeliveriesParams) ([]domain.HookDelivery, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.rq.ListDeliveries(ctx, dbsqlc.ListDeliveriesParams{HookID: p.HookID, Limit: int64(limit)})
	return storeutil.All(rows, mapErr("list deliveries", err), deliveryFrom)
}

// PruneDeliveries implements store.HookStore: each batch is one write
// transaction, so other writers wait at most one batch.
func (s *Store) PruneDeliveries(ctx context.Context, p store.PruneDeliveriesParams) (int64, error) {
	return storeutil.Batches(ctx, p.Batch, store.DefaultPruneBatch, func(lim int) (n int64, err error) {
		err = s.write(ctx, func(tx *sql.Tx) error {
			n, err = s.txq(tx).PruneDeliveries(ctx, dbsqlc.PruneDeliveriesParams{Before: micros(p.Before), Lim: int64(lim)})
			return mapErr("prune deliveries", err)
		})
		return n, err
	})
}

// ResealHookSecret implements store.HookStore.
func (s *Store) ResealHookSecret(ctx context.Context, p store.ResealHookSecretParams) (bool, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) (err error) {
		n, err = s.txq(tx).ResealHookSecret(ctx, dbsqlc.ResealHookSecretParams{ID: p.ID, Old: p.Old, Secret: p.New})
		return mapErr("reseal hook secret", err)
	})
	return n == 1, err
}
