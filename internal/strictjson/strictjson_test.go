package strictjson_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/strictjson"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "plain": "plain", "a/b": "a~1b", "a~b": "a~0b", "~/": "~0~1", "~1": "~01", "é/ü": "é~1ü",
	} {
		if got := strictjson.Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := strictjson.Member("/a", "b/c"); got != "/a/b~1c" {
		t.Errorf("Member = %q", got)
	}
}

type item struct {
	Name string `json:"name"`
}

type body struct {
	Title string          `json:"title"`
	Count uint8           `json:"count"`
	Items []item          `json:"items"`
	Free  json.RawMessage `json:"free"`
	At    *time.Time      `json:"at"`
}

// restCases are REST bodies with the error each gets (code "" = accepted);
// they seed FuzzDecode too.
var restCases = []struct {
	body    string
	code    domain.Code
	pointer string
	detail  string // exact
}{
	{`{"title":"t","items":[{"name":"a"}],"free":{"x":[1]}}`, "", "", ""},
	{`{"at":"2026-12-01T17:00:00Z","count":255}`, "", "", ""},
	{``, domain.CodeInvalidArgument, "", "the request body is empty; expected a JSON object"},
	{`{"title":`, domain.CodeInvalidArgument, "", "malformed JSON at byte offset 9: unexpected end of input"},
	{`{"x":1,}`, domain.CodeInvalidArgument, "", "malformed JSON at byte offset 8: invalid character '}' looking for beginning of object key string"},
	{"{\"title\":\"\xff\"}", domain.CodeInvalidArgument, "", "malformed JSON: invalid UTF-8 at byte offset 10"},
	{`{"title":"t"}x`, domain.CodeInvalidArgument, "", "unexpected data after the JSON value at byte offset 13; send exactly one JSON object"},
	{`[]`, domain.CodeInvalidArgument, "", "the body must be a JSON object, not an array"},
	{`null`, domain.CodeInvalidArgument, "", "the body must be a JSON object, not null"},
	{`{"tilte":"t"}`, domain.CodeUnknownMember, "/tilte", `unknown member "tilte"; known members: at, count, free, items, title`},
	{`{"items":[{"name":"a","x/y":1}]}`, domain.CodeUnknownMember, "/items/0/x~1y", `unknown member "x/y"; known members: name`},
	{`{"title":"a","title":"b"}`, domain.CodeInvalidArgument, "/title", `member "title" appears more than once`},
	{`{"free":{"a":1,"a":2}}`, domain.CodeInvalidArgument, "/free/a", `member "a" appears more than once`},
	{`{"title":["t"]}`, domain.CodeInvalidArgument, "/title", "expected a string at /title, got an array"},
	{`{"count":-1}`, domain.CodeInvalidArgument, "/count", "expected a non-negative integer in range, got -1"},
	{`{"count":256}`, domain.CodeInvalidArgument, "/count", "expected a non-negative integer in range, got 256"},
	{`{"count":1.5e3}`, domain.CodeInvalidArgument, "/count", "expected a non-negative integer in range, got 1.5e3"},
	{`{"at":"noon"}`, domain.CodeInvalidArgument, "/at", "at: want an RFC 3339 time such as 2026-12-01T17:00:00Z"},
}

// TestDecodeREST: each kind of error in its REST wording and pointer.
func TestDecodeREST(t *testing.T) {
	for _, tc := range restCases {
		var v body
		de := strictjson.Decode([]byte(tc.body), &v, strictjson.REST)
		if tc.code == "" {
			if de != nil {
				t.Errorf("%s: %v", tc.body, de)
			}
			continue
		}
		if de == nil || de.Code != tc.code || de.Pointer != tc.pointer || de.Detail != tc.detail {
			t.Errorf("%s: got %+v, want {%s %q at %q}", tc.body, de, tc.code, tc.detail, tc.pointer)
		}
	}
	if !strictjson.WholeDocument(strictjson.Decode([]byte(` null`), &body{}, strictjson.REST)) {
		t.Error("null is not reported about the whole document")
	}
}

// TestObject: the gateway's and a tool's wording of the same faults.
func TestObject(t *testing.T) {
	known := []string{"op", "d"}
	for _, tc := range []struct {
		body             string
		gateway, gwPtr   string
		tool             string
		toolCode, gwCode domain.Code
	}{
		{`{"op":"x","d":{"a":1,"a":1}}`, "", "", "", "", ""},
		{`{"op":"x","zz":1}`, `unknown member "zz" (known: op, d)`, "/zz", `t takes no argument "zz" (it takes [op d])`, domain.CodeInvalidArgument, domain.CodeUnknownMember},
		{`{"op":"x","op":"y"}`, `member "op" appears twice`, "/op", `argument "op" appears more than once`, domain.CodeInvalidArgument, domain.CodeInvalidArgument},
		{`[1]`, "must be a JSON object", "", "the arguments of t must be a JSON object", domain.CodeInvalidArgument, domain.CodeInvalidArgument},
		{`{"op":tru}`, "malformed JSON", "/op", "the arguments of t are not a valid JSON object", domain.CodeInvalidArgument, domain.CodeInvalidArgument},
		{`{"op":"x"} {}`, "data after the JSON object", "", "the arguments of t are not a valid JSON object", domain.CodeInvalidArgument, domain.CodeInvalidArgument},
	} {
		var got []string
		each := func(name string, v []byte) error { got = append(got, name+"="+string(v)); return nil }
		gwErr := strictjson.Object([]byte(tc.body), strictjson.Gateway, "", known, each)
		toolErr := strictjson.Object([]byte(tc.body), strictjson.Tool("t"), "", known, each)
		if tc.gateway == "" {
			if gwErr != nil || toolErr != nil || strings.Join(got, " ") != `op="x" d={"a":1,"a":1} op="x" d={"a":1,"a":1}` {
				t.Errorf("%s: %v %v %q", tc.body, gwErr, toolErr, got)
			}
			continue
		}
		var g, m *domain.Error
		if !errors.As(gwErr, &g) || g.Detail != tc.gateway || g.Pointer != tc.gwPtr || g.Code != tc.gwCode {
			t.Errorf("%s: gateway %+v, want %q at %q", tc.body, gwErr, tc.gateway, tc.gwPtr)
		}
		if !errors.As(toolErr, &m) || m.Detail != tc.tool || m.Code != tc.toolCode {
			t.Errorf("%s: tool %+v, want %q", tc.body, toolErr, tc.tool)
		}
	}
}

// TestHeartbeatTexts: the texts package liveness takes from here.
func TestHeartbeatTexts(t *testing.T) {
	hb := strictjson.Heartbeat
	if e := hb.Malformed([]byte(`{"state":"online",}`)); e == nil || e.Detail != "malformed JSON at byte offset 18: invalid character '}' looking for beginning of object key string" {
		t.Errorf("Malformed = %v", e)
	}
	if e := hb.Malformed([]byte(` {"state":"online"} `)); e != nil {
		t.Errorf("a well-formed body is malformed: %v", e)
	}
	long := strings.Repeat("k", 70)
	if e := hb.Unknown(long, "/"+long, nil); e.Code != domain.CodeUnknownMember || e.Detail != `member "`+strings.Repeat("k", 64)+`…" is not part of agent_heartbeat.v1 here` || e.Pointer != "/"+long {
		t.Errorf("Unknown = %+v", e)
	}
	if e := hb.Duplicate("state", "/state"); e.Detail != `member "state" appears twice in one object` || e.Pointer != "/state" {
		t.Errorf("Duplicate = %+v", e)
	}
}
