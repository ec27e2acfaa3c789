package httpapi

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
)

type inner struct {
	Name string     `json:"name"`
	Tags []string   `json:"tags,omitempty"`
	When *time.Time `json:"when"`
}

type embedded struct {
	Note string `json:"note"`
}

type sample struct {
	embedded
	Title   string            `json:"title"`
	Count   int8              `json:"count"`
	Ratio   float64           `json:"ratio"`
	OK      *bool             `json:"ok"`
	Inner   inner             `json:"inner"`
	List    []inner           `json:"list"`
	Map     map[string]inner  `json:"map"`
	Free    json.RawMessage   `json:"free"`
	Any     any               `json:"any"`
	Skipped string            `json:"-"`
	Labels  map[string]string `json:"labels"`
	At      time.Time         `json:"at"`
	AtPtr   *time.Time        `json:"at_ptr"`
	Level   *slog.Level       `json:"level"` // an encoding.TextUnmarshaler
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, body string
		code       domain.Code // "" = success
		pointer    string
		detail     string // substring
	}{
		{name: "ok", body: `{"title":"t","count":3,"ok":true,"inner":{"name":"n","tags":["a"]},"list":[{"name":"x"}],"map":{"k":{"name":"v"}},"free":{"anything":[1,{"x":null}]},"any":[1],"note":"embedded","labels":{"a/b":"c"}}`},
		{name: "null is absent", body: `{"title":null,"inner":null,"ok":null}`},
		{name: "empty", body: "  ", code: domain.CodeInvalidArgument, detail: "empty"},
		{name: "malformed", body: `{"title": "t",}`, code: domain.CodeInvalidArgument, detail: "byte offset 15"},
		{name: "truncated", body: `{"title": "t"`, code: domain.CodeInvalidArgument, detail: "byte offset 13"},
		{name: "bad utf-8", body: "{\"title\": \"\xff\"}", code: domain.CodeInvalidArgument, detail: "invalid UTF-8 at byte offset 11"},
		{name: "trailing", body: `{"title":"t"} {}`, code: domain.CodeInvalidArgument, detail: "after the JSON value at byte offset 14"},
		{name: "not an object", body: `[1]`, code: domain.CodeInvalidArgument, detail: "the body must be a JSON object, not an array"},
		{name: "null body", body: ` null `, code: domain.CodeInvalidArgument, detail: "the body must be a JSON object, not null"},
		{name: "number body", body: `0`, code: domain.CodeInvalidArgument, detail: "the body must be a JSON object, not a number"},
		{name: "string body", body: `"{}"`, code: domain.CodeInvalidArgument, detail: "the body must be a JSON object, not a string"},
		{name: "time ok", body: `{"at":"2026-12-01T17:00:00Z","at_ptr":"2026-12-01T17:00:00+01:00"}`},
		{name: "time null", body: `{"at_ptr":null}`},
		{name: "time word", body: `{"at":"yesterday"}`, code: domain.CodeInvalidArgument, pointer: "/at", detail: "at: want an RFC 3339 time such as 2026-12-01T17:00:00Z"},
		{name: "time number", body: `{"at_ptr":1}`, code: domain.CodeInvalidArgument, pointer: "/at_ptr", detail: "at_ptr: want an RFC 3339 time"},
		{name: "time bad month", body: `{"at_ptr":"2026-13-01T00:00:00Z"}`, code: domain.CodeInvalidArgument, pointer: "/at_ptr", detail: "want an RFC 3339 time"},
		{name: "time nested in list", body: `{"list":[{"name":"a","when":"soon"}]}`, code: domain.CodeInvalidArgument, pointer: "/list/0/when", detail: "list/0/when: want an RFC 3339 time"},
		{name: "time object", body: `{"at":{"y":2026}}`, code: domain.CodeInvalidArgument, pointer: "/at"},
		{name: "text unmarshaler", body: `{"level":"LOUD"}`, code: domain.CodeInvalidArgument, pointer: "/level", detail: "level: want a valid value"},
		{name: "text unmarshaler ok", body: `{"level":"warn"}`},
		{name: "text unmarshaler number", body: `{"level":3}`, code: domain.CodeInvalidArgument, pointer: "/level"},
		{name: "after a self-judged value", body: `{"at":"2026-12-01T17:00:00Z","extra":1}`, code: domain.CodeUnknownMember, pointer: "/extra"},
		{name: "unknown top", body: `{"title":"t","extra":1}`, code: domain.CodeUnknownMember, pointer: "/extra", detail: `unknown member "extra"`},
		{name: "unknown nested", body: `{"inner":{"name":"n","x":{"y":1}}}`, code: domain.CodeUnknownMember, pointer: "/inner/x"},
		{name: "unknown in list", body: `{"list":[{"name":"a"},{"name":"b","nam":"c"}]}`, code: domain.CodeUnknownMember, pointer: "/list/1/nam"},
		{name: "unknown in map value", body: `{"map":{"a/b~c":{"oops":1}}}`, code: domain.CodeUnknownMember, pointer: "/map/a~1b~0c/oops"},
		{name: "case differs", body: `{"Title":"t"}`, code: domain.CodeUnknownMember, pointer: "/Title"},
		{name: "json - field", body: `{"Skipped":"x"}`, code: domain.CodeUnknownMember, pointer: "/Skipped"},
		{name: "first unknown wins", body: `{"b":1,"a":2}`, code: domain.CodeUnknownMember, pointer: "/b"},
		{name: "free-form not walked", body: `{"free":{"extra":{"deep":[{"x":1}]}},"any":{"y":2}}`},
		{name: "duplicate", body: `{"title":"a","title":"b"}`, code: domain.CodeInvalidArgument, pointer: "/title", detail: "more than once"},
		{name: "wrong type", body: `{"title":1}`, code: domain.CodeInvalidArgument, pointer: "/title", detail: "expected a string at /title, got a number"},
		{name: "wrong type nested", body: `{"inner":{"tags":["a",true]}}`, code: domain.CodeInvalidArgument, pointer: "/inner/tags/1"},
		{name: "array for object", body: `{"inner":[]}`, code: domain.CodeInvalidArgument, pointer: "/inner"},
		{name: "not integer", body: `{"count":1.5}`, code: domain.CodeInvalidArgument, pointer: "/count"},
		{name: "int overflow", body: `{"count":300}`, code: domain.CodeInvalidArgument, pointer: "/count"},
		{name: "bool", body: `{"ok":"yes"}`, code: domain.CodeInvalidArgument, pointer: "/ok", detail: "expected a boolean"},
		{name: "map value type", body: `{"labels":{"a":1}}`, code: domain.CodeInvalidArgument, pointer: "/labels/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v sample
			de := decodeStrict([]byte(tt.body), &v)
			if tt.code == "" {
				if de != nil {
					t.Fatalf("decodeStrict(%s) = %v, want success", tt.body, de)
				}
				return
			}
			if de == nil {
				t.Fatalf("decodeStrict(%s) succeeded, want %s", tt.body, tt.code)
			}
			for _, leak := range []string{"parsing time", "UnmarshalJSON", "UnmarshalText", "Go value", "time.Time", "slog"} {
				if strings.Contains(de.Detail, leak) {
					t.Errorf("detail %q shows Go internals (%q)", de.Detail, leak)
				}
			}
			if de.Code != tt.code || de.Pointer != tt.pointer || !strings.Contains(de.Detail, tt.detail) {
				t.Fatalf("decodeStrict(%s) = {%s %q at %q}, want {%s …%q… at %q}", tt.body, de.Code, de.Detail, de.Pointer, tt.code, tt.detail, tt.pointer)
			}
		})
	}
}

func TestDecodeStrictValues(t *testing.T) {
	var v sample
	body := `{"title":"t","note":"n","free":{"a":1},"list":[{"name":"x"}],"count":-7}`
	if de := decodeStrict([]byte(body), &v); de != nil {
		t.Fatal(de)
	}
	if v.Title != "t" || v.Note != "n" || string(v.Free) != `{"a":1}` || len(v.List) != 1 || v.List[0].Name != "x" || v.Count != -7 {
		t.Fatalf("decoded %+v", v)
	}
}
