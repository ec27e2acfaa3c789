// Package strictjson is Rollcall's one strict-JSON layer: REST bodies are
// decoded (Decode) and gateway frames and MCP tool arguments walked
// (Object) with github.com/go-json-experiment/json, the implementation
// behind encoding/json/v2, and every error becomes Rollcall's
// invalid_argument (or unknown_member) at an RFC 6901 pointer in one place:
// the Contract of the wire the body came from, which holds that wire's
// texts word for word.
//
// Body errors name the offending member by its JSON pointer (design:
// Strict JSON). Strict means, for every Contract: exactly one JSON value
// (whitespace around it allowed); member names matched exactly, not
// case-folded; a member the target does not take refused; a member name
// given twice in one object refused; a value of the wrong JSON type
// refused; and a malformed body reported as malformed before anything else
// is said about it.
//
// The heartbeat body (design: Heartbeat body) keeps its own decoder in
// package liveness: measured, the library's decode takes about twice as
// long on a full heartbeat and six times on a minimal one, and allocates
// four times as often, before any of its forms is checked, where the goal
// is at most 1.5 times (docs/benchmarks.md, One
// strict-JSON layer). That decoder takes its malformed-body report, its
// member texts, KindName and Escape from here.
package strictjson

import (
	"bytes"
	"errors"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/rollcall/rollcall/internal/domain"
)

// decodeOptions refuse unknown members; duplicate names and invalid UTF-8
// are refused by the library's defaults.
var decodeOptions = json.RejectUnknownMembers(true)

// Decode decodes body, one JSON object, into dst (a non-nil pointer to a
// struct) under the rules of c. A member of type json.RawMessage or any is
// free-form: it is not checked against a shape, but it is still JSON whose
// objects have distinct member names. A JSON null member leaves its field
// at the zero value (the same as absent). The error is always a
// *domain.Error (see Contract for the texts); WholeDocument tells the
// errors about the top level apart.
func Decode(body []byte, dst any, c Contract) *domain.Error {
	err := json.Unmarshal(body, dst, decodeOptions)
	if err == nil && topKind(body) == '{' {
		return nil
	}
	return c.translate(body, err)
}

// Object walks body, one JSON object, calling each with every member's
// name and raw value in document order; names not in known are refused,
// and so is a name given twice. The values are not walked: each is handed
// on whole to the decoder that judges it (duplicate names inside them are
// theirs to refuse), and it aliases body. Pointers are relative to base.
// each returns its own error for a wrong value; Object returns it as is.
func Object(body []byte, c Contract, base string, known []string, each func(name string, value []byte) error) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return c.malformed(body, base)
	}
	if tok.Kind() != '{' {
		return c.notObject(KindName(byte(tok.Kind())), base)
	}
	var seen []string
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil || tok.Kind() != '"' {
			return c.malformed(body, base)
		}
		name := tok.String()
		ptr := Member(base, name)
		v, err := dec.ReadValue()
		if err != nil {
			return c.malformed(body, ptr)
		}
		end := int(dec.InputOffset())
		value := body[end-len(v) : end]
		if contains(seen, name) {
			return c.duplicate(name, ptr)
		}
		seen = append(seen, name)
		if !contains(known, name) {
			return c.unknown(name, ptr, known)
		}
		if err := each(name, value); err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return c.malformed(body, base)
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return c.trailing(body, base)
	}
	return nil
}
