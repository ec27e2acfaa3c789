package strictjson

import (
	"bytes"
	"encoding"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/rollcall/rollcall/internal/domain"
)

// Contract is one wire contract's wording of the strict-JSON errors. The
// texts are part of each contract and are kept word for word; all of them
// are written here and nowhere else.
type Contract struct {
	wire    wire
	subject string // the tool, for Tool
}

type wire uint8

const (
	wireREST wire = iota + 1
	wireHeartbeat
	wireGateway
	wireTool
)

var (
	// REST is the REST API's request bodies (Decode). Malformed: "malformed
	// JSON at byte offset N: …" (N counts the bytes read up to and including
	// the offending one), "the request body is empty; …", invalid UTF-8 and
	// trailing data named with their offsets; top level: "the body must be a
	// JSON object, not <kind>" (WholeDocument); unknown_member "unknown
	// member "x"; known members: …"; "member "x" appears more than once";
	// "expected <type> at <pointer>, got <kind>"; self-judged values (times)
	// "<member>: want <what>".
	REST = Contract{wire: wireREST}
	// Heartbeat is agent_heartbeat.v1 (package liveness): "malformed JSON at
	// byte offset N: …" (N is the offending byte, or the length when the
	// body ends early), unknown_member "member "x" is not part of
	// agent_heartbeat.v1 here", "member "x" appears twice in one object".
	Heartbeat = Contract{wire: wireHeartbeat}
	// Gateway is the gateway's frames (Object): "malformed JSON" at the
	// pointer of the member being read (or of the object), "must be a JSON
	// object", unknown_member "unknown member "x" (known: …)", "member "x"
	// appears twice", "data after the JSON object".
	Gateway = Contract{wire: wireGateway}
)

// Tool is the arguments of the MCP tool name (Object): "the arguments of
// <tool> are not a valid JSON object" (no pointer), "the arguments of <tool>
// must be a JSON object", "<tool> takes no argument "x" (it takes [a b])",
// "argument "x" appears more than once"; all invalid_argument.
func Tool(name string) Contract { return Contract{wire: wireTool, subject: name} }

func invalid(format string, args ...any) *domain.Error {
	return domain.Errorf(domain.CodeInvalidArgument, format, args...)
}

// WholeDocument reports whether err says the top level of a body is not a
// JSON object: its pointer "" names the whole document, and a problem
// document states it explicitly.
func WholeDocument(err *domain.Error) bool {
	for _, e := range wholeDocument {
		if e == err {
			return true
		}
	}
	return false
}

// wholeDocument holds REST's top-level errors, one per JSON kind, so that
// WholeDocument can recognise them.
var wholeDocument = func() map[string]*domain.Error {
	m := map[string]*domain.Error{}
	for _, k := range []string{"null", "a boolean", "a number", "a string", "an array"} {
		m[k] = invalid("the body must be a JSON object, not %s", k)
	}
	return m
}()

// NotObject is the error for a top level (at base) of the given kind (as
// "a string", "an array", …) where an object belongs.
func (c Contract) NotObject(kind, base string) *domain.Error { return c.notObject(kind, base) }

func (c Contract) notObject(kind, base string) *domain.Error {
	switch c.wire {
	case wireREST:
		if e, ok := wholeDocument[kind]; ok {
			return e
		}
		return wholeDocument["null"]
	case wireHeartbeat:
		return invalid("the body must be a JSON object (agent_heartbeat.v1)")
	case wireTool:
		return invalid("the arguments of %s must be a JSON object", c.subject)
	}
	return invalid("must be a JSON object").At(base)
}

// Unknown is the error for the member name at ptr that the object does not
// take; known lists the names it takes (the heartbeat names none).
func (c Contract) Unknown(name, ptr string, known []string) *domain.Error {
	return c.unknown(name, ptr, known)
}

