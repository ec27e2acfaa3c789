package liveness

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rollcall/rollcall/internal/domain"
	"github.com/rollcall/rollcall/internal/strictjson"
)

// The decoder is a single left-to-right walk over the body that parses only
// the members of agent_heartbeat.v1 and stops at the first violation. It is
// a strict RFC 8259 parser for everything it consumes, so a body it accepts
// is well-formed JSON. When the walk stops with an error, the strict-JSON
// layer checks the whole body once (strictjson.Heartbeat.Malformed): a
// malformed body is reported as such (with the byte offset) in preference
// to any other error. The happy path allocates only the values it returns.
//
// Why not the strict-JSON layer's Decode (github.com/go-json-experiment/json)
// like the other bodies: measured on the heartbeat (BenchmarkHeartbeatDecoders
// in package strictjson), the library filling the same shape without
// checking a single form takes about twice as long as this walk on a full
// body (1.3 to 3 times over eight runs) and six times as long on the
// minimal one, and allocates 24 times instead of 6 (1 instead of 0 on the
// minimal body); the goal is at most 1.5 times and no allocation
// (docs/benchmarks.md, One strict-JSON layer). The error texts the
// contracts share (unknown and repeated members, malformed bodies, JSON
// kinds) come from strictjson, and the tests and the fuzz target hold this
// walk to the same rules.

type decoder struct {
	b     []byte
	i     int
	share string // a copy of b shared by the returned strings, when b is small
	a     *arena
}

// shareLimit is the largest body whose returned strings share one copy of
// the body (one allocation instead of one per string). Larger bodies get one
// copy per string, so a padded body is never retained.
const shareLimit = 2048

// arena holds the values the pointers of a Heartbeat point at, so a decode
// allocates them at once.
type arena struct {
	billingMode, toolClass, runtimeVersion string
	evidence                               BillingEvidence
	caps                                   Capabilities
	followups                              string
	bools                                  [4]bool
	adapter                                Adapter
	adapterVersion                         string
	runtime                                Runtime
	protocolVersion                        int
}

func (d *decoder) arena() *arena {
	if d.a == nil {
		d.a = new(arena)
	}
	return d.a
}

func decode(body []byte) (Heartbeat, *domain.Error) {
	if len(body) > MaxBodyBytes {
		return Heartbeat{}, domain.Errorf(domain.CodeInvalidArgument,
			"the body has %d bytes; at most %d are allowed", len(body), MaxBodyBytes)
	}
	d := decoder{b: body}
	var h Heartbeat
	err := d.top(&h)
	if err == nil {
		return h, nil
	}
	if e := strictjson.Heartbeat.Malformed(body); e != nil {
		return Heartbeat{}, e
	}
	return Heartbeat{}, err
}

// ---- pointers and errors ----

// syntax reports malformed JSON at the cursor. decode replaces it with the
// report of encoding/json, which agrees with the walk on what is malformed.
func (d *decoder) syntax() *domain.Error {
	return invalid("malformed JSON at byte offset %d", d.i)
}

// escapeToken escapes one RFC 6901 reference token.
func escapeToken(s string) string { return strictjson.Escape(s) }

func elemPtr(base string, i int) string { return base + "/" + strconv.Itoa(i) }

// unknownMember reports key as unknown_member at base/key.
func unknownMember(base string, key []byte) *domain.Error {
	k := validUTF8(key)
	return strictjson.Heartbeat.Unknown(k, base+"/"+escapeToken(k), nil)
}

func duplicateKey(ptr, key string) *domain.Error {
	return strictjson.Heartbeat.Duplicate(key, ptr)
}

func missing(ptr, key string) *domain.Error {
	return invalid("required member %q is missing", key).At(ptr)
}

