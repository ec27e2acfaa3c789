package liveness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/rollcall/rollcall/internal/domain"
)

// ---- generators of valid heartbeats ----

var (
	genName    = rapid.StringMatching(`[a-z0-9][a-z0-9._-]{0,12}`)
	genCode    = rapid.StringMatching(`[a-z0-9][a-z0-9_.:-]{0,12}`)
	genVersion = rapid.StringMatching(`[0-9A-Za-z][0-9A-Za-z.+_-]{0,12}`)
	genUUID    = rapid.Custom(func(t *rapid.T) string {
		b := rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "uuid")
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	})
)

func optional[V any](t *rapid.T, g *rapid.Generator[V], label string) *V {
	return rapid.Ptr(g, true).Draw(t, label)
}

// list draws nil (not reported), an empty list, or distinct elements.
func list(t *rapid.T, g *rapid.Generator[string], label string, minLen int) []string {
	if minLen == 0 && rapid.IntRange(0, 3).Draw(t, label+"_kind") == 0 {
		return nil
	}
	return rapid.SliceOfNDistinct(g, minLen, 5, func(s string) string { return s }).Draw(t, label)
}

var genHeartbeat = rapid.Custom(func(t *rapid.T) Heartbeat {
	var h Heartbeat
	h.State = rapid.SampledFrom([]string{StateOnline, StateDegraded}).Draw(t, "state")
	h.BillingMode = optional(t, genCode, "billing_mode")
	h.BillingModesSupported = list(t, genCode, "billing_modes_supported", 0)
	h.ToolClass = optional(t, genCode, "tool_class")
	h.RuntimeVersion = optional(t, genVersion, "runtime_version")
	if rapid.Bool().Draw(t, "has_evidence") {
		h.BillingEvidence = &BillingEvidence{
			KeyType: rapid.OneOf(rapid.SampledFrom([]string{"api_key", "oauth", "cloud", "unknown"}), genCode).Draw(t, "key_type"),
			Method:  genCode.Draw(t, "method"),
		}
	}
	if rapid.Bool().Draw(t, "has_caps") {
		h.Details.Capabilities = &Capabilities{
			Followups:  optional(t, rapid.SampledFrom([]string{FollowupsSteer, FollowupsQueue}), "followups"),
			Components: optional(t, rapid.Bool(), "components"),
			VoiceInput: optional(t, rapid.Bool(), "voice_input"),
			Title:      optional(t, rapid.Bool(), "title"),
			FilesOut:   optional(t, rapid.Bool(), "files_out"),
		}
	}
	h.Details.ActiveRuns = list(t, genUUID, "active_runs", 0)
	if h.State == StateDegraded {
		h.Details.DegradedReasons = list(t, genCode, "degraded_reasons", 1)
	} else if rapid.Bool().Draw(t, "empty_reasons") {
		h.Details.DegradedReasons = []string{}
	}
	if rapid.Bool().Draw(t, "has_adapter") {
		h.Details.Adapter = &Adapter{Name: genName.Draw(t, "adapter_name"), Version: optional(t, genVersion, "adapter_version")}
	}
	if rapid.Bool().Draw(t, "has_runtime") {
		h.Details.Runtime = &Runtime{Name: genName.Draw(t, "runtime_name")}
	}
	h.Details.ProtocolVersion = optional(t, rapid.IntRange(1, MaxProtocolVersion), "protocol_version")
	if rapid.Bool().Draw(t, "has_readiness") {
		h.ProjectReadinessPresent = true
		h.ProjectReadiness = rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) ReadinessEntry {
			e := ReadinessEntry{Queue: genName.Draw(t, "queue"), Ready: rapid.Bool().Draw(t, "ready")}
			if rapid.Bool().Draw(t, "has_reason") {
				e.Reason = genCode.Draw(t, "reason")
			}
			return e
		}), 0, 4, func(e ReadinessEntry) string { return e.Queue }).Draw(t, "project_readiness")
	}
	return h
})

// TestPropertyRoundTrip: every valid heartbeat survives Canonical →
// DecodeHeartbeat unchanged, also re-indented, and Canonical is a fixed point.
func TestPropertyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHeartbeat.Draw(t, "heartbeat")
		c := h.Canonical()
		got, err := DecodeHeartbeat(c)
		if err != nil {
			t.Fatalf("canonical %s rejected: %v", c, err)
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("round trip of %s\n got %#v\nwant %#v", c, got, h)
		}
		if c2 := got.Canonical(); !bytes.Equal(c2, c) {
			t.Fatalf("canonical is not a fixed point:\n%s\n%s", c, c2)
		}
		var ind bytes.Buffer
		if err := json.Indent(&ind, c, " ", "\t"); err != nil {
			t.Fatal(err)
		}
		if got, err := DecodeHeartbeat(ind.Bytes()); err != nil || !reflect.DeepEqual(got, h) {
			t.Fatalf("indented %s: %#v, %v", ind.Bytes(), got, err)
		}
	})
}

// ---- an ordered JSON tree, to insert members anywhere ----

type jnode struct {
	obj   bool
	arr   bool
	keys  []string
	vals  []*jnode
	elems []*jnode
	raw   []byte // a scalar, as JSON
}

