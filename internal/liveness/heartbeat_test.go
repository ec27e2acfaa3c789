package liveness

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/rollcall/rollcall/internal/domain"
)

func sp(s string) *string { return &s }
func bp(b bool) *bool     { return &b }
func ip(i int) *int       { return &i }

func TestDecodeFullBody(t *testing.T) {
	got, err := DecodeHeartbeat([]byte(fullBody))
	if err != nil {
		t.Fatal(err)
	}
	want := Heartbeat{
		State:                 StateDegraded,
		BillingMode:           sp("subscription"),
		BillingModesSupported: []string{"subscription", "api"},
		ToolClass:             sp("claude_code"),
		RuntimeVersion:        sp("2.1.14"),
		BillingEvidence:       &BillingEvidence{KeyType: "oauth", Method: "credentials_file"},
		Details: Details{
			Capabilities: &Capabilities{
				Followups: sp("steer"), Components: bp(true), VoiceInput: bp(false), Title: bp(true), FilesOut: bp(true),
			},
			ActiveRuns:      []string{"4f1c2a9e-8b7d-4c3e-9a6f-1d2e3f4a5b6c", "0a1b2c3d-4e5f-4a7b-8c9d-0e1f2a3b4c5d"},
			DegradedReasons: []string{"mcp_server_unreachable", "rate_limited:anthropic"},
			Adapter:         &Adapter{Name: "rollcall-claude", Version: sp("0.4.2")},
			Runtime:         &Runtime{Name: "claude-code"},
			ProtocolVersion: ip(1),
		},
		ProjectReadiness: []ReadinessEntry{
			{Queue: "reviews", Ready: true},
			{Queue: "deploys", Ready: false, Reason: "no_credentials"},
		},
		ProjectReadinessPresent: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%#v\nwant\n%#v", got, want)
	}
	const canonical = `{"state":"degraded","billing_mode":"subscription","billing_modes_supported":["subscription","api"],` +
		`"tool_class":"claude_code","runtime_version":"2.1.14","billing_evidence":{"key_type":"oauth","method":"credentials_file"},` +
		`"details":{"capabilities":{"followups":"steer","components":true,"voice_input":false,"title":true,"files_out":true},` +
		`"active_runs":["4f1c2a9e-8b7d-4c3e-9a6f-1d2e3f4a5b6c","0a1b2c3d-4e5f-4a7b-8c9d-0e1f2a3b4c5d"],` +
		`"degraded_reasons":["mcp_server_unreachable","rate_limited:anthropic"],"adapter":{"name":"rollcall-claude","version":"0.4.2"},` +
		`"runtime":{"name":"claude-code"},"protocol_version":1},` +
		`"project_readiness":[{"queue":"reviews","ready":true},{"queue":"deploys","ready":false,"reason":"no_credentials"}]}`
	if c := string(got.Canonical()); c != canonical {
		t.Fatalf("canonical\n%s\nwant\n%s", c, canonical)
	}
	m, err := json.Marshal(struct {
		H Heartbeat `json:"h"`
	}{got})
	if err != nil || string(m) != `{"h":`+canonical+`}` {
		t.Fatalf("json.Marshal = %s, %v", m, err)
	}
	var back Heartbeat
	if err := json.Unmarshal([]byte(canonical), &back); err != nil || !reflect.DeepEqual(back, want) {
		t.Fatalf("json.Unmarshal = %#v, %v", back, err)
	}
}