func isValueStart(c byte) bool {
	switch c {
	case '"', '{', '[', 't', 'f', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// want checks that the value at the cursor starts with c (after
// whitespace); otherwise it reports the wrong type (or malformed JSON).
func (d *decoder) want(c byte, what string) *domain.Error {
	d.ws()
	if d.i >= len(d.b) || !isValueStart(d.b[d.i]) {
		return d.syntax()
	}
	if got := d.b[d.i]; got != c {
		return invalid("must be %s, not %s", what, strictjson.KindName(got))
	}
	return nil
}

// ---- lexical level ----

func (d *decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next advances inside an object (end '}') or array (end ']') whose opening
// bracket was consumed: it reports whether another member or element
// follows, consuming the separating comma or the closing bracket.
func (d *decoder) next(first *bool, end byte) (bool, *domain.Error) {
	d.ws()
	if d.i >= len(d.b) {
		return false, d.syntax()
	}
	c := d.b[d.i]
	if *first {
		*first = false
		if c == end {
			d.i++
			return false, nil
		}
		return true, nil
	}
	switch c {
	case ',':
		d.i++
		d.ws()
		if d.i < len(d.b) && d.b[d.i] == end { // trailing comma
			return false, d.syntax()
		}
		return true, nil
	case end:
		d.i++
		return false, nil
	}
	return false, d.syntax()
}

// str consumes a JSON string at the cursor and returns the bounds of its
// raw content and whether it contains escapes.
func (d *decoder) str() (start, end int, esc bool, err *domain.Error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return 0, 0, false, d.syntax()
	}
	d.i++
	start = d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			end = d.i
			d.i++
			return start, end, esc, nil
		case c == '\\':
			esc = true
			d.i++
			if d.i >= len(d.b) {
				return 0, 0, false, d.syntax()
			}
			switch d.b[d.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i++
			case 'u':
				if d.i+4 >= len(d.b) {
					d.i = len(d.b)
					return 0, 0, false, d.syntax()
				}
				for k := 1; k <= 4; k++ {
					if !isHex(d.b[d.i+k]) {
						d.i += k
						return 0, 0, false, d.syntax()
					}
				}
				d.i += 5
			default:
				return 0, 0, false, d.syntax()
			}
		case c < 0x20:
			return 0, 0, false, d.syntax()
		default:
			d.i++
		}
	}
	return 0, 0, false, d.syntax()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// key consumes a member key and the colon after it. The key is returned
// unescaped; it aliases the body when it has no escapes.
func (d *decoder) key() ([]byte, *domain.Error) {
	st, en, esc, err := d.str()
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != ':' {
		return nil, d.syntax()
	}
	d.i++
	if esc {
		return unescape(d.b[st:en]), nil
	}
	return d.b[st:en], nil
}

// unescape decodes the content of a well-formed JSON string as
// encoding/json does: invalid UTF-8 and unpaired surrogates become U+FFFD.
func unescape(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			if c < utf8.RuneSelf {
				out = append(out, c)
				i++
				continue
			}
			r, n := utf8.DecodeRune(raw[i:])
			out = utf8.AppendRune(out, r) // RuneError for invalid bytes
			i += n
			continue
		}
		switch raw[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(raw[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, hex4(raw[i+2:])); dec != utf8.RuneError {
						r2 = dec
						i += 6
					}
				}
				r = r2
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, raw[i+1])
		}
		i += 2
	}
	return out
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// validUTF8 returns b as a string with every invalid byte replaced by
// U+FFFD, as encoding/json decodes it.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		out = utf8.AppendRune(out, r)
		b = b[n:]
	}
	return string(out)
}

// ---- values ----

// text returns the body bytes [st, en) as a string, sharing one copy of a
// small body.
func (d *decoder) text(st, en int) string {
	if len(d.b) > shareLimit {
		return string(d.b[st:en])
	}
	if d.share == "" {
		d.share = string(d.b)
	}
	return d.share[st:en]
}

// stringValue consumes a string value: its bytes unescaped (they alias the
// body unless esc) and its span st..en in the body.
func (d *decoder) stringValue() (raw []byte, st, en int, esc bool, err *domain.Error) {
	if err := d.want('"', "a string"); err != nil {
		return nil, 0, 0, false, err
	}
	if st, en, esc, err = d.str(); err != nil {
		return nil, 0, 0, false, err
	}
	raw = d.b[st:en]
	if esc {
		raw = unescape(raw)
	}
	return raw, st, en, esc, nil
}

// formString consumes a string value of form f.
func (d *decoder) formString(f *form) (string, *domain.Error) {
	raw, st, en, esc, err := d.stringValue()
	if err != nil {
		return "", err
	}
	if !f.match(raw) {
		return "", f.mismatch()
	}
	if esc {
		return string(raw), nil
	}
	return d.text(st, en), nil
}