func parseTree(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &jnode{obj: true}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				val, err := parseTree(dec)
				if err != nil {
					return nil, err
				}
				n.keys, n.vals = append(n.keys, k.(string)), append(n.vals, val)
			}
			_, err := dec.Token()
			return n, err
		case '[':
			n := &jnode{arr: true}
			for dec.More() {
				e, err := parseTree(dec)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, e)
			}
			_, err := dec.Token()
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", v)
	default:
		raw, err := json.Marshal(v)
		return &jnode{raw: raw}, err
	}
}

func (n *jnode) write(w *bytes.Buffer) {
	switch {
	case n.obj:
		w.WriteByte('{')
		for i, k := range n.keys {
			if i > 0 {
				w.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			w.Write(kb)
			w.WriteByte(':')
			n.vals[i].write(w)
		}
		w.WriteByte('}')
	case n.arr:
		w.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				w.WriteByte(',')
			}
			e.write(w)
		}
		w.WriteByte(']')
	default:
		w.Write(n.raw)
	}
}

// objects lists the objects of a heartbeat tree with their pointers.
func (n *jnode) objects(ptr string, out *[]objAt) {
	if n.obj {
		*out = append(*out, objAt{n, ptr})
		for i, k := range n.keys {
			n.vals[i].objects(ptr+"/"+escapeToken(k), out)
		}
	}
	if n.arr {
		for i, e := range n.elems {
			e.objects(fmt.Sprintf("%s/%d", ptr, i), out)
		}
	}
}

type objAt struct {
	n   *jnode
	ptr string
}

// membersAt returns the members (design: Heartbeat body) allows in the object at ptr.
func membersAt(ptr string) []string {
	switch {
	case ptr == "":
		return []string{"state", "billing_mode", "billing_modes_supported", "tool_class", "runtime_version", "billing_evidence", "details", "project_readiness"}
	case ptr == "/billing_evidence":
		return []string{"key_type", "method"}
	case ptr == "/details":
		return []string{"capabilities", "active_runs", "degraded_reasons", "adapter", "runtime", "protocol_version"}
	case ptr == "/details/capabilities":
		return []string{"followups", "components", "voice_input", "title", "files_out"}
	case ptr == "/details/adapter":
		return []string{"name", "version"}
	case ptr == "/details/runtime":
		return []string{"name"}
	case strings.HasPrefix(ptr, "/project_readiness/"):
		return []string{"queue", "ready", "reason"}
	}
	panic("no object at " + ptr)
}

// genJSONValue generates any JSON value nested at most depth levels.
func genJSONValue(depth int) *rapid.Generator[any] {
	gens := []*rapid.Generator[any]{
		rapid.Just[any](nil),
		rapid.Map(rapid.Bool(), func(b bool) any { return b }),
		rapid.Map(rapid.Float64(), func(f float64) any { return f }),
		rapid.Map(rapid.String(), func(s string) any { return s }),
	}
	if depth > 0 {
		gens = append(gens,
			rapid.Map(rapid.SliceOfN(genJSONValue(depth-1), 0, 3), func(l []any) any { return l }),
			rapid.Map(rapid.MapOfN(rapid.String(), genJSONValue(depth-1), 0, 3), func(m map[string]any) any { return m }),
		)
	}
	return rapid.OneOf(gens...)
}

// TestPropertyUnknownMember: inserting any key that (design: Heartbeat body) does not allow,
// into any object of a valid heartbeat, at any position, with any value,
// yields unknown_member with the pointer of exactly that key.
func TestPropertyUnknownMember(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHeartbeat.Draw(t, "heartbeat")
		dec := json.NewDecoder(bytes.NewReader(h.Canonical()))
		dec.UseNumber()
		root, err := parseTree(dec)
		if err != nil {
			t.Fatal(err)
		}
		var objs []objAt
		root.objects("", &objs)
		at := rapid.SampledFrom(objs).Draw(t, "object")
		allowed := membersAt(at.ptr)
		key := rapid.OneOf(
			rapid.String(),
			rapid.SampledFrom([]string{"x", "", "~", "/", "~1", "a/b~c", "State", "state ", "name", "queue", "details", "capabilities"}),
		).Filter(func(k string) bool { return !slices.Contains(allowed, k) }).Draw(t, "key")
		value := genJSONValue(3).Draw(t, "value")
		raw, err := json.Marshal(value)
		if err != nil {
			t.Skip("value does not marshal")
		}
		pos := rapid.IntRange(0, len(at.n.keys)).Draw(t, "position")
		at.n.keys = slices.Insert(at.n.keys, pos, key)
		at.n.vals = slices.Insert(at.n.vals, pos, &jnode{raw: raw})
		var body bytes.Buffer
		root.write(&body)
		if body.Len() > MaxBodyBytes {
			t.Skip("too large")
		}
		_, err = DecodeHeartbeat(body.Bytes())
		var de *domain.Error
		want := at.ptr + "/" + escapeToken(key)
		if !errors.As(err, &de) || de.Code != domain.CodeUnknownMember || de.Pointer != want {
			t.Fatalf("body %s: got %v, want unknown_member at %q", body.Bytes(), err, want)
		}
	})
}
