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
	o := object{b: append(make([]byte, 0, h.sizeHint()), '{')}
	o.str("state", &h.State)
	o.str("billing_mode", h.BillingMode)
	o.strs("billing_modes_supported", h.BillingModesSupported)
	o.str("tool_class", h.ToolClass)
	o.str("runtime_version", h.RuntimeVersion)
	if ev := h.BillingEvidence; ev != nil {
		e := o.open("billing_evidence")
		e.str("key_type", &ev.KeyType)
		e.str("method", &ev.Method)
		o.close(e)
	}
	if !h.Details.empty() {
		d := o.open("details")
		h.Details.members(&d)
		o.close(d)
	}
	if h.ProjectReadinessPresent {
		o.key("project_readiness")
		o.b = append(o.b, '[')
		for i, r := range h.ProjectReadiness {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			e := object{b: append(o.b, '{')}
			e.str("queue", &r.Queue)
			e.boolean("ready", &r.Ready)
			if r.Reason != "" {
				e.str("reason", &r.Reason)
			}
			o.b = append(e.b, '}')
		}
		o.b = append(o.b, ']')
	}
	return append(o.b, '}')
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

// members writes d's members into o.
func (d Details) members(o *object) {
	if c := d.Capabilities; c != nil {
		co := o.open("capabilities")
		co.str("followups", c.Followups)
		co.boolean("components", c.Components)
		co.boolean("voice_input", c.VoiceInput)
		co.boolean("title", c.Title)
		co.boolean("files_out", c.FilesOut)
		o.close(co)
	}
	o.strs("active_runs", d.ActiveRuns)
	o.strs("degraded_reasons", d.DegradedReasons)
	if a := d.Adapter; a != nil {
		ao := o.open("adapter")
		ao.str("name", &a.Name)
		ao.str("version", a.Version)
		o.close(ao)
	}
	if r := d.Runtime; r != nil {
		ro := o.open("runtime")
		ro.str("name", &r.Name)
		o.close(ro)
	}
	if d.ProtocolVersion != nil {
		o.key("protocol_version")
		o.b = strconv.AppendInt(o.b, int64(*d.ProtocolVersion), 10)
	}
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

// open writes key k and starts its value, an object; close(in) ends it.
func (o *object) open(k string) object {
	o.key(k)
	return object{b: append(o.b, '{')}
}

// close ends in, an object open opened in o.
func (o *object) close(in object) { o.b = append(in.b, '}') }

// str writes member k when v is not nil.
func (o *object) str(k string, v *string) {
	if v != nil {
		o.key(k)
		o.b = appendString(o.b, *v)
	}
}

// strs writes member k as a list when v is not nil (a non-nil empty list
// is written as []).
func (o *object) strs(k string, v []string) {
	if v != nil {
		o.key(k)
		o.b = appendStrings(o.b, v)
	}
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