// enum consumes a string value that must be a or b, and returns the
// constant.
func (d *decoder) enum(a, b string) (string, *domain.Error) {
	raw, _, _, _, err := d.stringValue()
	if err != nil {
		return "", err
	}
	switch string(raw) {
	case a:
		return a, nil
	case b:
		return b, nil
	}
	return "", invalid("must be %q or %q", a, b)
}

const notUUID = "must be a UUID (8-4-4-4-12 hexadecimal digits)"

// uuid consumes a UUID string and returns it in lower case.
func (d *decoder) uuid() (string, *domain.Error) {
	raw, st, en, esc, err := d.stringValue()
	if err != nil {
		return "", err
	}
	if len(raw) != 36 {
		return "", invalid(notUUID)
	}
	upper := false
	for k, c := range raw {
		switch k {
		case 8, 13, 18, 23:
			if c != '-' {
				return "", invalid(notUUID)
			}
			continue
		}
		if !isHex(c) {
			return "", invalid(notUUID)
		}
		upper = upper || 'A' <= c && c <= 'F'
	}
	switch {
	case upper:
		return strings.ToLower(string(raw)), nil
	case esc:
		return string(raw), nil
	}
	return d.text(st, en), nil
}

func (d *decoder) boolean() (bool, *domain.Error) {
	d.ws()
	if d.i >= len(d.b) || !isValueStart(d.b[d.i]) {
		return false, d.syntax()
	}
	switch c := d.b[d.i]; c {
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	default:
		return false, invalid("must be a boolean, not %s", strictjson.KindName(c))
	}
}

func (d *decoder) literal(lit string) *domain.Error {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return d.syntax()
	}
	d.i += len(lit)
	return nil
}

// positiveInt consumes a JSON integer literal 1..MaxProtocolVersion.
func (d *decoder) positiveInt() (int, *domain.Error) {
	d.ws()
	if d.i >= len(d.b) || !isValueStart(d.b[d.i]) {
		return 0, d.syntax()
	}
	if c := d.b[d.i]; c != '-' && (c < '0' || c > '9') {
		return 0, invalid("must be a positive integer, not %s", strictjson.KindName(c))
	}
	st := d.i
	for d.i < len(d.b) && ('0' <= d.b[d.i] && d.b[d.i] <= '9') {
		d.i++
	}
	digits := d.b[st:d.i]
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E', '-', '+':
			return 0, invalid("must be a positive integer (no sign, fraction or exponent)")
		}
	}
	if len(digits) == 0 || digits[0] == '0' || len(digits) > 10 {
		return 0, invalid("must be a positive integer from 1 to %d", MaxProtocolVersion)
	}
	n := 0
	for _, c := range digits {
		n = n*10 + int(c-'0')
	}
	if n > MaxProtocolVersion {
		return 0, invalid("must be a positive integer from 1 to %d", MaxProtocolVersion)
	}
	return n, nil
}

// stringList consumes an array of distinct strings read by elem; errors
// point at base/N. A non-nil empty slice is returned for [].
func (d *decoder) stringList(base string, elem func() (string, *domain.Error)) ([]string, *domain.Error) {
	return distinctList(d, base, func(n int) (string, *domain.Error) {
		v, err := elem()
		if err != nil {
			return "", err.At(elemPtr(base, n))
		}
		return v, nil
	}, self, func(out []string, v string, n int) *domain.Error {
		return invalid("%q is listed twice (first at index %d)", v, indexOf(out, self, v)).At(elemPtr(base, n))
	})
}

// distinctList consumes the array at base of elements read by elem (n is the
// index) whose keys are distinct; twice words the error of element n
// repeating a key. A non-nil empty slice is returned for [].
func distinctList[E any](d *decoder, base string, elem func(n int) (E, *domain.Error), key func(E) string,
	twice func(out []E, e E, n int) *domain.Error) ([]E, *domain.Error) {
	if err := d.want('[', "an array"); err != nil {
		return nil, err.At(base)
	}
	d.i++
	out := []E{}
	var set distinct
	first := true
	for n := 0; ; n++ {
		more, err := d.next(&first, ']')
		if err != nil {
			return nil, err
		}
		if !more {
			return out, nil
		}
		e, err := elem(n)
		if err != nil {
			return nil, err
		}
		if seenIn(&set, out, key, key(e)) {
			return nil, twice(out, e, n)
		}
		out = append(grow(out), e)
	}
}

