package domain

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInputRules: each rule refuses with invalid_argument at the field's
// pointer, and accepts what the bounds allow.
func TestInputRules(t *testing.T) {
	cases := []struct {
		name string
		err  error
		ptr  string // "" = accepted
	}{
		{"code ok", ValidateCode("kind", "pull_request"), ""},
		{"code empty is absent", ValidateCode("kind", ""), ""},
		{"code upper case", ValidateCode("kind", "Bad"), "/kind"},
		{"display name control", ValidateDisplayName("a\nb"), "/name"},
		{"display name too long", ValidateDisplayName(strings.Repeat("x", MaxNameLen+1)), "/name"},
		{"billing mode not listed", ValidateBilling("api", []string{"plan"}, ""), "/billing_mode"},
		{"billing modes twice", ValidateBilling("", []string{"plan", "plan"}, ""), "/billing_modes/1"},
		{"billing ok", ValidateBilling("plan", []string{"api", "plan"}, "claude-code"), ""},
		{"text required", ValidateText("key", " ", 10, true), "/key"},
		{"text line break", ValidateText("key", "a\tb", 10, false), "/key"},
		{"note may span lines", ValidateNote("reason", "a\nb", 10), ""},
		{"note NUL", ValidateNote("reason", "a\x00", 10), "/reason"},
		{"json invalid", ValidateJSON("payload", json.RawMessage(`{`), 10), "/payload"},
		{"json too long", ValidateJSON("payload", json.RawMessage(`"01234567890"`), 10), "/payload"},
		{"person name blank", ValidatePersonName("  "), "/name"},
		{"role", ValidateRole("owner"), "/role"},
	}
	for _, c := range cases {
		if c.ptr == "" {
			if c.err != nil {
				t.Errorf("%s: refused: %v", c.name, c.err)
			}
			continue
		}
		e, ok := c.err.(*Error)
		if !ok || e.Code != CodeInvalidArgument || e.Pointer != c.ptr {
			t.Errorf("%s: %v, want invalid_argument at %s", c.name, c.err, c.ptr)
		}
	}
}

// TestHandoffTarget: the grant for to and queue, else the error naming
// what is granted.
func TestHandoffTarget(t *testing.T) {
	s := Scope{Handoff: []HandoffGrant{{AgentID: "id-b", Handle: "b", Queue: "q1"}, {AgentID: "id-b", Handle: "b", Queue: "q2"}}}
	if g, err := s.HandoffTarget("id-b", "q2"); err != nil || g.Queue != "q2" {
		t.Fatalf("by id: %+v, %v", g, err)
	}
	if g, err := s.HandoffTarget("b", "q1"); err != nil || g.AgentID != "id-b" {
		t.Fatalf("by handle: %+v, %v", g, err)
	}
	for _, c := range []struct{ to, queue, code, ptr, detail string }{
		{"", "q1", "invalid_argument", "/to", "to is required; granted: b/q1, b/q2"},
		{"c", "q1", "invalid_argument", "/to", `"c" is not an agent this agent may hand off to; granted: b/q1, b/q2`},
		{"b", "q3", "invalid_argument", "/queue", `queue "q3" is not granted for b; granted: b/q1, b/q2`},
	} {
		_, err := s.HandoffTarget(c.to, c.queue)
		e, ok := err.(*Error)
		if !ok || string(e.Code) != c.code || e.Pointer != c.ptr || e.Detail != c.detail {
			t.Errorf("HandoffTarget(%q, %q) = %v, want %s at %s: %s", c.to, c.queue, err, c.code, c.ptr, c.detail)
		}
	}
	if _, err := (Scope{}).HandoffTarget("b", "q1"); CodeOf(err) != CodeForbidden {
		t.Errorf("no grants: %v, want forbidden", err)
	}
}
