package strictjson_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/strictjson"
)

func TestCheckNames(t *testing.T) {
	for body, want := range map[string]string{ // want: pointer, "" = accepted
		`{"a":1,"b":2}`:                              "",
		`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`:        "",
		`{"redirect_uris":["x"],"REDIRECT_URIS":[]}`: "/REDIRECT_URIS",
		`{"title":"a","title":"b"}`:                  "/title",
		`{"title":"a","Title":"b"}`:                  "/Title",
		`{"params":{"name":"a","name":"b"}}`:         "/params/name",
		`{"x":[1,{"k":1,"K":2}]}`:                    "/x/1/K",
		`[{"a/b":1,"A/B":2}]`:                        "/0/A~1B",
		`{"ſ":1,"S":2}`:                              "/S", // Unicode folding: long s
		`{"k":"K","v":"k"}`:                          "",   // values are not names
		`{"a":1,"a":`:                                "/a", // refused before the body ends
		`{"a":1`:                                     "",   // malformed: left to the decoder
		`"s"`:                                        "",
		``:                                           "",
	} {
		err := strictjson.CheckNames([]byte(body), "/skipped")
		var ne *strictjson.NameError
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", body, err)
		case want != "" && (!errors.As(err, &ne) || ne.Pointer != want):
			t.Errorf("%s: %v, want refusal at %s", body, err, want)
		}
	}
}

// An object of many members is checked through a map past the first few:
// a repeat far down is still found, distinct names are still accepted, and
// the cost does not grow with every pair of names.
func TestCheckNamesManyMembers(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 5000 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"m` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strconv.Itoa(i) + `":0`)
	}
	distinct := b.String() + "}"
	if err := strictjson.CheckNames([]byte(distinct)); err != nil {
		t.Fatalf("5000 distinct names: %v", err)
	}
	again := b.String() + `,"MA0":1}`
	var ne *strictjson.NameError
	if err := strictjson.CheckNames([]byte(again)); !errors.As(err, &ne) || ne.Pointer != "/MA0" {
		t.Fatalf("a repeat of the first of 5000 names in another case: %v, want refusal at /MA0", err)
	}
}

// The unknown-member detail lists each known name once, even when the
// struct shadows one by embedding.
func TestUnknownListsNamesOnce(t *testing.T) {
	type base struct {
		Key string `json:"key"`
	}
	var dst struct {
		base
		Key string `json:"key"`
		Max int    `json:"max"`
	}
	err := strictjson.Decode([]byte(`{"nope":1}`), &dst, strictjson.REST)
	if err == nil || err.Code != domain.CodeUnknownMember {
		t.Fatalf("got %v", err)
	}
	if !strings.HasSuffix(err.Detail, "known members: key, max") {
		t.Errorf("detail %q", err.Detail)
	}
}

func BenchmarkCheckNames(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_todos","arguments":{"status":"open","limit":20}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := strictjson.CheckNames(body); err != nil {
			b.Fatal(err)
		}
	}
}