// listCap is the capacity a list gets at its first element: most lists
// of a heartbeat are short, so one allocation usually suffices.
const listCap = 4

func grow[E any](list []E) []E {
	if cap(list) == 0 {
		return make([]E, 0, listCap)
	}
	return list
}

func self(s string) string            { return s }
func queueOf(e ReadinessEntry) string { return e.Queue }

func indexOf[E any](list []E, key func(E) string, v string) int {
	for k, x := range list {
		if key(x) == v {
			return k
		}
	}
	return -1
}

// distinct answers "is v already a key in list" by a linear scan for short
// lists and through a set for long ones (a 64 KiB body holds thousands).
type distinct struct{ m map[string]struct{} }

const distinctLinear = 32

func seenIn[E any](s *distinct, list []E, key func(E) string, v string) bool {
	if s.m == nil && len(list) < distinctLinear {
		return indexOf(list, key, v) >= 0
	}
	if s.m == nil {
		s.m = make(map[string]struct{}, 2*len(list))
		for _, x := range list {
			s.m[key(x)] = struct{}{}
		}
	}
	if _, ok := s.m[v]; ok {
		return true
	}
	s.m[v] = struct{}{}
	return false
}

// ---- the members of agent_heartbeat.v1 ----

// members walks the members of the object at base (with elem ≥ 0: at
// base/elem, built only for an error) that starts at the cursor.
// names are the members the object takes (at most 16); member reads the
// value of names[i] at the cursor. A key not in names is unknown_member at
// base/key, a key given before is invalid_argument at its second
// occurrence, and an error of member that has no pointer yet gets the
// member's. It returns the members seen, bit i for names[i].
func (d *decoder) members(base string, elem int, names []string, member func(i int) *domain.Error) (uint16, *domain.Error) {
	if err := d.want('{', "an object"); err != nil {
		return 0, err.At(pointerAt(base, elem))
	}
	d.i++
	var seen uint16
	first := true
	for {
		more, err := d.next(&first, '}')
		if err != nil || !more {
			return seen, err
		}
		k, err := d.key()
		if err != nil {
			return seen, err
		}
		i := indexKey(names, k)
		if i < 0 {
			return seen, unknownMember(pointerAt(base, elem), k)
		}
		if seen&(1<<i) != 0 {
			return seen, duplicateKey(pointerAt(base, elem)+"/"+names[i], names[i]) // the names need no escaping
		}
		seen |= 1 << i
		if err := member(i); err != nil {
			if err.Pointer == "" {
				err = err.At(pointerAt(base, elem) + "/" + names[i])
			}
			return seen, err
		}
	}
}

// pointerAt is the pointer base, or base/elem when elem ≥ 0.
func pointerAt(base string, elem int) string {
	if elem < 0 {
		return base
	}
	return elemPtr(base, elem)
}

func indexKey(names []string, k []byte) int {
	for i, n := range names {
		if n == string(k) {
			return i
		}
	}
	return -1
}

// The members of each object, in the order of the table of
// agent_heartbeat.v1; the index of a name is its bit in the seen set.
var (
	topMembers = []string{"state", "billing_mode", "billing_modes_supported", "tool_class",
		"runtime_version", "billing_evidence", "details", "project_readiness"}
	evidenceMembers = []string{"key_type", "method"}
	detailsMembers  = []string{"capabilities", "active_runs", "degraded_reasons", "adapter", "runtime", "protocol_version"}
	capsMembers     = []string{"followups", "components", "voice_input", "title", "files_out"}
	adapterMembers  = []string{"name", "version"}
	runtimeMembers  = []string{"name"}
	entryMembers    = []string{"queue", "ready", "reason"}
)

