package liveness

import (
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Canonical encodes h as compact JSON with the members in the order of the
// table of (design: Heartbeat body): state, billing_mode, billing_modes_supported,
// tool_class, runtime_version, billing_evidence {key_type, method}, details
// {capabilities {followups, components, voice_input, title, files_out},
// active_runs, degraded_reasons, adapter {name, version}, runtime {name},
// protocol_version}, project_readiness [{queue, ready, reason}].
//
// Nil members are left out; a non-nil empty list is written as []; details
// is left out when it has no members; project_readiness is written exactly
// when ProjectReadinessPresent is true. For an h returned by
// DecodeHeartbeat the result decodes to a value equal to h, and encoding
// that again yields the same bytes. Canonical does not check h: a value
// built by hand is encoded as it is (strings escaped as JSON needs).
func (h Heartbeat) Canonical() []byte {
	b := make([]byte, 0, h.sizeHint())
	b = append(b, `{"state":`...)
	b = appendString(b, h.State)
	if h.BillingMode != nil {
		b = append(b, `,"billing_mode":`...)
		b = appendString(b, *h.BillingMode)
	}
	if h.BillingModesSupported != nil {
		b = append(b, `,"billing_modes_supported":`...)
		b = appendStrings(b, h.BillingModesSupported)
	}
	if h.ToolClass != nil {
		b = append(b, `,"tool_class":`...)
		b = appendString(b, *h.ToolClass)
	}
	if h.RuntimeVersion != nil {
		b = append(b, `,"runtime_version":`...)
		b = appendString(b, *h.RuntimeVersion)
	}
	if ev := h.BillingEvidence; ev != nil {
		b = append(b, `,"billing_evidence":{"key_type":`...)
		b = appendString(b, ev.KeyType)
		b = append(b, `,"method":`...)
		b = appendString(b, ev.Method)
		b = append(b, '}')
	}
	if !h.Details.empty() {
		b = append(b, `,"details":`...)
		b = h.Details.appendJSON(b)
	}
	if h.ProjectReadinessPresent {
		b = append(b, `,"project_readiness":[`...)
		for i, e := range h.ProjectReadiness {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"queue":`...)
			b = appendString(b, e.Queue)
			b = append(b, `,"ready":`...)
			b = strconv.AppendBool(b, e.Ready)
			if e.Reason != "" {
				b = append(b, `,"reason":`...)
				b = appendString(b, e.Reason)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// sizeHint estimates the length of Canonical: the strings plus a generous
// allowance per member, so the buffer rarely grows.
func (h Heartbeat) sizeHint() int {
	n := 32 + len(h.State)
	str := func(p *string) {
		if p != nil {
			n += 24 + len(*p)
		}
	}
	strs := func(l []string) {
		n += 32
		for _, s := range l {
			n += 3 + len(s)
		}
	}
	str(h.BillingMode)
	str(h.ToolClass)
	str(h.RuntimeVersion)
	strs(h.BillingModesSupported)
	if ev := h.BillingEvidence; ev != nil {
		n += 48 + len(ev.KeyType) + len(ev.Method)
	}
	d := h.Details
	if d.Capabilities != nil {
		n += 128
	}
	strs(d.ActiveRuns)
	strs(d.DegradedReasons)
	if d.Adapter != nil {
		n += 48 + len(d.Adapter.Name)
		str(d.Adapter.Version)
	}
	if d.Runtime != nil {
		n += 32 + len(d.Runtime.Name)
	}
	n += 64 // details, protocol_version
	for _, e := range h.ProjectReadiness {
		n += 48 + len(e.Queue) + len(e.Reason)
	}
	return n + 32
}

func (d Details) empty() bool {
	return d.Capabilities == nil && d.ActiveRuns == nil && d.DegradedReasons == nil &&
		d.Adapter == nil && d.Runtime == nil && d.ProtocolVersion == nil
}

func (d Details) appendJSON(b []byte) []byte {
	o := object{b: append(b, '{')}
	if c := d.Capabilities; c != nil {
		o.key("capabilities")
		c2 := object{b: append(o.b, '{')}
		if c.Followups != nil {
			c2.key("followups")
			c2.b = appendString(c2.b, *c.Followups)
		}
		c2.boolean("components", c.Components)
		c2.boolean("voice_input", c.VoiceInput)
		c2.boolean("title", c.Title)
		c2.boolean("files_out", c.FilesOut)
		o.b = append(c2.b, '}')
	}
	if d.ActiveRuns != nil {
		o.key("active_runs")
		o.b = appendStrings(o.b, d.ActiveRuns)
	}
	if d.DegradedReasons != nil {
		o.key("degraded_reasons")
		o.b = appendStrings(o.b, d.DegradedReasons)
	}
	if a := d.Adapter; a != nil {
		o.key("adapter")
		o.b = append(o.b, `{"name":`...)
		o.b = appendString(o.b, a.Name)
		if a.Version != nil {
			o.b = append(o.b, `,"version":`...)
			o.b = appendString(o.b, *a.Version)
		}
		o.b = append(o.b, '}')
	}
	if r := d.Runtime; r != nil {
		o.key("runtime")
		o.b = append(o.b, `{"name":`...)
		o.b = appendString(o.b, r.Name)
		o.b = append(o.b, '}')
	}
	if d.ProtocolVersion != nil {
		o.key("protocol_version")
		o.b = strconv.AppendInt(o.b, int64(*d.ProtocolVersion), 10)
	}
	return append(o.b, '}')
}

// object writes the members of one JSON object, placing the commas.
type object struct {
	b    []byte
	more bool
}

func (o *object) key(k string) {
	if o.more {
		o.b = append(o.b, ',')
	}
	o.more = true
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, `":`...)
}

func (o *object) boolean(k string, v *bool) {
	if v != nil {
		o.key(k)
		o.b = strconv.AppendBool(o.b, *v)
	}
}

func appendStrings(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendString appends s as a JSON string, quoted by the strict-JSON
// library (jsontext). Checked values are plain ASCII; anything else is
// escaped so the output is always valid JSON (invalid UTF-8 becomes
// U+FFFD, the error that reports it is of no use here).
func appendString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

// MarshalJSON returns h.Canonical().
func (h Heartbeat) MarshalJSON() ([]byte, error) { return h.Canonical(), nil }