func TestDecodeAccepts(t *testing.T) {
	upper := "4F1C2A9E-8B7D-4C3E-9A6F-1D2E3F4A5B6C"
	cases := []struct {
		name string
		body string
		want Heartbeat
	}{
		{"minimal", `{"state":"online"}`, Heartbeat{State: StateOnline}},
		{"whitespace around", " \t\r\n{ \"state\" : \"online\" } \n", Heartbeat{State: StateOnline}},
		{"escaped key and value", `{"st\u0061te":"\u006fnline","billing_mode":"a\/b\u002ec"}`, Heartbeat{}},
		{"empty details", `{"state":"online","details":{}}`, Heartbeat{State: StateOnline}},
		{"empty capabilities", `{"state":"online","details":{"capabilities":{}}}`,
			Heartbeat{State: StateOnline, Details: Details{Capabilities: &Capabilities{}}}},
		{"empty lists are reported", `{"state":"online","billing_modes_supported":[],"details":{"active_runs":[],"degraded_reasons":[]}}`,
			Heartbeat{State: StateOnline, BillingModesSupported: []string{}, Details: Details{ActiveRuns: []string{}, DegradedReasons: []string{}}}},
		{"readiness absent", `{"state":"online"}`, Heartbeat{State: StateOnline}},
		{"readiness empty", `{"state":"online","project_readiness":[]}`,
			Heartbeat{State: StateOnline, ProjectReadiness: []ReadinessEntry{}, ProjectReadinessPresent: true}},
		{"uppercase uuid is lowercased", `{"state":"online","details":{"active_runs":["` + upper + `"]}}`,
			Heartbeat{State: StateOnline, Details: Details{ActiveRuns: []string{strings.ToLower(upper)}}}},
		{"adapter without version", `{"state":"online","details":{"adapter":{"name":"a"}}}`,
			Heartbeat{State: StateOnline, Details: Details{Adapter: &Adapter{Name: "a"}}}},
		{"degraded with reasons", `{"details":{"degraded_reasons":["x"]},"state":"degraded"}`,
			Heartbeat{State: StateDegraded, Details: Details{DegradedReasons: []string{"x"}}}},
		{"version form", `{"state":"online","runtime_version":"V1.2.3-rc.1+build_7"}`,
			Heartbeat{State: StateOnline, RuntimeVersion: sp("V1.2.3-rc.1+build_7")}},
		{"longest forms", `{"state":"online","billing_mode":"` + strings.Repeat("a", MaxCodeLen) + `","runtime_version":"` +
			strings.Repeat("1", MaxVersionLen) + `","details":{"runtime":{"name":"` + strings.Repeat("n", MaxNameLen) + `"}}}`,
			Heartbeat{State: StateOnline, BillingMode: sp(strings.Repeat("a", MaxCodeLen)), RuntimeVersion: sp(strings.Repeat("1", MaxVersionLen)),
				Details: Details{Runtime: &Runtime{Name: strings.Repeat("n", MaxNameLen)}}}},
		{"max protocol version", `{"state":"online","details":{"protocol_version":2147483647}}`,
			Heartbeat{State: StateOnline, Details: Details{ProtocolVersion: ip(MaxProtocolVersion)}}},
		{"followups queue", `{"state":"online","details":{"capabilities":{"followups":"queue"}}}`,
			Heartbeat{State: StateOnline, Details: Details{Capabilities: &Capabilities{Followups: sp("queue")}}}},
	}
	cases[2].want = Heartbeat{State: StateOnline, BillingMode: nil}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeHeartbeat([]byte(tc.body))
			if tc.name == "escaped key and value" {
				// "a/b.c" is not a code: the escape is decoded before the form check.
				assertErr(t, err, domain.CodeInvalidArgument, "/billing_mode")
				got, err = DecodeHeartbeat([]byte(`{"st\u0061te":"\u006fnline","billing_mode":"a\u002ec"}`))
				tc.want.BillingMode = sp("a.c")
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
			again, err := DecodeHeartbeat(got.Canonical())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("canonical %s does not round-trip: %#v, %v", got.Canonical(), again, err)
			}
		})
	}
}

func assertErr(t *testing.T, err error, code domain.Code, ptr string) *domain.Error {
	t.Helper()
	var de *domain.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *domain.Error; want %s at %q", err, err, code, ptr)
	}
	if de.Code != code || de.Pointer != ptr {
		t.Fatalf("error %q: code %s pointer %q; want %s at %q", de.Detail, de.Code, de.Pointer, code, ptr)
	}
	return de
}

type errCase struct {
	name   string
	body   string
	code   domain.Code
	ptr    string
	detail string // a substring of the detail, when set
}

const (
	unk = domain.CodeUnknownMember
	inv = domain.CodeInvalidArgument
)

// on wraps members into a valid heartbeat: {"state":"online",<members>}.
func on(members string) string { return `{"state":"online",` + members + `}` }