func (d *decoder) top(h *Heartbeat) *domain.Error {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return strictjson.Heartbeat.NotObject("", "")
	}
	seen, err := d.members("", -1, topMembers, func(i int) (err *domain.Error) {
		switch i {
		case 0:
			h.State, err = d.enum(StateOnline, StateDegraded)
		case 1:
			a := d.arena()
			a.billingMode, err = d.formString(&codeForm)
			h.BillingMode = &a.billingMode
		case 2:
			h.BillingModesSupported, err = d.stringList("/billing_modes_supported", d.code)
		case 3:
			a := d.arena()
			a.toolClass, err = d.formString(&codeForm)
			h.ToolClass = &a.toolClass
		case 4:
			a := d.arena()
			a.runtimeVersion, err = d.formString(&versionForm)
			h.RuntimeVersion = &a.runtimeVersion
		case 5:
			if err = d.evidence(); err == nil {
				h.BillingEvidence = &d.a.evidence
			}
		case 6:
			err = d.details(&h.Details)
		case 7:
			h.ProjectReadiness, err = d.readiness()
			h.ProjectReadinessPresent = true
		}
		return err
	})
	if err != nil {
		return err
	}
	d.ws()
	if d.i != len(d.b) {
		return d.syntax()
	}
	if seen&1 == 0 {
		return missing("/state", "state")
	}
	degraded := len(h.Details.DegradedReasons) > 0
	switch {
	case h.State == StateDegraded && !degraded:
		return invalid(`state "degraded" requires a non-empty details.degraded_reasons`).At("/state")
	case h.State == StateOnline && degraded:
		return invalid(`details.degraded_reasons is non-empty, so state must be "degraded"`).At("/state")
	}
	return nil
}

func (d *decoder) code() (string, *domain.Error) { return d.formString(&codeForm) }

func (d *decoder) evidence() *domain.Error {
	const base = "/billing_evidence"
	ev := &d.arena().evidence
	seen, err := d.members(base, -1, evidenceMembers, func(i int) (err *domain.Error) {
		if i == 0 {
			ev.KeyType, err = d.code()
		} else {
			ev.Method, err = d.code()
		}
		return err
	})
	switch {
	case err != nil:
		return err
	case seen&1 == 0:
		return missing(base+"/key_type", "key_type")
	case seen&2 == 0:
		return missing(base+"/method", "method")
	}
	return nil
}

func (d *decoder) details(det *Details) *domain.Error {
	const base = "/details"
	_, err := d.members(base, -1, detailsMembers, func(i int) (err *domain.Error) {
		switch i {
		case 0:
			if err = d.capabilities(); err == nil {
				det.Capabilities = &d.a.caps
			}
		case 1:
			det.ActiveRuns, err = d.stringList(base+"/active_runs", d.uuid)
		case 2:
			det.DegradedReasons, err = d.stringList(base+"/degraded_reasons", d.code)
		case 3:
			if err = d.adapter(); err == nil {
				det.Adapter = &d.a.adapter
			}
		case 4:
			if err = d.runtime(); err == nil {
				det.Runtime = &d.a.runtime
			}
		case 5:
			a := d.arena()
			a.protocolVersion, err = d.positiveInt()
			det.ProtocolVersion = &a.protocolVersion
		}
		return err
	})
	return err
}

func (d *decoder) capabilities() *domain.Error {
	const base = "/details/capabilities"
	a := d.arena()
	c := &a.caps
	_, err := d.members(base, -1, capsMembers, func(i int) (err *domain.Error) {
		if i == 0 {
			a.followups, err = d.enum(FollowupsSteer, FollowupsQueue)
			c.Followups = &a.followups
			return err
		}
		slot := &a.bools[i-1]
		*slot, err = d.boolean()
		switch i {
		case 1:
			c.Components = slot
		case 2:
			c.VoiceInput = slot
		case 3:
			c.Title = slot
		case 4:
			c.FilesOut = slot
		}
		return err
	})
	return err
}

func (d *decoder) adapter() *domain.Error {
	const base = "/details/adapter"
	a := d.arena()
	seen, err := d.members(base, -1, adapterMembers, func(i int) (err *domain.Error) {
		if i == 0 {
			a.adapter.Name, err = d.formString(&nameForm)
		} else {
			a.adapterVersion, err = d.formString(&versionForm)
			a.adapter.Version = &a.adapterVersion
		}
		return err
	})
	if err == nil && seen&1 == 0 {
		return missing(base+"/name", "name")
	}
	return err
}

func (d *decoder) runtime() *domain.Error {
	const base = "/details/runtime"
	a := d.arena()
	seen, err := d.members(base, -1, runtimeMembers, func(int) (err *domain.Error) {
		a.runtime.Name, err = d.formString(&nameForm)
		return err
	})
	if err == nil && seen&1 == 0 {
		return missing(base+"/name", "name")
	}
	return err
}

