package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rollcall/rollcall/internal/domain"
)

// MaxBodyBytes is the largest request body the API reads: 1 MiB. A larger
// body answers 413 with code invalid_argument.
const MaxBodyBytes = 1 << 20

// statusError is a domain error that needs an HTTP status other than the one
// its code maps to (413, 415, 503).
type statusError struct {
	status int
	err    *domain.Error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// decodeJSON is the one request body decoder of the REST API. It requires
// Content-Type application/json (415 otherwise), reads at most MaxBodyBytes
// (413 beyond), and then decodes strictly (see decodeStrict). Every failure
// is returned before any use case runs, so bad input changes nothing.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return &statusError{http.StatusUnsupportedMediaType,
			domain.Errorf(domain.CodeInvalidArgument, "Content-Type must be application/json, got %q", ct)}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return &statusError{http.StatusUnsupportedMediaType,
			domain.Errorf(domain.CodeInvalidArgument, "the request body must be UTF-8, got charset %q", cs)}
	}
	tooLarge := &statusError{http.StatusRequestEntityTooLarge,
		domain.Errorf(domain.CodeInvalidArgument, "the request body exceeds the limit of %d bytes (1 MiB)", MaxBodyBytes)}
	if r.ContentLength > MaxBodyBytes {
		return tooLarge
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge
		}
		return domain.Errorf(domain.CodeInvalidArgument, "reading the request body failed: %v", err)
	}
	if de := decodeStrict(body, dst); de != nil {
		if isNotObject(de) {
			return &wholeBodyError{de}
		}
		return de
	}
	return nil
}

// decodeStrict decodes one JSON object from body into dst (a pointer to a
// struct) and refuses anything the struct does not describe:
//
//   - empty body, invalid UTF-8 or malformed JSON → invalid_argument whose
//     detail names the byte offset;
//   - data after the value → invalid_argument (trailing data);
//   - a top level that is not an object (null included) → invalid_argument
//     "the body must be a JSON object" about the whole document (pointer "",
//     see notObject);
//   - a member the struct has no json tag for, at any depth →
//     unknown_member with the member's RFC 6901 pointer;
//   - a member given twice → invalid_argument with its pointer;
//   - a value of the wrong JSON type (or an integer out of range) →
//     invalid_argument with its pointer;
//   - a value that a field type judges itself (json.Unmarshaler or
//     encoding.TextUnmarshaler, such as time.Time) and refuses →
//     invalid_argument with its pointer and a detail that says what is
//     wanted (never the Go error).
//
// json.RawMessage and interface fields are free-form and not walked. A JSON
// null member counts as absent. Member names match exactly (encoding/json
// alone would match them case-insensitively).
func decodeStrict(body []byte, dst any) *domain.Error {
	if len(bytes.TrimSpace(body)) == 0 {
		return domain.Errorf(domain.CodeInvalidArgument, "the request body is empty; expected a JSON object")
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
		return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON: invalid UTF-8 at byte offset %d", off)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON at byte offset %d: %s", se.Offset, se.Error())
		case errors.Is(err, io.ErrUnexpectedEOF):
			return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON at byte offset %d: unexpected end of input", len(body))
		}
		return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON: %v", err)
	}
	if off := dec.InputOffset(); len(bytes.TrimSpace(body[off:])) != 0 {
		rest := body[off:]
		lead := len(rest) - len(bytes.TrimLeft(rest, " \t\r\n"))
		return domain.Errorf(domain.CodeInvalidArgument, "unexpected data after the JSON value at byte offset %d; send exactly one JSON object", off+int64(lead))
	}
	if raw = bytes.TrimSpace(raw); raw[0] != '{' {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		tok, _ := d.Token()
		return notObject(jsonKind(tok))
	}
	w := walker{dec: json.NewDecoder(bytes.NewReader(raw))}
	w.dec.UseNumber()
	t := reflect.TypeOf(dst)
	if t.Kind() != reflect.Pointer {
		panic("httpapi: decodeStrict needs a pointer")
	}
	if de := w.value(t.Elem(), ""); de != nil {
		return de
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		// The walk accepted every value, so this is unexpected; report it
		// without a pointer rather than guess one, and without the Go error.
		return domain.Errorf(domain.CodeInvalidArgument, "the request body does not fit the expected shape; see GET /v1/openapi.yaml")
	}
	return nil
}