func TestDecodeUnknownMembers(t *testing.T) {
	cases := []errCase{
		{"top last", on(`"x":1`), unk, "/x", `member "x"`},
		{"top first", `{"x":1,"state":"online"}`, unk, "/x", ""},
		{"top case differs", `{"State":"online"}`, unk, "/State", ""},
		{"top empty key", `{"":1,"state":"online"}`, unk, "/", ""},
		{"top escaped pointer", on(`"a/b~c":1`), unk, "/a~1b~0c", ""},
		{"top escaped key", on(`"\u0078y":{}`), unk, "/xy", ""},
		{"top unicode key", on(`"zoë":null`), unk, "/zoë", ""},
		{"top invalid utf8 key", on("\"a\xffb\":1"), unk, "/a\uFFFDb", ""},
		{"top rate_limit", on(`"rate_limit":{}`), unk, "/rate_limit", ""},
		{"long key is cut in the detail only", on(`"` + strings.Repeat("k", 100) + `":1`), unk, "/" + strings.Repeat("k", 100),
			`member "` + strings.Repeat("k", 64) + `…"`},
		{"evidence", on(`"billing_evidence":{"key_type":"oauth","method":"m","source":"x"}`), unk, "/billing_evidence/source", ""},
		{"evidence first", on(`"billing_evidence":{"x":1}`), unk, "/billing_evidence/x", ""},
		{"details", on(`"details":{"foo":[1,2]}`), unk, "/details/foo", ""},
		{"details top-level name", on(`"details":{"state":"online"}`), unk, "/details/state", ""},
		{"capabilities", on(`"details":{"capabilities":{"followups":"steer","streaming":true}}`), unk, "/details/capabilities/streaming", ""},
		{"adapter", on(`"details":{"adapter":{"name":"a","build":"1"}}`), unk, "/details/adapter/build", ""},
		{"runtime version", on(`"details":{"runtime":{"name":"r","version":"1"}}`), unk, "/details/runtime/version", ""},
		{"readiness item", on(`"project_readiness":[{"queue":"a","ready":true},{"queue":"b","ready":true,"channel_id":"c"}]`),
			unk, "/project_readiness/1/channel_id", ""},
		{"readiness item tilde", on(`"project_readiness":[{"~":1}]`), unk, "/project_readiness/0/~0", ""},
		{"deep junk under unknown", `{"x":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `,"state":"online"}`, unk, "/x", ""},
		{"unknown before missing state", `{"x":1}`, unk, "/x", ""},
		{"unknown before degraded rule", `{"state":"degraded","y":1}`, unk, "/y", ""},
	}
	runErrCases(t, cases)
}

func TestDecodeForms(t *testing.T) {
	long := func(n int, c string) string { return strings.Repeat(c, n) }
	cases := []errCase{
		{"state other", `{"state":"offline"}`, inv, "/state", `"online" or "degraded"`},
		{"state case", `{"state":"Online"}`, inv, "/state", ""},
		{"billing_mode upper", on(`"billing_mode":"Sub"`), inv, "/billing_mode", "must be a code"},
		{"billing_mode empty", on(`"billing_mode":""`), inv, "/billing_mode", ""},
		{"billing_mode space", on(`"billing_mode":"a b"`), inv, "/billing_mode", ""},
		{"billing_mode slash", on(`"billing_mode":"a/b"`), inv, "/billing_mode", ""},
		{"billing_mode leading dash", on(`"billing_mode":"-a"`), inv, "/billing_mode", ""},
		{"billing_mode too long", on(`"billing_mode":"` + long(MaxCodeLen+1, "a") + `"`), inv, "/billing_mode", "at most 64 bytes"},
		{"billing_mode bidi", on(`"billing_mode":"a\u202eb"`), inv, "/billing_mode", ""},
		{"billing_mode newline escape", on(`"billing_mode":"a\nb"`), inv, "/billing_mode", ""},
		{"supported element", on(`"billing_modes_supported":["api","API"]`), inv, "/billing_modes_supported/1", ""},
		{"tool_class", on(`"tool_class":"claude code"`), inv, "/tool_class", ""},
		{"runtime_version space", on(`"runtime_version":"1.2 beta"`), inv, "/runtime_version", "must be a version"},
		{"runtime_version leading dot", on(`"runtime_version":".1"`), inv, "/runtime_version", ""},
		{"runtime_version too long", on(`"runtime_version":"` + long(MaxVersionLen+1, "1") + `"`), inv, "/runtime_version", ""},
		{"key_type", on(`"billing_evidence":{"key_type":"sk-ant-XYZ","method":"m"}`), inv, "/billing_evidence/key_type", ""},
		{"method", on(`"billing_evidence":{"key_type":"api_key","method":"/home/me/.env"}`), inv, "/billing_evidence/method", ""},
		{"followups", on(`"details":{"capabilities":{"followups":"interrupt"}}`), inv, "/details/capabilities/followups", `"steer" or "queue"`},
		{"active run not uuid", on(`"details":{"active_runs":["run-1"]}`), inv, "/details/active_runs/0", "UUID"},
		{"active run no dashes", on(`"details":{"active_runs":["4f1c2a9e8b7d4c3e9a6f1d2e3f4a5b6c"]}`), inv, "/details/active_runs/0", ""},
		{"active run bad hex", on(`"details":{"active_runs":["4f1c2a9e-8b7d-4c3e-9a6f-1d2e3f4a5b6g"]}`), inv, "/details/active_runs/0", ""},
		{"active run braces", on(`"details":{"active_runs":["{4f1c2a9e-8b7d-4c3e-9a6f-1d2e3f4a5b6}"]}`), inv, "/details/active_runs/0", ""},
		{"degraded reason", `{"state":"degraded","details":{"degraded_reasons":["ok","Not OK"]}}`, inv, "/details/degraded_reasons/1", ""},
		{"adapter name", on(`"details":{"adapter":{"name":"Rollcall"}}`), inv, "/details/adapter/name", "must be a name"},
		{"adapter name colon", on(`"details":{"adapter":{"name":"a:b"}}`), inv, "/details/adapter/name", ""},
		{"adapter name too long", on(`"details":{"adapter":{"name":"` + long(MaxNameLen+1, "a") + `"}}`), inv, "/details/adapter/name", ""},
		{"adapter version", on(`"details":{"adapter":{"name":"a","version":"1 0"}}`), inv, "/details/adapter/version", ""},
		{"runtime name", on(`"details":{"runtime":{"name":"_r"}}`), inv, "/details/runtime/name", ""},
		{"protocol zero", on(`"details":{"protocol_version":0}`), inv, "/details/protocol_version", "positive integer"},
		{"protocol negative", on(`"details":{"protocol_version":-1}`), inv, "/details/protocol_version", ""},
		{"protocol fraction", on(`"details":{"protocol_version":1.5}`), inv, "/details/protocol_version", ""},
		{"protocol integral fraction", on(`"details":{"protocol_version":1.0}`), inv, "/details/protocol_version", ""},
		{"protocol exponent", on(`"details":{"protocol_version":1e3}`), inv, "/details/protocol_version", ""},
		{"protocol too large", on(`"details":{"protocol_version":2147483648}`), inv, "/details/protocol_version", ""},
		{"protocol huge", on(`"details":{"protocol_version":123456789012345678901234567890}`), inv, "/details/protocol_version", ""},
		{"readiness queue", on(`"project_readiness":[{"queue":"Reviews","ready":true}]`), inv, "/project_readiness/0/queue", ""},
		{"readiness reason", on(`"project_readiness":[{"queue":"a","ready":false,"reason":"no creds"}]`), inv, "/project_readiness/0/reason", ""},
		{"readiness empty reason", on(`"project_readiness":[{"queue":"a","ready":false,"reason":""}]`), inv, "/project_readiness/0/reason", ""},
	}
	runErrCases(t, cases)
	// A rejected value is never echoed: it may be a secret.
	_, err := DecodeHeartbeat([]byte(on(`"billing_mode":"sk-ant-SECRET"`)))
	if strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("error echoes the rejected value: %v", err)
	}
}

func TestDecodeDistinct(t *testing.T) {
	var runs, runsDup []string
	for i := range 40 {
		runs = append(runs, fmt.Sprintf(`"00000000-0000-4000-8000-%012d"`, i))
	}
	runsDup = append(append([]string{}, runs...), runs[7])
	cases := []errCase{
		{"supported", on(`"billing_modes_supported":["a","b","a"]`), inv, "/billing_modes_supported/2", `"a" is listed twice (first at index 0)`},
		{"reasons", `{"state":"degraded","details":{"degraded_reasons":["x","x"]}}`, inv, "/details/degraded_reasons/1", ""},
		{"runs case-insensitive", on(`"details":{"active_runs":["4f1c2a9e-8b7d-4c3e-9a6f-1d2e3f4a5b6c","4F1C2A9E-8B7D-4C3E-9A6F-1D2E3F4A5B6C"]}`),
			inv, "/details/active_runs/1", ""},
		{"runs long list", on(`"details":{"active_runs":[` + strings.Join(runsDup, ",") + `]}`), inv, "/details/active_runs/40", ""},
		{"readiness queue", on(`"project_readiness":[{"queue":"a","ready":true},{"queue":"b","ready":true},{"queue":"a","ready":false}]`),
			inv, "/project_readiness", `queue "a" is listed twice (entries 0 and 2)`},
	}
	runErrCases(t, cases)
	if _, err := DecodeHeartbeat([]byte(on(`"details":{"active_runs":[` + strings.Join(runs, ",") + `]}`))); err != nil {
		t.Fatalf("40 distinct runs: %v", err)
	}
}

func TestDecodeRequiredAndStateRule(t *testing.T) {
	cases := []errCase{
		{"empty object", `{}`, inv, "/state", "required member"},
		{"no state", `{"billing_mode":"a"}`, inv, "/state", ""},
		{"evidence no key_type", on(`"billing_evidence":{"method":"m"}`), inv, "/billing_evidence/key_type", ""},
		{"evidence no method", on(`"billing_evidence":{"key_type":"oauth"}`), inv, "/billing_evidence/method", ""},
		{"evidence empty", on(`"billing_evidence":{}`), inv, "/billing_evidence/key_type", ""},
		{"adapter no name", on(`"details":{"adapter":{"version":"1"}}`), inv, "/details/adapter/name", ""},
		{"runtime no name", on(`"details":{"runtime":{}}`), inv, "/details/runtime/name", ""},
		{"readiness no queue", on(`"project_readiness":[{"ready":true}]`), inv, "/project_readiness/0/queue", ""},
		{"readiness no ready", on(`"project_readiness":[{"queue":"a"}]`), inv, "/project_readiness/0/ready", ""},
		{"degraded without reasons", `{"state":"degraded"}`, inv, "/state", "degraded_reasons"},
		{"degraded with empty reasons", `{"state":"degraded","details":{"degraded_reasons":[]}}`, inv, "/state", ""},
		{"online with reasons", `{"state":"online","details":{"degraded_reasons":["x"]}}`, inv, "/state", `must be "degraded"`},
		{"reasons before state", `{"details":{"degraded_reasons":["x"]},"state":"online"}`, inv, "/state", ""},
		{"missing state before degraded rule", `{"details":{"degraded_reasons":["x"]}}`, inv, "/state", "required member"},
		// Document order: a violation inside a member comes before the
		// end-of-object rules, and the first of two violations wins.
		{"form before degraded rule", `{"billing_mode":"BAD","state":"degraded"}`, inv, "/billing_mode", ""},
		{"missing inner member before later unknown", on(`"billing_evidence":{"method":"m"},"zz":1`), inv, "/billing_evidence/key_type", ""},
		{"first of two", on(`"tool_class":"X","billing_mode":"Y"`), inv, "/tool_class", ""},
		{"wrong type before unknown", `{"state":2,"x":1}`, inv, "/state", ""},
	}
	runErrCases(t, cases)
}

func TestDecodeTypes(t *testing.T) {
	cases := []errCase{
		{"state number", `{"state":1}`, inv, "/state", "must be a string, not a number"},
		{"state object", `{"state":{}}`, inv, "/state", "not an object"},
		{"state deep array", `{"state":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}`, inv, "/state", "not an array"},
		{"billing_mode bool", on(`"billing_mode":true`), inv, "/billing_mode", "not a boolean"},
		{"supported string", on(`"billing_modes_supported":"api"`), inv, "/billing_modes_supported", "must be an array"},
		{"supported element number", on(`"billing_modes_supported":[1]`), inv, "/billing_modes_supported/0", ""},
		{"supported element array", on(`"billing_modes_supported":["a",["b"]]`), inv, "/billing_modes_supported/1", ""},
		{"tool_class array", on(`"tool_class":["x"]`), inv, "/tool_class", ""},
		{"runtime_version number", on(`"runtime_version":1.2`), inv, "/runtime_version", ""},
		{"evidence array", on(`"billing_evidence":[]`), inv, "/billing_evidence", "must be an object"},
		{"evidence string", on(`"billing_evidence":"oauth"`), inv, "/billing_evidence", ""},
		{"evidence key_type number", on(`"billing_evidence":{"key_type":1,"method":"m"}`), inv, "/billing_evidence/key_type", ""},
		{"details string", on(`"details":"x"`), inv, "/details", ""},
		{"details array", on(`"details":[]`), inv, "/details", ""},
		{"capabilities array", on(`"details":{"capabilities":[]}`), inv, "/details/capabilities", ""},
		{"followups bool", on(`"details":{"capabilities":{"followups":true}}`), inv, "/details/capabilities/followups", ""},
		{"components string", on(`"details":{"capabilities":{"components":"true"}}`), inv, "/details/capabilities/components", "must be a boolean, not a string"},
		{"voice_input number", on(`"details":{"capabilities":{"voice_input":1}}`), inv, "/details/capabilities/voice_input", ""},
		{"title object", on(`"details":{"capabilities":{"title":{}}}`), inv, "/details/capabilities/title", ""},
		{"files_out array", on(`"details":{"capabilities":{"files_out":[]}}`), inv, "/details/capabilities/files_out", ""},
		{"active_runs object", on(`"details":{"active_runs":{}}`), inv, "/details/active_runs", ""},
		{"active_runs element number", on(`"details":{"active_runs":[1]}`), inv, "/details/active_runs/0", ""},
		{"degraded_reasons string", on(`"details":{"degraded_reasons":"x"}`), inv, "/details/degraded_reasons", ""},
		{"adapter string", on(`"details":{"adapter":"a"}`), inv, "/details/adapter", ""},
		{"adapter name number", on(`"details":{"adapter":{"name":1}}`), inv, "/details/adapter/name", ""},
		{"runtime number", on(`"details":{"runtime":1}`), inv, "/details/runtime", ""},
		{"runtime name bool", on(`"details":{"runtime":{"name":false}}`), inv, "/details/runtime/name", ""},
		{"protocol string", on(`"details":{"protocol_version":"1"}`), inv, "/details/protocol_version", "not a string"},
		{"readiness object", on(`"project_readiness":{}`), inv, "/project_readiness", ""},
		{"readiness item string", on(`"project_readiness":["a"]`), inv, "/project_readiness/0", ""},
		{"readiness queue number", on(`"project_readiness":[{"queue":1,"ready":true}]`), inv, "/project_readiness/0/queue", ""},
		{"readiness ready string", on(`"project_readiness":[{"queue":"a","ready":"true"}]`), inv, "/project_readiness/0/ready", ""},
		{"readiness ready number", on(`"project_readiness":[{"queue":"a","ready":1}]`), inv, "/project_readiness/0/ready", ""},
		{"readiness reason bool", on(`"project_readiness":[{"queue":"a","ready":true,"reason":false}]`), inv, "/project_readiness/0/reason", ""},
	}
	runErrCases(t, cases)
}

func TestDecodeNulls(t *testing.T) {
	cases := []errCase{
		{"state", `{"state":null}`, inv, "/state", "not null"},
		{"billing_mode", on(`"billing_mode":null`), inv, "/billing_mode", "not null"},
		{"billing_modes_supported", on(`"billing_modes_supported":null`), inv, "/billing_modes_supported", ""},
		{"supported element", on(`"billing_modes_supported":[null]`), inv, "/billing_modes_supported/0", ""},
		{"tool_class", on(`"tool_class":null`), inv, "/tool_class", ""},
		{"runtime_version", on(`"runtime_version":null`), inv, "/runtime_version", ""},
		{"billing_evidence", on(`"billing_evidence":null`), inv, "/billing_evidence", ""},
		{"key_type", on(`"billing_evidence":{"key_type":null,"method":"m"}`), inv, "/billing_evidence/key_type", ""},
		{"details", on(`"details":null`), inv, "/details", ""},
		{"capabilities", on(`"details":{"capabilities":null}`), inv, "/details/capabilities", ""},
		{"followups", on(`"details":{"capabilities":{"followups":null}}`), inv, "/details/capabilities/followups", ""},
		{"components", on(`"details":{"capabilities":{"components":null}}`), inv, "/details/capabilities/components", ""},
		{"active_runs", on(`"details":{"active_runs":null}`), inv, "/details/active_runs", ""},
		{"degraded_reasons", on(`"details":{"degraded_reasons":null}`), inv, "/details/degraded_reasons", ""},
		{"adapter", on(`"details":{"adapter":null}`), inv, "/details/adapter", ""},
		{"adapter version", on(`"details":{"adapter":{"name":"a","version":null}}`), inv, "/details/adapter/version", ""},
		{"runtime", on(`"details":{"runtime":null}`), inv, "/details/runtime", ""},
		{"protocol_version", on(`"details":{"protocol_version":null}`), inv, "/details/protocol_version", ""},
		{"project_readiness", on(`"project_readiness":null`), inv, "/project_readiness", ""},
		{"readiness item", on(`"project_readiness":[null]`), inv, "/project_readiness/0", ""},
		{"readiness reason", on(`"project_readiness":[{"queue":"a","ready":true,"reason":null}]`), inv, "/project_readiness/0/reason", ""},
	}
	runErrCases(t, cases)
}

func TestDecodeDuplicateKeys(t *testing.T) {
	cases := []errCase{
		{"state", `{"state":"online","state":"degraded"}`, inv, "/state", `"state" appears twice`},
		{"state escaped", `{"state":"online","st\u0061te":"online"}`, inv, "/state", ""},
		{"billing_mode", on(`"billing_mode":"a","billing_mode":"b"`), inv, "/billing_mode", ""},
		{"billing_modes_supported", on(`"billing_modes_supported":[],"billing_modes_supported":[]`), inv, "/billing_modes_supported", ""},
		{"tool_class", on(`"tool_class":"a","tool_class":"a"`), inv, "/tool_class", ""},
		{"runtime_version", on(`"runtime_version":"1","runtime_version":"2"`), inv, "/runtime_version", ""},
		{"billing_evidence", on(`"billing_evidence":{"key_type":"a","method":"m"},"billing_evidence":{"key_type":"a","method":"m"}`), inv, "/billing_evidence", ""},
		{"key_type", on(`"billing_evidence":{"key_type":"a","key_type":"b","method":"m"}`), inv, "/billing_evidence/key_type", ""},
		{"method", on(`"billing_evidence":{"key_type":"a","method":"m","method":"m"}`), inv, "/billing_evidence/method", ""},
		{"details", on(`"details":{},"details":{}`), inv, "/details", ""},
		{"capabilities", on(`"details":{"capabilities":{},"capabilities":{}}`), inv, "/details/capabilities", ""},
		{"followups", on(`"details":{"capabilities":{"followups":"steer","followups":"queue"}}`), inv, "/details/capabilities/followups", ""},
		{"components", on(`"details":{"capabilities":{"components":true,"components":false}}`), inv, "/details/capabilities/components", ""},
		{"files_out", on(`"details":{"capabilities":{"files_out":true,"files_out":true}}`), inv, "/details/capabilities/files_out", ""},
		{"active_runs", on(`"details":{"active_runs":[],"active_runs":[]}`), inv, "/details/active_runs", ""},
		{"degraded_reasons", on(`"details":{"degraded_reasons":[],"degraded_reasons":[]}`), inv, "/details/degraded_reasons", ""},
		{"adapter", on(`"details":{"adapter":{"name":"a"},"adapter":{"name":"a"}}`), inv, "/details/adapter", ""},
		{"adapter name", on(`"details":{"adapter":{"name":"a","name":"b"}}`), inv, "/details/adapter/name", ""},
		{"adapter version", on(`"details":{"adapter":{"name":"a","version":"1","version":"1"}}`), inv, "/details/adapter/version", ""},
		{"runtime", on(`"details":{"runtime":{"name":"a"},"runtime":{"name":"a"}}`), inv, "/details/runtime", ""},
		{"runtime name", on(`"details":{"runtime":{"name":"a","name":"a"}}`), inv, "/details/runtime/name", ""},
		{"protocol_version", on(`"details":{"protocol_version":1,"protocol_version":1}`), inv, "/details/protocol_version", ""},
		{"project_readiness", on(`"project_readiness":[],"project_readiness":[]`), inv, "/project_readiness", ""},
		{"readiness queue", on(`"project_readiness":[{"queue":"a","queue":"b","ready":true}]`), inv, "/project_readiness/0/queue", ""},
		{"readiness ready", on(`"project_readiness":[{"queue":"a","ready":true,"ready":false}]`), inv, "/project_readiness/0/ready", ""},
		{"readiness reason", on(`"project_readiness":[{"queue":"a","ready":true,"reason":"r","reason":"r"}]`), inv, "/project_readiness/0/reason", ""},
	}
	runErrCases(t, cases)
}

func TestDecodeMalformed(t *testing.T) {
	cases := []errCase{
		{"empty", ``, inv, "", "byte offset 0"},
		{"whitespace only", "  \n", inv, "", "byte offset 3"},
		{"open brace", `{`, inv, "", "byte offset 1"},
		{"unterminated", `{"state":"online"`, inv, "", "byte offset 17"},
		{"trailing comma", `{"state":"online",}`, inv, "", "byte offset 18"},
		{"trailing comma in list", on(`"billing_modes_supported":["a",]`), inv, "", ""},
		{"leading comma", `{,"state":"online"}`, inv, "", ""},
		{"missing colon", `{"state" "online"}`, inv, "", ""},
		{"single quotes", `{'state':'online'}`, inv, "", ""},
		{"trailing data", `{"state":"online"} x`, inv, "", "byte offset 19"},
		{"second object", `{"state":"online"}{}`, inv, "", "byte offset 18"},
		{"raw control char", "{\"state\":\"online\",\"billing_mode\":\"a\tb\"}", inv, "", ""},
		{"bad escape", `{"state":"onl\ine"}`, inv, "", ""},
		{"short unicode escape", `{"state":"\u006"}`, inv, "", ""},
		{"bad literal", on(`"details":{"capabilities":{"title":tru}}`), inv, "", "byte offset 56: invalid character '}' in literal true"},
		{"literal cut off", `{"state":"online","details":{"capabilities":{"title":tru`, inv, "", "byte offset 56: unexpected end of JSON input"},
		{"leading zero", on(`"details":{"protocol_version":01}`), inv, "", "byte offset 49: invalid character '1'"},
		{"bare minus", on(`"details":{"protocol_version":-}`), inv, "", ""},
		{"number then letter", on(`"details":{"protocol_version":1x}`), inv, "", ""},
		{"unclosed junk after unknown", `{"x":` + strings.Repeat("[", 100), inv, "", ""},
		{"too deep", `{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, inv, "", "exceeded max depth"},
		{"malformed beats unknown", `{"x":1,"state":}`, inv, "", ""},
		{"malformed beats wrong type", `{"state":1,}`, inv, "", ""},
		{"malformed beats missing state", `{"billing_mode":"a"`, inv, "", ""},
		{"too large", `{"state":"online"}` + strings.Repeat(" ", MaxBodyBytes), inv, "", "at most 65536"},
	}
	runErrCases(t, cases)
}

func TestDecodeNotAnObject(t *testing.T) {
	for _, body := range []string{`[]`, `"online"`, `null`, `1`, `true`, ` [{"state":"online"}] `} {
		_, err := DecodeHeartbeat([]byte(body))
		de := assertErr(t, err, inv, "")
		if !strings.Contains(de.Detail, "must be a JSON object") {
			t.Errorf("%s: detail %q", body, de.Detail)
		}
	}
}

func runErrCases(t *testing.T, cases []errCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := DecodeHeartbeat([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted %s as %#v", tc.body, h)
			}
			de := assertErr(t, err, tc.code, tc.ptr)
			if tc.detail != "" && !strings.Contains(de.Detail, tc.detail) {
				t.Fatalf("detail %q does not contain %q", de.Detail, tc.detail)
			}
			if !reflect.DeepEqual(h, Heartbeat{}) {
				t.Fatalf("a rejected body returned %#v", h)
			}
		})
	}
}

// TestDecodeLargeBody covers bodies beyond the shared-copy limit: every
// string is copied on its own, and the values do not depend on the path.
func TestDecodeLargeBody(t *testing.T) {
	var runs []string
	for i := range 200 {
		runs = append(runs, fmt.Sprintf(`"00000000-0000-4000-8000-%012d"`, i))
	}
	body := on(`"billing_mode":"api","details":{"active_runs":[` + strings.Join(runs, ",") + `]}`)
	if len(body) <= shareLimit {
		t.Fatalf("body of %d bytes is not large", len(body))
	}
	h, err := DecodeHeartbeat([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Details.ActiveRuns) != 200 || *h.BillingMode != "api" || h.Details.ActiveRuns[199] != "00000000-0000-4000-8000-000000000199" {
		t.Fatalf("got %v runs, mode %v", len(h.Details.ActiveRuns), *h.BillingMode)
	}
}

// TestDecodeDoesNotRetainBody: the caller may reuse the body buffer.
func TestDecodeDoesNotRetainBody(t *testing.T) {
	for _, src := range []string{fullBody, fullBody + strings.Repeat(" ", shareLimit)} {
		body := []byte(src)
		h, err := DecodeHeartbeat(body)
		if err != nil {
			t.Fatal(err)
		}
		want := string(h.Canonical())
		for i := range body {
			body[i] = 'X'
		}
		if got := string(h.Canonical()); got != want {
			t.Fatalf("heartbeat changed with the body buffer:\n%s\n%s", got, want)
		}
	}
}

func TestCanonicalHandBuilt(t *testing.T) {
	h := Heartbeat{State: "on\"line\n\x01\xff<", BillingMode: sp("é")}
	b := h.Canonical()
	if !json.Valid(b) {
		t.Fatalf("invalid JSON %q", b)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil || m["state"] != "on\"line\n\x01\uFFFD<" || m["billing_mode"] != "é" {
		t.Fatalf("%q → %v %v", b, m, err)
	}
	if got := string((Heartbeat{State: "online", ProjectReadinessPresent: true}).Canonical()); got != `{"state":"online","project_readiness":[]}` {
		t.Fatalf("got %s", got)
	}
}

func TestReportedOfHeartbeat(t *testing.T) {
	h := Heartbeat{State: StateOnline, BillingMode: sp("api"), ToolClass: sp("cli")}
	if r := h.Reported(); r.BillingMode != h.BillingMode || r.ToolClass != h.ToolClass {
		t.Fatalf("%+v", r)
	}
}