func (d *decoder) readiness() ([]ReadinessEntry, *domain.Error) {
	const base = "/project_readiness"
	return distinctList(d, base, d.readinessEntry, queueOf, func(out []ReadinessEntry, e ReadinessEntry, n int) *domain.Error {
		return invalid("queue %q is listed twice (entries %d and %d)", e.Queue, indexOf(out, queueOf, e.Queue), n).At(base)
	})
}

func (d *decoder) readinessEntry(n int) (ReadinessEntry, *domain.Error) {
	const base = "/project_readiness"
	var e ReadinessEntry
	seen, err := d.members(base, n, entryMembers, func(i int) (err *domain.Error) {
		switch i {
		case 0:
			e.Queue, err = d.formString(&nameForm)
		case 1:
			e.Ready, err = d.boolean()
		case 2:
			e.Reason, err = d.code()
		}
		return err
	})
	switch {
	case err != nil:
		return e, err
	case seen&1 == 0:
		return e, missing(elemPtr(base, n)+"/queue", "queue")
	case seen&2 == 0:
		return e, missing(elemPtr(base, n)+"/ready", "ready")
	}
	return e, nil
}

// DecodeHeartbeat decodes and checks one `agent_heartbeat.v1` body
// (design: Heartbeat body, Value forms). It is the one decoder both transports use.
//
// Errors are *domain.Error with Code domain.CodeUnknownMember (a member not
// in the body table (design: Heartbeat body), at any level; Pointer is the RFC 6901 pointer of that member) or
// domain.CodeInvalidArgument (Pointer is the offending member or list
// element). In detail:
//
//   - A body longer than MaxBodyBytes, or one that is not exactly one
//     well-formed JSON value (RFC 8259; whitespace around it is allowed, any
//     other trailing data is not), is invalid_argument with Pointer "" and a
//     Detail naming the byte offset. This is reported whatever else is wrong
//     with the body.
//   - Otherwise the first violation in document order is reported, read left
//     to right: a member is judged at its key (unknown, duplicate key) and
//     then at its value (type, form, duplicate list element); rules that need
//     a whole object (required members, the state/degraded_reasons rule) are
//     judged at its closing brace. The result is deterministic.
//   - A top level that is not an object: invalid_argument, Pointer "".
//   - A JSON null is never accepted, also not for optional members: omit the
//     member instead. (For project_readiness, null would be ambiguous
//     between "unchanged" and "clear".)
//   - A key that appears twice in one object is invalid_argument at the
//     second occurrence (keys are compared after unescaping).
//   - A missing required member is invalid_argument pointing at where it
//     belongs (e.g. /state, /billing_evidence/method).
//   - state is "online" or "degraded"; "degraded" without non-empty
//     details.degraded_reasons, or "online" with them, is invalid_argument at
//     /state.
//   - Strings must have the form of their member: name
//     ^[a-z0-9][a-z0-9._-]*$ (≤ MaxNameLen bytes), version
//     ^[0-9A-Za-z][0-9A-Za-z.+_-]*$ (≤ MaxVersionLen), code
//     ^[a-z0-9][a-z0-9_.:-]*$ (≤ MaxCodeLen), UUID 8-4-4-4-12 hex. The
//     rejected value is not echoed in Detail (it may be a secret).
//   - A repeated list element is invalid_argument at the repeated element
//     (e.g. /details/degraded_reasons/2); a repeated readiness queue at
//     /project_readiness (design: Heartbeat body).
//   - details.protocol_version is a JSON integer literal without fraction
//     or exponent, 1 ≤ n ≤ MaxProtocolVersion.
//
// Nesting: the decoder walks only members (design: Heartbeat body) describes (at most three
// levels deep) and rejects any other value at its first byte, so nesting is
// bounded by the schema; the well-formedness check of a rejected body is
// iterative (encoding/json, itself bounded at 10000 levels).
//
// Strings of the returned value may share one copy of body when the body is
// small; body itself is not retained and may be reused by the caller.
func DecodeHeartbeat(body []byte) (Heartbeat, error) {
	h, err := decode(body)
	if err != nil {
		return Heartbeat{}, err
	}
	return h, nil
}

// UnmarshalJSON decodes b with DecodeHeartbeat.
func (h *Heartbeat) UnmarshalJSON(b []byte) error {
	v, err := DecodeHeartbeat(b)
	if err != nil {
		return err
	}
	*h = v
	return nil
}
