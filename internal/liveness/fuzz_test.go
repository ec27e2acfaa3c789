package liveness

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/testkit/fuzzseed"
)

// FuzzDecodeHeartbeat checks, for any body: DecodeHeartbeat never panics;
// an accepted body is well-formed JSON and its canonical encoding decodes to
// an equal value and encodes to the same bytes; every error is a
// *domain.Error with a known code and a syntactically valid RFC 6901
// pointer, and a malformed body is invalid_argument with pointer "".
func FuzzDecodeHeartbeat(f *testing.F) {
	fuzzseed.Bytes(f,
		fullBody, minimalBody, `{}`, `[]`, ``, `{"state":"degraded","details":{"degraded_reasons":["a"]}}`,
		on(`"x":1`), on(`"a/b~c":{"d":[1,2]}`), `{"state":"online","state":"online"}`,
		on(`"project_readiness":[{"queue":"a","ready":true},{"queue":"a","ready":false}]`),
		on(`"details":{"active_runs":["4F1C2A9E-8B7D-4C3E-9A6F-1D2E3F4A5B6C"],"protocol_version":7}`),
		on(`"billing_evidence":{"key_type":"unknown","method":"env"}`),
		`{"st\u0061te":"\u006fnline","billing_mode":"a\u002ec"}`,
		on(`"details":{"capabilities":{"followups":"queue","title":false}}`),
		"{\"\xff\":1}", `{"state":"online"} `, `{"state":"online"}x`,
	)
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := DecodeHeartbeat(body)
		if err == nil {
			if !json.Valid(body) {
				t.Fatalf("accepted malformed JSON %q", body)
			}
			c := h.Canonical()
			h2, err := DecodeHeartbeat(c)
			if err != nil {
				t.Fatalf("canonical %s of %q rejected: %v", c, body, err)
			}
			if !reflect.DeepEqual(h, h2) {
				t.Fatalf("canonical %s of %q decodes to\n%#v\nnot\n%#v", c, body, h2, h)
			}
			if c2 := h2.Canonical(); !bytes.Equal(c, c2) {
				t.Fatalf("canonical not stable: %s vs %s", c, c2)
			}
			return
		}
		var de *domain.Error
		if !errors.As(err, &de) {
			t.Fatalf("error %v (%T) is not a *domain.Error", err, err)
		}
		switch de.Code {
		case domain.CodeInvalidArgument, domain.CodeUnknownMember:
		default:
			t.Fatalf("unexpected code %s", de.Code)
		}
		if !validPointer(de.Pointer) {
			t.Fatalf("invalid pointer %q for %q", de.Pointer, body)
		}
		if de.Code == domain.CodeUnknownMember && de.Pointer == "" {
			t.Fatalf("unknown_member without a pointer for %q", body)
		}
		if !json.Valid(body) && (de.Code != domain.CodeInvalidArgument || de.Pointer != "" || !strings.Contains(de.Detail, "byte offset")) {
			t.Fatalf("malformed %q reported as %v", body, de)
		}
		if json.Valid(body) && strings.HasPrefix(de.Detail, "malformed JSON") {
			t.Fatalf("well-formed %q reported as malformed: %v", body, de)
		}
		if !reflect.DeepEqual(h, Heartbeat{}) {
			t.Fatalf("rejected body returned a value")
		}
	})
}

// validPointer reports whether p is an RFC 6901 JSON Pointer in valid UTF-8.
func validPointer(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != '/' || !utf8.ValidString(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 == len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}

func TestValidPointer(t *testing.T) {
	for p, want := range map[string]bool{"": true, "/": true, "/a~0b~1": true, "a": false, "/~": false, "/~2": false, "/\xff": false} {
		if validPointer(p) != want {
			t.Errorf("validPointer(%q) != %v", p, want)
		}
	}
}