// notObjectErrs are the errors for a body whose top level is not an object,
// one per JSON kind, so decodeJSON can tell them apart (isNotObject) and
// render their pointer "" (the whole document) explicitly.
var notObjectErrs = func() map[string]*domain.Error {
	m := map[string]*domain.Error{}
	for _, k := range []string{"null", "a boolean", "a number", "a string", "an array"} {
		m[k] = domain.Errorf(domain.CodeInvalidArgument, "the body must be a JSON object, not %s", k)
	}
	return m
}()

func notObject(kind string) *domain.Error {
	if e, ok := notObjectErrs[kind]; ok {
		return e
	}
	return notObjectErrs["null"] // unreachable: raw is a valid JSON value
}

func isNotObject(de *domain.Error) bool {
	for _, e := range notObjectErrs {
		if e == de {
			return true
		}
	}
	return false
}

// wholeBodyError is a body error about the whole document: its problem
// carries the RFC 6901 pointer "" explicitly.
type wholeBodyError struct{ err *domain.Error }

func (e *wholeBodyError) Error() string { return e.err.Error() }
func (e *wholeBodyError) Unwrap() error { return e.err }

// walker checks a syntactically valid JSON value, token by token, against a
// Go type, in document order.
type walker struct{ dec *json.Decoder }

var (
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func (w *walker) value(t reflect.Type, ptr string) *domain.Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if judgesItself(t) {
		var raw json.RawMessage
		if err := w.dec.Decode(&raw); err != nil { // cannot happen on validated input
			return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON at %s", orRoot(ptr))
		}
		return checkSelfJudged(t, raw, ptr)
	}
	tok, err := w.dec.Token()
	if err != nil { // cannot happen on validated input
		return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON at %s: %v", orRoot(ptr), err)
	}
	return w.valueTok(tok, t, ptr)
}

func (w *walker) valueTok(tok json.Token, t reflect.Type, ptr string) *domain.Error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if tok == nil { // null: the same as absent
		return nil
	}
	if t == rawMessageType || t.Kind() == reflect.Interface { // free-form
		return w.skip(tok)
	}
	switch t.Kind() {
	case reflect.Struct:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return typeError(ptr, "an object", tok)
		}
		fields := structFields(t)
		seen := map[string]bool{}
		for w.dec.More() {
			kt, _ := w.dec.Token()
			key, _ := kt.(string)
			p := ptr + "/" + escapePointer(key)
			ft, ok := fields[key]
			if !ok {
				return (&domain.Error{Code: domain.CodeUnknownMember, Detail: fmt.Sprintf("unknown member %q%s", key, knownMembers(fields))}).At(p)
			}
			if seen[key] {
				return domain.Errorf(domain.CodeInvalidArgument, "member %q appears more than once", key).At(p)
			}
			seen[key] = true
			if de := w.value(ft, p); de != nil {
				return de
			}
		}
		_, _ = w.dec.Token() // '}'
	case reflect.Map:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return typeError(ptr, "an object", tok)
		}
		seen := map[string]bool{}
		for w.dec.More() {
			kt, _ := w.dec.Token()
			key, _ := kt.(string)
			p := ptr + "/" + escapePointer(key)
			if seen[key] {
				return domain.Errorf(domain.CodeInvalidArgument, "member %q appears more than once", key).At(p)
			}
			seen[key] = true
			if de := w.value(t.Elem(), p); de != nil {
				return de
			}
		}
		_, _ = w.dec.Token()
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 { // []byte: base64 string
			if _, ok := tok.(string); !ok {
				return typeError(ptr, "a string", tok)
			}
			return nil
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return typeError(ptr, "an array", tok)
		}
		for i := 0; w.dec.More(); i++ {
			if de := w.value(t.Elem(), ptr+"/"+strconv.Itoa(i)); de != nil {
				return de
			}
		}
		_, _ = w.dec.Token()
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return typeError(ptr, "a string", tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return typeError(ptr, "a boolean", tok)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return typeError(ptr, "an integer", tok)
		}
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil || reflect.New(t).Elem().OverflowInt(v) {
			return domain.Errorf(domain.CodeInvalidArgument, "expected an integer in range, got %s", n).At(ptr)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			return typeError(ptr, "a non-negative integer", tok)
		}
		v, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil || reflect.New(t).Elem().OverflowUint(v) {
			return domain.Errorf(domain.CodeInvalidArgument, "expected a non-negative integer in range, got %s", n).At(ptr)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return typeError(ptr, "a number", tok)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return domain.Errorf(domain.CodeInvalidArgument, "number %s is out of range", n).At(ptr)
		}
	default:
		panic("httpapi: decodeStrict cannot check Go kind " + t.Kind().String())
	}
	return nil
}

