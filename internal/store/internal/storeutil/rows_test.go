package storeutil

import (
	"errors"
	"strings"
	"testing"
)

// row is a one-row Scanner over fixed values.
type row []any

func (r row) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return errors.New("column count")
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *string:
			*d = r[i].(string)
		case *int64:
			*d = r[i].(int64)
		default:
			return errors.New("unsupported destination")
		}
	}
	return nil
}

type agentRow struct {
	ID         string
	OwnerID    string
	SelfInUsed int64
}

func TestScanRowFieldsInOrder(t *testing.T) {
	scan := ScanRow("id, owner_id,\n\tself_in_used", func(r agentRow) agentRow { return r })
	got, err := scan(row{"a1", "o1", int64(7)})
	if err != nil || got != (agentRow{ID: "a1", OwnerID: "o1", SelfInUsed: 7}) {
		t.Fatalf("scan = %+v, %v; want {a1 o1 7}", got, err)
	}
	if _, err := scan(row{"a1"}); err == nil {
		t.Fatal("a short row scanned without error")
	}
}

func TestScanRowRefusesDrift(t *testing.T) {
	for _, cols := range []string{"id, owner_id", "id, owner_id, self_in_used, extra", "id, self_in_used, owner_id"} {
		func() {
			defer func() {
				if p := recover(); p == nil || !strings.Contains(p.(string), "storeutil.ScanRow") {
					t.Errorf("columns %q: panic %v, want a storeutil.ScanRow panic", cols, p)
				}
			}()
			ScanRow(cols, func(r agentRow) agentRow { return r })
		}()
	}
}