func (c Contract) unknown(name, ptr string, known []string) *domain.Error {
	var e *domain.Error
	switch c.wire {
	case wireREST:
		list := "; this object takes no members"
		if len(known) > 0 {
			list = "; known members: " + strings.Join(slices.Compact(slices.Sorted(slices.Values(known))), ", ")
		}
		e = &domain.Error{Code: domain.CodeUnknownMember, Detail: fmt.Sprintf("unknown member %q%s", name, list)}
	case wireHeartbeat:
		// The detail quotes at most the first 64 bytes of the name; the
		// pointer has all of it.
		shown := name
		if len(shown) > 64 {
			shown = strings.ToValidUTF8(shown[:64], "") + "…"
		}
		e = domain.Errorf(domain.CodeUnknownMember, "member %q is not part of agent_heartbeat.v1 here", shown)
	case wireTool:
		e = invalid("%s takes no argument %q (it takes %v)", c.subject, name, known)
	default:
		e = domain.Errorf(domain.CodeUnknownMember, "unknown member %q (known: %s)", name, strings.Join(known, ", "))
	}
	return e.At(ptr)
}

// Duplicate is the error for the member name at ptr given a second time in
// one object.
func (c Contract) Duplicate(name, ptr string) *domain.Error { return c.duplicate(name, ptr) }

func (c Contract) duplicate(name, ptr string) *domain.Error {
	format := "member %q appears twice"
	switch c.wire {
	case wireREST:
		format = "member %q appears more than once"
	case wireHeartbeat:
		format = "member %q appears twice in one object"
	case wireTool:
		format = "argument %q appears more than once"
	}
	return invalid(format, name).At(ptr)
}

// malformed is Object's error for a body that stops being JSON while the
// member at ptr (or the object at ptr) is read.
func (c Contract) malformed(body []byte, ptr string) *domain.Error {
	switch c.wire {
	case wireTool:
		return invalid("the arguments of %s are not a valid JSON object", c.subject)
	case wireGateway:
		return invalid("malformed JSON").At(ptr)
	}
	if e := c.Malformed(body); e != nil {
		return e
	}
	return invalid("malformed JSON")
}

// trailing is Object's error for data after the object.
func (c Contract) trailing(body []byte, base string) *domain.Error {
	if c.wire == wireGateway {
		return invalid("data after the JSON object").At(base)
	}
	return c.malformed(body, base)
}

// Malformed returns the error of a body that is not exactly one
// well-formed JSON value, or nil when it is one. The offsets and texts are
// those the contracts have always published, which are encoding/json's
// (its SyntaxError), so the body is read again with it here; the library's
// own syntactic errors word the same faults differently. This runs only on
// the error path.
func (c Contract) Malformed(body []byte) *domain.Error {
	if c.wire == wireREST {
		return restMalformed(body)
	}
	if stdjson.Valid(body) {
		return nil
	}
	var raw stdjson.RawMessage
	err := stdjson.Unmarshal(body, &raw)
	var se *stdjson.SyntaxError
	if !errors.As(err, &se) {
		return invalid("malformed JSON")
	}
	off, msg := syntaxPosition(body, se)
	return invalid("malformed JSON at byte offset %d: %s", off, msg)
}

// syntaxPosition turns the offset of encoding/json ("after reading Offset
// bytes") into the 0-based offset of the offending byte, or len(body) when
// the body ends too early.
func syntaxPosition(body []byte, se *stdjson.SyntaxError) (int, string) {
	msg, off := se.Error(), int(se.Offset)
	if !strings.HasPrefix(msg, "invalid character") {
		return min(max(off, 0), len(body)), msg
	}
	// At the end of input encoding/json reports a space it adds itself.
	if strings.HasPrefix(msg, "invalid character ' '") && off == len(body) &&
		(len(body) == 0 || body[len(body)-1] != ' ') {
		return len(body), "unexpected end of JSON input"
	}
	return min(max(off-1, 0), len(body)), msg
}

