package wire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/rollcall/rollcall/api/wire"
)

// testdata/shapes.json holds, per type, the JSON of an empty and of a
// filled value as the definitions marshalled them when they lived in
// internal/app (written from verbatim copies of those definitions). The
// API's JSON must not change: not with the move, not later.
func TestJSONShapesUnchanged(t *testing.T) {
	data, err := os.ReadFile("testdata/shapes.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]struct{ Empty, Filled json.RawMessage }
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	types := []any{
		wire.VendInput{}, wire.HandoffInput{}, wire.VendResult{}, wire.UpdateInput{}, wire.RotateResult{},
		wire.PushInput{}, wire.TodoFilter{}, wire.AuditFilter{},
		wire.PresenceInput{}, wire.PresenceView{}, wire.AgentPresence{}, wire.HeldTodo{},
		wire.AgentRuntimeStatus{}, wire.BillingEvidence{}, wire.RuntimeInfo{}, wire.AdapterInfo{}, wire.Readiness{},
		wire.HookInput{}, wire.HookView{}, wire.HookSecretResult{},
		wire.PersonInput{}, wire.PersonUpdate{}, wire.PersonCreated{}, wire.TokenInput{}, wire.MintedToken{},
	}
	if len(types) != len(golden) {
		t.Errorf("%d types checked, %d in testdata/shapes.json", len(types), len(golden))
	}
	for _, v := range types {
		typ := reflect.TypeOf(v)
		t.Run(typ.Name(), func(t *testing.T) {
			want, ok := golden[typ.Name()]
			if !ok {
				t.Fatalf("no shape for %s in testdata/shapes.json", typ.Name())
			}
			same(t, "empty", v, want.Empty)
			filled := reflect.New(typ)
			fill(filled.Elem(), 0)
			same(t, "filled", filled.Interface(), want.Filled)
		})
	}
}

func same(t *testing.T, what string, v any, want json.RawMessage) {
	t.Helper()
	got, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var w bytes.Buffer
	if err := json.Compact(&w, want); err != nil {
		t.Fatal(err)
	}
	if string(got) != w.String() {
		t.Fatalf("%s: JSON changed\nnow: %s\nwas: %s", what, got, w.String())
	}
}

var stamp = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

// fill sets every exported field reachable from v to a value derived from
// its depth.
func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	switch {
	case v.Type() == reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(stamp.Add(time.Duration(depth) * time.Minute)))
		return
	case v.Type() == reflect.TypeOf(json.RawMessage(nil)):
		v.SetBytes([]byte(`{"n":1}`))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(3 + depth))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(3 + depth))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}