// judgesItself reports whether values of t are checked by t's own
// UnmarshalJSON or UnmarshalText (time.Time, for one) rather than walked.
func judgesItself(t reflect.Type) bool {
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return false
	}
	pt := reflect.PointerTo(t)
	return pt.Implements(jsonUnmarshalerType) || pt.Implements(textUnmarshalerType)
}

var timeType = reflect.TypeFor[time.Time]()

// checkSelfJudged unmarshals raw into a fresh value of t, as json.Unmarshal
// will, and turns a refusal into invalid_argument at ptr. The detail says
// what is wanted; the Go error (a type name, "parsing time …") is not shown,
// unless the type refused with a *domain.Error written for people.
func checkSelfJudged(t reflect.Type, raw json.RawMessage, ptr string) *domain.Error {
	if bytes.Equal(raw, []byte("null")) { // the same as absent
		return nil
	}
	err := json.Unmarshal(raw, reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	var de *domain.Error
	if errors.As(err, &de) {
		return domain.Errorf(domain.CodeInvalidArgument, "%s", de.Detail).At(ptr)
	}
	name := strings.TrimPrefix(ptr, "/")
	if name == "" {
		name = "the body"
	}
	want := "a valid value"
	if t == timeType {
		want = "an RFC 3339 time such as 2026-12-01T17:00:00Z"
	}
	return domain.Errorf(domain.CodeInvalidArgument, "%s: want %s", name, want).At(ptr)
}

// skip consumes the rest of the value that starts with tok.
func (w *walker) skip(tok json.Token) *domain.Error {
	d, ok := tok.(json.Delim)
	if !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := w.dec.Token()
		if err != nil {
			return domain.Errorf(domain.CodeInvalidArgument, "malformed JSON: %v", err)
		}
		if d, ok := t.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
		}
	}
	return nil
}

func typeError(ptr, want string, tok json.Token) *domain.Error {
	return domain.Errorf(domain.CodeInvalidArgument, "expected %s at %s, got %s", want, orRoot(ptr), jsonKind(tok)).At(ptr)
}

func orRoot(ptr string) string {
	if ptr == "" {
		return "the top level"
	}
	return ptr
}

func jsonKind(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	}
	return fmt.Sprintf("%T", tok)
}

// escapePointer escapes one reference token per RFC 6901: "~" → "~0",
// "/" → "~1".
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func knownMembers(fields map[string]reflect.Type) string {
	if len(fields) == 0 {
		return "; this object takes no members"
	}
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	return "; known members: " + strings.Join(names, ", ")
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// structFields maps the JSON member names of struct t to their types,
// following encoding/json's rules for tags, "-" and embedded structs
// (shallower fields win).
func structFields(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	collectFields(t, m, map[reflect.Type]bool{})
	fieldCache.Store(t, m)
	return m
}

func collectFields(t reflect.Type, m map[string]reflect.Type, visiting map[reflect.Type]bool) {
	if visiting[t] {
		return
	}
	visiting[t] = true
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	for _, et := range embedded {
		sub := map[string]reflect.Type{}
		collectFields(et, sub, visiting)
		for k, v := range sub {
			if _, ok := m[k]; !ok {
				m[k] = v
			}
		}
	}
}
