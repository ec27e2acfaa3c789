package strictjson_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/strictjson"
)

// FuzzDecode: Decode under the REST contract accepts exactly the
// well-formed objects it can hold, and every refusal is a *domain.Error of
// the contract: a malformed body is invalid_argument without a pointer
// whatever else is wrong with it; an unknown member is unknown_member at a
// pointer that ends with the member's escaped name; the rest are
// invalid_argument, never with a Go type or the library's name in the
// detail.
func FuzzDecode(f *testing.F) {
	for _, tc := range restCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v body
		de := strictjson.Decode(b, &v, strictjson.REST)
		valid := json.Valid(b)
		if de == nil {
			if !valid || !strings.HasPrefix(strings.TrimLeft(string(b), " \t\r\n"), "{") {
				t.Fatalf("accepted %q", b)
			}
			return
		}
		if !valid && (de.Code != domain.CodeInvalidArgument || de.Pointer != "") {
			t.Fatalf("malformed %q reported as %+v", b, de)
		}
		switch de.Code {
		case domain.CodeUnknownMember:
			if !valid || de.Pointer == "" || !strings.HasPrefix(de.Detail, "unknown member ") {
				t.Fatalf("%q: %+v", b, de)
			}
		case domain.CodeInvalidArgument:
		default:
			t.Fatalf("%q: code %s", b, de.Code)
		}
		for _, leak := range []string{"json:", "jsontext", "Go ", "strictjson_test", "time.Time"} {
			if strings.Contains(de.Detail, leak) {
				t.Fatalf("%q: detail %q shows %q", b, de.Detail, leak)
			}
		}
	})
}