// restMalformed is REST's Malformed: empty body, invalid UTF-8, malformed
// JSON (offset after the offending byte), data after the value.
func restMalformed(body []byte) *domain.Error {
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("the request body is empty; expected a JSON object")
	}
	if !utf8.Valid(body) {
		off := 0
		for off < len(body) {
			r, n := utf8.DecodeRune(body[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return invalid("malformed JSON: invalid UTF-8 at byte offset %d", off)
	}
	dec := stdjson.NewDecoder(bytes.NewReader(body))
	var raw stdjson.RawMessage
	if err := dec.Decode(&raw); err != nil {
		var se *stdjson.SyntaxError
		switch {
		case errors.As(err, &se):
			return invalid("malformed JSON at byte offset %d: %s", se.Offset, se.Error())
		case errors.Is(err, io.ErrUnexpectedEOF):
			return invalid("malformed JSON at byte offset %d: unexpected end of input", len(body))
		}
		return invalid("malformed JSON: %v", err)
	}
	if off := dec.InputOffset(); len(bytes.TrimSpace(body[off:])) != 0 {
		rest := body[off:]
		lead := len(rest) - len(bytes.TrimLeft(rest, " \t\r\n"))
		return invalid("unexpected data after the JSON value at byte offset %d; send exactly one JSON object", off+int64(lead))
	}
	return nil
}

// translate turns an error of Decode (err may be nil when the top level is
// not an object) into the contract's error, in this order: malformed body,
// top level not an object, then the library's first error in document
// order.
func (c Contract) translate(body []byte, err error) *domain.Error {
	if e := c.Malformed(body); e != nil {
		return e
	}
	if k := topKind(body); k != '{' {
		return c.notObject(KindName(byte(k)), "")
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName) {
		return c.duplicate(syn.JSONPointer.LastToken(), string(syn.JSONPointer))
	}
	var se *json.SemanticError
	if errors.As(err, &se) {
		if e := c.semantic(se); e != nil {
			return e
		}
	}
	// Not expected for a well-formed body; said without a pointer rather
	// than a guessed one, and without the Go error.
	return invalid("the request body does not fit the expected shape; see GET /v1/openapi.yaml")
}

var (
	timeType            = reflect.TypeFor[time.Time]()
	jsonUnmarshalerType = reflect.TypeFor[stdjson.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	unmarshalerFromType = reflect.TypeFor[json.UnmarshalerFrom]()
	rawMessageType      = reflect.TypeFor[stdjson.RawMessage]()
)

// semantic words a SemanticError of Decode: an unknown member, a value a
// type judged itself (a time), a wrong JSON type, a number out of range.
// It returns nil for anything else.
func (c Contract) semantic(se *json.SemanticError) *domain.Error {
	ptr := string(se.JSONPointer)
	if errors.Is(se.Err, json.ErrUnknownName) {
		return c.unknown(se.JSONPointer.LastToken(), ptr, memberNames(se.GoType))
	}
	var de *domain.Error
	if errors.As(se.Err, &de) { // a type's own check, written for people
		return invalid("%s", de.Detail).At(ptr)
	}
	t := se.GoType
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil
	}
	if judgesItself(t) {
		name := strings.TrimPrefix(ptr, "/")
		if name == "" {
			name = "the body"
		}
		want := "a valid value"
		if t == timeType {
			want = "an RFC 3339 time such as 2026-12-01T17:00:00Z"
		}
		return invalid("%s: want %s", name, want).At(ptr)
	}
	want, kinds := wanted(t)
	if want == "" {
		return nil
	}
	if se.JSONKind != 0 && !strings.ContainsRune(kinds, rune(se.JSONKind)) {
		where := ptr
		if where == "" {
			where = "the top level"
		}
		return invalid("expected %s at %s, got %s", want, where, KindName(byte(se.JSONKind))).At(ptr)
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return invalid("expected an integer in range, got %s", se.JSONValue).At(ptr)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return invalid("expected a non-negative integer in range, got %s", se.JSONValue).At(ptr)
	case reflect.Float32, reflect.Float64:
		return invalid("number %s is out of range", se.JSONValue).At(ptr)
	}
	return nil
}

// judgesItself reports whether values of t are checked by t's own methods
// (time.Time, a TextUnmarshaler) rather than by their shape.
func judgesItself(t reflect.Type) bool {
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return false
	}
	if t == timeType {
		return true
	}
	pt := reflect.PointerTo(t)
	return pt.Implements(jsonUnmarshalerType) || pt.Implements(textUnmarshalerType) || pt.Implements(unmarshalerFromType)
}

// wanted names the JSON type a Go type takes and the kinds that have it.
func wanted(t reflect.Type) (want, kinds string) {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object", "{"
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return "a string", `"`
		}
		return "an array", "["
	case reflect.String:
		return "a string", `"`
	case reflect.Bool:
		return "a boolean", "tf"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer", "0"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer", "0"
	case reflect.Float32, reflect.Float64:
		return "a number", "0"
	}
	return "", ""
}
